// `exo-loadgen --print-keys K`: the K hottest key names, hottest first, one per line, as the
// generator would send them after `--swaps` hot-set swaps. The experiment harness prefills the
// cache with these (the thesis pre-populated its caches), so the rank -> key mapping is defined
// once, here in the generator, and not copied into Python.
#pragma once

#include <string>
#include <vector>

namespace exo::loadgen {

// True when args (args[0] is the program) ask for --print-keys; then *exit_code is set.
bool run_print_keys(const std::vector<std::string>& args, int* exit_code);

}  // namespace exo::loadgen

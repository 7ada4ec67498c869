#include "loadgen/print_keys.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <stdexcept>

#include "loadgen/hot_set_swap.h"

namespace exo::loadgen {

bool run_print_keys(const std::vector<std::string>& args, int* exit_code) {
  if (std::find(args.begin(), args.end(), "--print-keys") == args.end()) return false;
  uint64_t count = 0, keys = 100'000'000, swap_count = 0, swaps = 0;
  uint32_t key_size = 16;
  CLI::App app{"exo-loadgen --print-keys: the hottest key names, hottest first"};
  app.add_option("--print-keys", count, "how many keys (K)")->required();
  app.add_option("--keys", keys, "key space size N")->capture_default_str();
  app.add_option("--key-size", key_size, "key bytes")->capture_default_str();
  app.add_option("--swap-count", swap_count, "hot-set size H of the swap schedule")->capture_default_str();
  app.add_option("--swaps", swaps, "swaps done (0: the initial hot set)")->capture_default_str();
  std::vector<std::string> rev(args.rbegin(), args.rend() - 1);  // CLI11 wants them reversed
  try {
    app.parse(rev);
    if (count > keys) throw std::invalid_argument("--print-keys: more keys than --keys");
    const HotSetSwap order(keys, swap_count);
    for (uint64_t rank = 1; rank <= count; ++rank)
      std::printf("%s\n", key_name(order.key_for_rank(rank, swaps), key_size).c_str());
    *exit_code = std::fflush(stdout) == 0 ? 0 : 1;
  } catch (const CLI::ParseError& e) {
    *exit_code = app.exit(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "exo-loadgen --print-keys: %s\n", e.what());
    *exit_code = 2;
  }
  return true;
}

}  // namespace exo::loadgen

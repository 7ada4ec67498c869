// What every DPDK process of the cluster (cache node, wimpy emulator) does around EAL: split its
// command line at "--", and turn SIGINT/SIGTERM into the quit flag its lcore loops poll.
// DPDK-free and header-only.
#pragma once

#include <signal.h>

#include <atomic>
#include <cstring>
#include <string>
#include <vector>

namespace exo::dpdk {

// argv up to "--" is the program's own (returns that argc, argv[0] included); what follows
// goes to EAL untouched, via *eal_extra.
inline int split_eal_extra(int argc, char** argv, std::vector<std::string>* eal_extra) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) {
      eal_extra->assign(argv + i + 1, argv + argc);
      return i;
    }
  }
  return argc;
}

// Set by SIGINT/SIGTERM once install_quit_signals() has run.
inline std::atomic<bool>& quit_flag() {
  static std::atomic<bool> quit{false};
  return quit;
}

// Call after rte_eal_init (EAL installs handlers of its own), so these win.
inline void install_quit_signals() {
  struct sigaction sa {};
  sa.sa_handler = [](int) { quit_flag().store(true); };
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

}  // namespace exo::dpdk

#include "eal_args.h"

namespace exo::cache {

std::vector<std::string> build_eal_args(const std::string& prog, const CacheNodeInfo& cfg,
                                        uint32_t mtu, const std::vector<std::string>& extra) {
  return exo::dpdk::build_eal_args(
      prog, exo::dpdk::EalSpec{"exo-" + cfg.name, cfg.lcores, cfg.iface, cfg.eal_args}, mtu, extra);
}

}  // namespace exo::cache

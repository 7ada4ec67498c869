#include "dpdk/port.h"

#include <pthread.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "log.h"

namespace exo::dpdk {
namespace {

constexpr uint16_t kRxDesc = 1024, kTxDesc = 1024;
constexpr unsigned kPoolCache = 256;

[[noreturn]] void fail(const std::string& what, int rc) {
  throw std::runtime_error(what + ": " + rte_strerror(rc < 0 ? -rc : rc));
}

}  // namespace

Port open_port(const PortConfig& cfg) {
  Port p;
  p.nb_queues = cfg.nb_queues;
  const uint16_t avail = rte_eth_dev_count_avail();
  if (avail == 0) throw std::runtime_error("no DPDK ethdev (check the vdev/-a EAL args)");
  uint16_t pid;
  RTE_ETH_FOREACH_DEV(pid) {
    p.id = pid;
    break;
  }
  if (avail > 1) LOG_WARN("%u ethdevs available; using port %u", avail, p.id);

  // Data room: headroom + the largest frame (14 + mtu), so a GET reply is always built in the RX
  // mbuf itself (zero copy), however large the cached value (<= max_kv_bytes(mtu)).
  // (The af_packet PMD additionally insists on its ring frame size, see min_data_room.)
  const uint32_t room =
      RTE_PKTMBUF_HEADROOM + std::max<uint32_t>(14 + cfg.mtu + 4 /* VLAN slack */, cfg.min_data_room);
  const unsigned per_q = kRxDesc + kTxDesc + 2 * cfg.burst + kPoolCache;
  const unsigned n = std::max(8191u, cfg.nb_queues * per_q);
  p.pool = rte_pktmbuf_pool_create("exo_pool", n, kPoolCache, 0, static_cast<uint16_t>(room),
                                   static_cast<int>(rte_socket_id()));
  if (!p.pool) fail("rte_pktmbuf_pool_create", rte_errno);

  rte_eth_dev_info info{};
  int rc = rte_eth_dev_info_get(p.id, &info);
  if (rc != 0) fail("rte_eth_dev_info_get", rc);
  if (cfg.nb_queues > info.max_rx_queues || cfg.nb_queues > info.max_tx_queues)
    throw std::runtime_error("port supports " + std::to_string(info.max_rx_queues) +
                             " queues, lcores need " + std::to_string(cfg.nb_queues));

  rte_eth_conf conf{};
  if (cfg.nb_queues > 1 && info.flow_type_rss_offloads != 0) {
    // Spread requests over the lcores. (af_packet spreads with PACKET_FANOUT instead.)
    conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
    conf.rx_adv_conf.rss_conf.rss_hf = RTE_ETH_RSS_IP & info.flow_type_rss_offloads;
  }
  if (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE)
    conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE;  // one pool, refcnt 1
  rc = rte_eth_dev_configure(p.id, cfg.nb_queues, cfg.nb_queues, &conf);
  if (rc != 0) fail("rte_eth_dev_configure", rc);

  uint16_t nrx = kRxDesc, ntx = kTxDesc;
  rc = rte_eth_dev_adjust_nb_rx_tx_desc(p.id, &nrx, &ntx);
  if (rc != 0) fail("rte_eth_dev_adjust_nb_rx_tx_desc", rc);
  // A failed MTU set is not fatal: af_packet inherits the kernel interface's MTU.
  if ((rc = rte_eth_dev_set_mtu(p.id, static_cast<uint16_t>(cfg.mtu))) != 0)
    LOG_WARN("rte_eth_dev_set_mtu(%u): %s (continuing)", cfg.mtu, rte_strerror(-rc));

  const int socket = rte_eth_dev_socket_id(p.id);
  for (uint16_t q = 0; q < cfg.nb_queues; ++q) {
    rte_eth_rxconf rxc = info.default_rxconf;
    rc = rte_eth_rx_queue_setup(p.id, q, nrx, socket, &rxc, p.pool);
    if (rc != 0) fail("rte_eth_rx_queue_setup", rc);
    rte_eth_txconf txc = info.default_txconf;
    txc.offloads = conf.txmode.offloads;
    rc = rte_eth_tx_queue_setup(p.id, q, ntx, socket, &txc);
    if (rc != 0) fail("rte_eth_tx_queue_setup", rc);
  }
  rc = rte_eth_dev_start(p.id);
  if (rc != 0) fail("rte_eth_dev_start", rc);
  rc = rte_eth_promiscuous_enable(p.id);
  if (rc != 0 && rc != -ENOTSUP) LOG_WARN("promiscuous mode: %s", rte_strerror(-rc));
  rte_eth_macaddr_get(p.id, &p.mac);
  return p;
}

void close_port(Port& port) {
  if (int rc = rte_eth_dev_stop(port.id); rc != 0) LOG_WARN("rte_eth_dev_stop: %s", rte_strerror(-rc));
  if (int rc = rte_eth_dev_close(port.id); rc != 0) LOG_WARN("rte_eth_dev_close: %s", rte_strerror(-rc));
}

void pin_to_non_lcore_cpus(const cpu_set_t& original, const std::vector<unsigned>& lcore_ids) {
  cpu_set_t set = original;
  for (unsigned id : lcore_ids) {
    const rte_cpuset_t cpus = rte_lcore_cpuset(id);
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &cpus)) CPU_CLR(c, &set);
  }
  if (CPU_COUNT(&set) == 0) set = original;
  if (int rc = pthread_setaffinity_np(pthread_self(), sizeof set, &set); rc != 0)
    LOG_WARN("pthread_setaffinity_np: %s", std::strerror(rc));
}

}  // namespace exo::dpdk

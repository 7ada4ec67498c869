// Ethernet port, queues and mempool setup: the shared DPDK port code (common/cpp/dpdk/port.h,
// also used by the wimpy emulator) under the cache node's names.
#pragma once

#include "dpdk/port.h"

namespace exo::cache {

using exo::dpdk::close_port;
using exo::dpdk::open_port;
using exo::dpdk::Port;
using exo::dpdk::PortConfig;

}  // namespace exo::cache

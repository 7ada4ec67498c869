// The data-plane logic of the db node, independent of sockets: one received frame in, the
// reply frame (or nothing) out. The packet loop feeds it from an AF_PACKET socket; the tests
// feed it byte buffers with a fake store and a fake propagator.
//
// One RequestHandler per packet thread: it owns that thread's counter block, a reusable value
// buffer and the thread's hot-key sampler, and is not thread-safe. The objects in NodeContext are shared and are.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "cached_keys.h"
#include "cluster.h"
#include "counters.h"
#include "hot_keys/hot_key_detector.h"
#include "hot_keys/sampler.h"
#include "propagator.h"
#include "store.h"
#include "wire.h"

namespace exo::db {

// Everything the handlers of all threads share. Outlives the handlers.
struct NodeContext {
  const Cluster& cluster;
  uint32_t self_index;  // into cluster.db_nodes
  KvStore& store;
  CachedKeys& cached;
  Propagator& propagator;
  TxIdSource& txids;
  HotKeyDetector* hot_keys = nullptr;  // null: no hot-key detection (no GET is sampled)

  const DbNodeInfo& self() const { return cluster.db_nodes[self_index]; }
};

class RequestHandler {
 public:
  RequestHandler(const NodeContext& ctx, Counters& counters);

  // Handles one received frame (counts it in rx_frames). Writes the reply into `out` and
  // returns its length, or returns 0 when nothing must be sent (ignored or malformed frame).
  // `out` is capped at 14 + mtu bytes; `out` must not alias `frame`.
  size_t handle(std::span<const uint8_t> frame, std::span<uint8_t> out);

 private:
  size_t handle_get(const wire::FrameView& req, std::span<uint8_t> out);
  size_t handle_write(const wire::FrameView& req, uint64_t hash, std::span<uint8_t> out);
  // Applies the write to the store (put or delete).
  StoreResult write(const wire::FrameView& req);
  size_t reply(const wire::FrameView& req, std::span<uint8_t> out, uint8_t status,
               std::span<const uint8_t> value = {});
  size_t error(const wire::FrameView& req, std::span<uint8_t> out);

  const NodeContext& ctx_;
  Counters& c_;
  uint8_t self_mac_[6];
  wire::Addr self_addr_;
  size_t max_frame_;    // 14 + mtu
  std::string value_;   // GET buffer, reused so steady state does not allocate
  Sampler sampler_;     // which GETs feed ctx_.hot_keys
};

}  // namespace exo::db

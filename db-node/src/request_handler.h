// The data-plane logic of the db node, independent of sockets: one received frame in, the
// reply frame (or nothing) out. The packet loop feeds it from an AF_PACKET socket; the tests
// feed it byte buffers with a fake store and a fake propagator.
//
// One RequestHandler per packet thread: it owns that thread's counter block, a reusable value
// buffer and the thread's hot-key sampler, and is not thread-safe. The objects in NodeContext are shared and are.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cached_keys.h"
#include "cluster.h"
#include "counters.h"
#include "dedup_table.h"
#include "hot_keys/hot_key_detector.h"
#include "hot_keys/sampler.h"
#include "ms_clock.h"
#include "propagator.h"
#include "records.h"
#include "replication/chain_runtime.h"
#include "resolver.h"
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
  DedupTable& dedup;
  Resolver& resolver;
  HotKeyDetector* hot_keys = nullptr;  // null: no hot-key detection (no GET is sampled)
  // Dedup record times: the wall clock, because records outlive the process (tests drive it).
  Clock wall_ms = wall_clock_ms;
  // Chain replication (docs/design/replication.md). Null, or a table whose chains all have one
  // node: every slot's owner takes its writes and serves its GETs, nothing is forwarded.
  ChainRuntime* chain = nullptr;

  const DbNodeInfo& self() const { return cluster.db_nodes[self_index]; }
};

// One frame of a received burst and where its reply goes (RequestHandler::handle_burst).
struct BurstItem {
  std::span<const uint8_t> frame;  // must stay valid for the whole burst
  std::span<uint8_t> out;          // must not alias any frame of the burst
  size_t len = 0;                  // set: the reply's length, 0 = nothing to send
};

class RequestHandler {
 public:
  RequestHandler(const NodeContext& ctx, Counters& counters);

  // Handles a burst in two passes (batch, then execute): writes and bad frames are answered in
  // arrival order, and the burst's GETs are then read with one KvStore::multi_get and answered.
  // A GET that arrived before a write of the same key in the same burst may see that write:
  // both happen while both requests are outstanding, so any order is linearizable.
  void handle_burst(std::span<BurstItem> items);

  // Handles one received frame (counts it in rx_frames). Writes the reply into `out` and
  // returns its length, or returns 0 when nothing must be sent (ignored or malformed frame).
  // `out` is capped at 14 + mtu bytes; `out` must not alias `frame`.
  size_t handle(std::span<const uint8_t> frame, std::span<uint8_t> out);

 private:
  // Screens one frame (counts it); true if it is a request of ours, parsed into *req, with its
  // key's hash in *hash and whether this node owns the key's partition in *owned.
  bool accept(std::span<const uint8_t> frame, wire::FrameView* req, uint64_t* hash, bool* owned);
  // Why a request must not be served here (data-plane hygiene, docs/switch-rules.md), counted;
  // nullptr when it may. A write for a key of another node's partition (it would be applied
  // and acknowledged but never read again: reads go to the owner), or a GET dressed as a cache
  // node's forwarded miss (prefix 0xAE, an older cache node's 0xBA, or FORWARDED) without the
  // DSCP the switch writes on frames from cache-node ports (wire::kForwardedDscp): a forgery.
  const char* refusal(const wire::FrameView& req, bool owned);
  // A GET's counters and hot-key sampling (before its read); `owned`: only GETs of this
  // node's keys feed its hot-key detector (its REPORTs speak for its own partitions).
  void note_get(const wire::FrameView& req, bool owned);
  // A GET's reply from its read.
  size_t answer_get(const wire::FrameView& req, const StoreResult& r, const std::string& value,
                    std::span<uint8_t> out);
  // Where a request of a replicated slot goes (docs/design/replication.md, 3.7): served here,
  // dropped without a reply (a write this node is not the head for), or answered BUSY (a GET
  // this node is not the read server for). Always kServe when `table` is null.
  enum class Route : uint8_t { kServe, kDrop, kBusy };
  Route route(const ChainTable* table, const wire::FrameView& req, uint64_t hash, bool* owned);
  // Dedup check, then write_cached() for a key a cache node holds, else the uncached write.
  // Wire status of a write: OK applied; BUSY and ERROR definitely not applied. `table`: the
  // chain table when the cluster replicates (this node is the key's head), else null.
  size_t handle_write(const wire::FrameView& req, uint64_t hash, const ChainTable* table,
                      std::span<uint8_t> out);
  // An uncached write at a replicated slot's head (write_chained.cc): applied here with its
  // outcome record, passed down the chain, answered once the tail has it. `apply_data` false:
  // only the outcome record (a DELETE of a missing key, rec.status NOT_FOUND). Returns 0 (no
  // reply: the client resends) when the rest of the chain did not acknowledge; the write is
  // then left to the chain runtime and `claim` kept, so resends wait for its outcome.
  // The write is not forwarded here but joins the burst's batch (chained_), answered by
  // flush_chained() once the rest of the chain acknowledged it; it returns 0 meanwhile.
  size_t write_chained(const wire::FrameView& req, uint64_t hash, const ChainTable& table,
                       const DedupRecord& rec, bool apply_data, DedupClaim& claim,
                       std::span<uint8_t> out);
  // Forwards the burst's batched chained writes (ChainRuntime::forward_batch: one round trip
  // per next node instead of one per write) and answers each one the chain acknowledged. One
  // not acknowledged stays uncommitted, the resolver's, and unanswered (the client resends).
  void flush_chained();
  // The two-phase write of a key `cache_node` holds (write_cached.cc: the shell of the
  // coordinator's CachedWrite). `guard` is the key's stripe lock; `rec` is the dedup record to
  // keep if the write is applied. Empty when the key turned out untracked (settling its
  // earlier decision was answered cached=false): the caller writes it uncached.
  // `table`: the chain table when the slot replicates (the write then goes down the chain
  // before the local commit; `claim` is kept if it is left to the chain runtime).
  std::optional<size_t> write_cached(const wire::FrameView& req, CachedKeys::Guard& guard,
                                     const std::string& cache_node, const DedupRecord& rec,
                                     uint64_t hash, const ChainTable* table, DedupClaim& claim,
                                     std::span<uint8_t> out);
  size_t reply(const wire::FrameView& req, std::span<uint8_t> out, uint8_t status,
               std::span<const uint8_t> value = {});
  size_t error(const wire::FrameView& req, std::span<uint8_t> out);
  size_t busy(const wire::FrameView& req, std::span<uint8_t> out);
  // Answers a write BUSY or ERROR (definitely not applied) and records that outcome for its
  // request id, in memory and (unsynced) on disk, so a late copy gets the same answer.
  size_t refuse(const wire::FrameView& req, DedupRecord rec, uint8_t status,
                std::span<uint8_t> out);

  const NodeContext& ctx_;
  Counters& c_;
  uint8_t self_mac_[6];
  wire::Addr self_addr_;
  size_t max_frame_;    // 14 + mtu
  wire::ScreenPolicy screen_policy_;  // the pre-filter's view of this node
  std::string existing_;  // a DELETE's read of the key (does it exist?), reused
  // handle_burst's GETs: reused across bursts so steady state does not allocate
  struct PendingGet {
    size_t item;
    wire::FrameView req;
  };
  std::vector<PendingGet> gets_;
  std::vector<Bytes> get_keys_;
  std::vector<std::string> get_values_;
  std::vector<StoreResult> get_results_;
  Sampler sampler_;     // which GETs feed ctx_.hot_keys
  // The burst's chained writes applied here and waiting for flush_chained() (write_chained).
  struct PendingChained {
    BurstItem* item;            // its reply goes to item->out, its length to item->len
    wire::FrameView req;        // points into the burst's frame
    uint64_t hash;
    RequestId id;
    uint8_t status;             // OK, or NOT_FOUND for a DELETE of a missing key
    exo::ReplicateRequest fwd;  // what goes down the chain
  };
  std::vector<PendingChained> chained_;
  BurstItem* burst_item_ = nullptr;  // the item handle_burst is working on (write_chained's)
};

}  // namespace exo::db

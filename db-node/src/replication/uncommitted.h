// Writes this node has applied and passed down its chain without an acknowledgement yet
// (docs/design/replication.md, 3.8; van Renesse & Schneider's "Sent" list), one per key at
// most: the head refuses a key's next write while one is here. ChainRuntime retries them and
// completes them; a resend of their request id gets no reply until then.
//
// Thread safety: any thread (one mutex). Callers hold the key's stripe lock while they take
// or put back an entry, so an entry is worked on by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "exoproto/control.pb.h"
#include "records.h"
#include "store.h"

namespace exo::db {

struct UncommittedWrite {
  uint64_t hash = 0;            // the key's 40-bit hash (its stripe lock)
  exo::ReplicateRequest req;    // what goes down the chain, resent as it is
  RequestId id;                 // the client's request
  DedupRecord record;           // its outcome, entered in the dedup table once acknowledged
  // A cached key's write (3.4): its prepared local transaction, committed once the chain has
  // the write, and then its Commit delivered to the cache node. Null for an uncached write.
  std::unique_ptr<StoreTxn> txn;
  std::string cache_node;
  uint64_t txid = 0;
  // Being forwarded in a head's burst batch (RequestHandler::flush_chained): the resolver
  // leaves it alone until the batch's answer is in, so a loaded head does not forward every
  // write of its bursts twice.
  bool in_batch = false;
};

class UncommittedWrites {
 public:
  bool has(std::string_view key) const;
  void put(UncommittedWrite w);  // replaces an entry of the same key
  std::optional<UncommittedWrite> take(std::string_view key);
  // The key's entry only if it is request `id`'s (the key may have moved on to a later write).
  std::optional<UncommittedWrite> take(std::string_view key, const RequestId& id);
  // Clears `in_batch` of the key's entry if it is `id`'s: the resolver's again.
  void unbatch(std::string_view key, const RequestId& id);
  // (key, hash) of every entry; without the ones in a batch unless `with_batched`.
  std::vector<std::pair<std::string, uint64_t>> keys(bool with_batched = false) const;
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, UncommittedWrite> by_key_;
};

}  // namespace exo::db

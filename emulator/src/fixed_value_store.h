// The wimpy emulator's store (thesis 4.1.1, difference 2): instead of a disk read, every GET
// returns the same value of emulation.value_size bytes, whatever the key. Writes are accepted
// and forgotten, transactions prepare and commit without doing anything, scans find nothing
// (so there is nothing to recover at start-up). Everything above the store (dedup, 2PC with the
// cache node, cached-key marks in memory, hot-key detection) is the db node's own code.
//
// Stateless after construction, so one instance serves every emulated node and thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "store.h"

namespace exo::emu {

class FixedValueStore final : public db::KvStore {
 public:
  explicit FixedValueStore(uint32_t value_size);

  // The value every GET returns: value_size bytes of a fixed printable pattern.
  const std::string& value() const { return value_; }

  db::StoreResult get(db::Bytes key, std::string* value) override;
  db::StoreResult write(std::span<const db::StoreOp> ops,
                        db::Durability d = db::Durability::kAsConfigured) override;
  db::StoreResult scan(
      db::Cf cf, const std::function<void(std::string_view, std::string_view)>& fn) override;
  std::unique_ptr<db::StoreTxn> begin(uint64_t txid, db::StoreResult* error) override;
  db::StoreResult prepared_txns(std::vector<db::PreparedTxn>* out) override;
  db::StoreResult rollback_prepared(uint64_t txid) override;

 private:
  const std::string value_;
};

}  // namespace exo::emu

#include "fixed_value_store.h"

namespace exo::emu {
namespace {

std::string pattern(uint32_t n) {
  static constexpr char kAlphabet[] = "0123456789abcdefghijklmnopqrstuvwxyz";
  std::string v(n, '\0');
  for (uint32_t i = 0; i < n; ++i) v[i] = kAlphabet[i % (sizeof kAlphabet - 1)];
  return v;
}

// A transaction with nothing behind it: the cache node side of the two-phase write is real,
// the local side has nothing to make durable.
class NoopTxn final : public db::StoreTxn {
 public:
  db::StoreResult put(db::Cf, db::Bytes, db::Bytes) override { return db::StoreResult::Ok(); }
  db::StoreResult del(db::Cf, db::Bytes) override { return db::StoreResult::Ok(); }
  db::StoreResult prepare() override { return db::StoreResult::Ok(); }
  db::StoreResult commit() override { return db::StoreResult::Ok(); }
  db::StoreResult rollback() override { return db::StoreResult::Ok(); }
};

}  // namespace

FixedValueStore::FixedValueStore(uint32_t value_size) : value_(pattern(value_size)) {}

db::StoreResult FixedValueStore::get(db::Bytes, std::string* value) {
  value->assign(value_);  // the caller reuses its buffer, so steady state does not allocate
  return db::StoreResult::Ok();
}

db::StoreResult FixedValueStore::write(std::span<const db::StoreOp>, db::Durability) {
  return db::StoreResult::Ok();
}

db::StoreResult FixedValueStore::scan(
    db::Cf, const std::function<void(std::string_view, std::string_view)>&) {
  return db::StoreResult::Ok();
}

std::unique_ptr<db::StoreTxn> FixedValueStore::begin(uint64_t, db::StoreResult*) {
  return std::make_unique<NoopTxn>();
}

db::StoreResult FixedValueStore::prepared_txns(std::vector<db::PreparedTxn>*) {
  return db::StoreResult::Ok();
}

db::StoreResult FixedValueStore::rollback_prepared(uint64_t) { return db::StoreResult::Ok(); }

}  // namespace exo::emu

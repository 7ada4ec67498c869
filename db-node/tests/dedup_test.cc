// Idempotent retries: the DedupTable, its sweep, and the handler answering resent writes from
// it (dedup_table.h).
#include <gtest/gtest.h>

#include "dedup_table.h"
#include "handler_fixture.h"
#include "records.h"

namespace exo::db {
namespace {

using namespace exo::db::testing;

constexpr uint64_t kT0 = 1'700'000'000'000;

DedupRecord rec(uint64_t fp, uint64_t at, uint8_t status = wire::kOk) {
  DedupRecord r;
  r.status = status;
  r.fingerprint = fp;
  r.recorded_ms = at;
  return r;
}

TEST(DedupTable, FindsLiveRecordsOfTheSameWriteOnly) {
  DedupTable t;
  const RequestId id{7, 1};
  EXPECT_FALSE(t.find(id, 42, kT0));
  t.insert(id, rec(42, kT0));
  ASSERT_TRUE(t.find(id, 42, kT0));
  EXPECT_EQ(*t.find(id, 42, kT0 + 1000), wire::kOk);
  EXPECT_FALSE(t.find(id, 43, kT0));             // same id, another write: an id clash
  EXPECT_FALSE(t.find(RequestId{7, 2}, 42, kT0));  // another seq
  EXPECT_FALSE(t.find(RequestId{8, 1}, 42, kT0));  // another client
  EXPECT_EQ(t.size(), 1u);
}

TEST(DedupTable, RecordsExpireAfterTheTtl) {
  DedupTable t;
  t.insert(RequestId{7, 1}, rec(42, kT0));
  EXPECT_TRUE(t.find(RequestId{7, 1}, 42, kT0 + DedupTable::kTtlMs - 1));
  EXPECT_FALSE(t.find(RequestId{7, 1}, 42, kT0 + DedupTable::kTtlMs));  // even before a sweep
  EXPECT_EQ(t.expired(kT0 + DedupTable::kTtlMs).size(), 1u);
  EXPECT_TRUE(t.expired(kT0 + DedupTable::kTtlMs - 1).empty());
}

TEST(DedupTable, TheTtlCanBeShorter) {  // the wimpy emulator keeps records 10 s
  DedupTable t(10'000);
  EXPECT_EQ(t.ttl_ms(), 10'000u);
  EXPECT_EQ(DedupTable().ttl_ms(), DedupTable::kTtlMs);
  t.insert(RequestId{7, 1}, rec(42, kT0));
  EXPECT_TRUE(t.find(RequestId{7, 1}, 42, kT0 + 9'999));
  EXPECT_FALSE(t.find(RequestId{7, 1}, 42, kT0 + 10'000));
  FakeStore store;
  std::string err;
  EXPECT_EQ(sweep_dedup(t, store, kT0 + 10'000, &err), 1u);
  EXPECT_EQ(t.size(), 0u);
}

TEST(DedupTable, SweepDeletesExpiredRecordsFromDiskAndMemory) {
  DedupTable t;
  FakeStore store;
  for (uint32_t seq = 0; seq < 3000; ++seq) {  // more than one sweep chunk
    const uint64_t at = seq < 2500 ? kT0 : kT0 + 30'000;
    t.insert(RequestId{1, seq}, rec(seq, at));
    store.requests[request_key(RequestId{1, seq})] = encode_dedup(rec(seq, at));
  }
  std::string err;
  EXPECT_EQ(sweep_dedup(t, store, kT0 + DedupTable::kTtlMs, &err), 2500u);
  EXPECT_EQ(err, "");
  EXPECT_EQ(t.size(), 500u);
  EXPECT_EQ(store.requests.size(), 500u);
  EXPECT_EQ(store.synced_writes, 0);  // tidying is never synced
}

TEST(DedupTable, FailedSweepKeepsTheRecordsForTheNextOne) {
  DedupTable t;
  FakeStore store;
  t.insert(RequestId{1, 1}, rec(1, kT0));
  store.requests[request_key(RequestId{1, 1})] = encode_dedup(rec(1, kT0));
  store.fail_requests = true;
  std::string err;
  EXPECT_EQ(sweep_dedup(t, store, kT0 + DedupTable::kTtlMs, &err), 0u);
  EXPECT_NE(err, "");
  EXPECT_EQ(t.size(), 1u);
  store.fail_requests = false;
  err.clear();
  EXPECT_EQ(sweep_dedup(t, store, kT0 + DedupTable::kTtlMs, &err), 1u);
  EXPECT_EQ(t.size(), 0u);
  EXPECT_TRUE(store.requests.empty());
}

class DedupHandlerTest : public HandlerTest {};

TEST_F(DedupHandlerTest, AResentPutIsAppliedOnce) {
  const auto put = request(wire::kPut, key, "v1", 5);
  EXPECT_EQ(send(put).status, wire::kOk);
  // Another client overwrites meanwhile; the late copy of the first PUT must not undo that.
  EXPECT_EQ(send(request(wire::kPut, key, "v2", 6)).status, wire::kOk);
  const auto r = send(put);
  EXPECT_EQ(r.status, wire::kOk);
  EXPECT_EQ(r.seq, 5u);
  EXPECT_EQ(store.data.at(key), "v2");
  EXPECT_EQ(counter(c, "duplicate_writes"), 1u);
  EXPECT_EQ(counter(c, "puts"), 3u);  // every request is counted, applied or not
  EXPECT_EQ(log.events(), (std::vector<std::string>{"put " + key + "=v1", "put " + key + "=v2"}));
}

TEST_F(DedupHandlerTest, TheRecordIsWrittenWithTheWriteInOneBatch) {
  EXPECT_EQ(send(request(wire::kPut, key, "v", 5)).status, wire::kOk);
  ASSERT_EQ(store.requests.count(request_key(RequestId{0xC0FFEE, 5})), 1u);
  EXPECT_EQ(store.synced_writes, 1);  // data + record: one synced batch
  EXPECT_EQ(store.relaxed_writes, 0);
  // The batch fails as a whole: no OK record without the write. The ERROR that is answered
  // instead is recorded separately, unsynced.
  store.fail_put = true;
  EXPECT_EQ(send(request(wire::kPut, key, "w", 6)).status, wire::kError);
  DedupRecord r;
  ASSERT_TRUE(decode_dedup(store.requests.at(request_key(RequestId{0xC0FFEE, 6})), &r));
  EXPECT_EQ(r.status, wire::kError);
  EXPECT_EQ(store.synced_writes, 1);
  EXPECT_EQ(store.relaxed_writes, 1);
}

TEST_F(DedupHandlerTest, TheRecordedStatusIsReplayed) {
  // A record left by the previous run (loaded at start-up) says what to answer.
  const auto del = request(wire::kDelete, key, "", 9);
  node.dedup.insert(RequestId{0xC0FFEE, 9},
                    rec(request_fingerprint(wire::kDelete, B(key), {}), now_ms, wire::kOk));
  store.data[key] = "kept";
  EXPECT_EQ(send(del).status, wire::kOk);
  EXPECT_EQ(store.data.at(key), "kept");  // not applied again
  EXPECT_EQ(counter(c, "duplicate_writes"), 1u);
}

TEST_F(DedupHandlerTest, AfterExpiryTheSameIdIsAppliedAgain) {
  const auto put = request(wire::kPut, key, "v1", 5);
  EXPECT_EQ(send(put).status, wire::kOk);
  store.data[key] = "other";
  now_ms += DedupTable::kTtlMs;
  EXPECT_EQ(send(put).status, wire::kOk);
  EXPECT_EQ(store.data.at(key), "v1");
  EXPECT_EQ(counter(c, "duplicate_writes"), 0u);
}

TEST_F(DedupHandlerTest, SameIdDifferentWriteIsNotADuplicate) {
  EXPECT_EQ(send(request(wire::kPut, key, "a", 5)).status, wire::kOk);
  EXPECT_EQ(send(request(wire::kPut, key, "b", 5)).status, wire::kOk);  // a client-id clash
  EXPECT_EQ(store.data.at(key), "b");
  EXPECT_EQ(counter(c, "duplicate_writes"), 0u);
}

// BUSY and ERROR mean "definitely not applied", and the client retries a BUSY under a NEW seq.
// So the refusal is recorded like an OK: a late copy of the refused id (a resend that crossed
// the BUSY reply) is refused again even once the write could go through, instead of applying
// the write a second time behind the client's back.
TEST_F(DedupHandlerTest, RefusalsAreRecordedSoALateCopyIsNeverApplied) {
  mark(key);
  prop.prepare_result = PrepareOutcome::kFailed;
  const auto put = request(wire::kPut, key, "v", 5);
  EXPECT_EQ(send(put).status, wire::kBusy);
  prop.prepare_result = PrepareOutcome::kPrepared;  // the cache node is fine again
  EXPECT_EQ(send(put).status, wire::kBusy);         // the late copy: same answer, not applied
  EXPECT_EQ(store.data.count(key), 0u);
  EXPECT_EQ(counter(c, "duplicate_writes"), 1u);
  EXPECT_EQ(send(request(wire::kPut, key, "v", 6)).status, wire::kOk);  // the client's retry
  EXPECT_EQ(store.data.at(key), "v");

  store.fail_del = true;
  const auto del = request(wire::kDelete, key, "", 7);
  EXPECT_EQ(send(del).status, wire::kError);
  store.fail_del = false;
  EXPECT_EQ(send(del).status, wire::kError);
  EXPECT_EQ(store.data.at(key), "v");
  EXPECT_EQ(counter(c, "duplicate_writes"), 2u);
}

TEST_F(DedupHandlerTest, AResentCachedWriteIsNotPropagatedAgain) {
  mark(key);
  prop.commit_result = FinishOutcome::kUnreachable;  // OK, Commit left to the resolver
  const auto put = request(wire::kPut, key, "v", 5);
  EXPECT_EQ(send(put).status, wire::kOk);
  const size_t prepares = prop.txids.size();
  EXPECT_EQ(send(put).status, wire::kOk);  // answered before anything else, even BUSY
  EXPECT_EQ(prop.txids.size(), prepares);
  EXPECT_EQ(counter(c, "duplicate_writes"), 1u);
  EXPECT_EQ(resolver.pending_count(), 1u);
}

TEST_F(DedupHandlerTest, GetsAreNeverDeduplicated) {
  store.data[key] = "v";
  const auto get = request(wire::kGet, key, "", 5);
  EXPECT_EQ(send(get).status, wire::kOk);
  store.data[key] = "w";
  const auto r = send(get);
  EXPECT_EQ(str(r.value), "w");
  EXPECT_EQ(counter(c, "duplicate_writes"), 0u);
}

}  // namespace
}  // namespace exo::db

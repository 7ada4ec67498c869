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

TEST(DedupTable, FindsLiveRecordsByIdAlone) {
  DedupTable t;
  const RequestId id{7, 1};
  EXPECT_FALSE(t.find(id, kT0));
  t.insert(id, rec(42, kT0));
  ASSERT_TRUE(t.find(id, kT0));
  EXPECT_EQ(*t.find(id, kT0 + 1000), wire::kOk);
  EXPECT_FALSE(t.find(RequestId{7, 2}, kT0));  // another seq
  EXPECT_FALSE(t.find(RequestId{8, 1}, kT0));  // another client
  // A claim says "seen, whatever the write": the record, with the first write's fingerprint.
  const DedupTable::Lookup l = t.claim(id, kT0);
  EXPECT_EQ(l.kind, DedupTable::Lookup::kAnswered);
  EXPECT_EQ(l.record.fingerprint, 42u);
  EXPECT_EQ(t.size(), 1u);
}

TEST(DedupTable, AClaimMakesOtherCopiesInFlightUntilARecordReplacesIt) {
  DedupTable t;
  const RequestId id{7, 1};
  EXPECT_EQ(t.claim(id, kT0).kind, DedupTable::Lookup::kNew);
  EXPECT_EQ(t.claim(id, kT0).kind, DedupTable::Lookup::kInFlight);
  EXPECT_FALSE(t.find(id, kT0));  // no outcome yet
  t.insert(id, rec(42, kT0, wire::kBusy));
  const DedupTable::Lookup l = t.claim(id, kT0);
  EXPECT_EQ(l.kind, DedupTable::Lookup::kAnswered);
  EXPECT_EQ(l.record.status, wire::kBusy);
  t.release(id);  // after the record: changes nothing
  EXPECT_EQ(t.find(id, kT0), std::optional<uint8_t>(wire::kBusy));
}

TEST(DedupTable, AReleasedClaimLeavesNothingBehind) {
  DedupTable t;
  const RequestId id{7, 1};
  {
    ASSERT_EQ(t.claim(id, kT0).kind, DedupTable::Lookup::kNew);
    DedupClaim guard(t, id);
    EXPECT_EQ(t.claim(id, kT0).kind, DedupTable::Lookup::kInFlight);
  }
  EXPECT_EQ(t.size(), 0u);  // DedupClaim released it: the claim above was never answered
  EXPECT_EQ(t.claim(id, kT0).kind, DedupTable::Lookup::kNew);
  // A claim expires like a record, so one left by a bug cannot block an id for ever.
  EXPECT_EQ(t.claim(id, kT0 + DedupTable::kTtlMs).kind, DedupTable::Lookup::kNew);
}

TEST(DedupTable, RecordsExpireAfterTheTtl) {
  DedupTable t;
  t.insert(RequestId{7, 1}, rec(42, kT0));
  EXPECT_TRUE(t.find(RequestId{7, 1}, kT0 + DedupTable::kTtlMs - 1));
  EXPECT_FALSE(t.find(RequestId{7, 1}, kT0 + DedupTable::kTtlMs));  // even before a sweep
  EXPECT_EQ(t.expired(kT0 + DedupTable::kTtlMs).size(), 1u);
  EXPECT_TRUE(t.expired(kT0 + DedupTable::kTtlMs - 1).empty());
}

TEST(DedupTable, TheTtlCanBeShorter) {  // the wimpy emulator keeps records 10 s
  DedupTable t(10'000);
  EXPECT_EQ(t.ttl_ms(), 10'000u);
  EXPECT_EQ(DedupTable().ttl_ms(), DedupTable::kTtlMs);
  t.insert(RequestId{7, 1}, rec(42, kT0));
  EXPECT_TRUE(t.find(RequestId{7, 1}, kT0 + 9'999));
  EXPECT_FALSE(t.find(RequestId{7, 1}, kT0 + 10'000));
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

// The independent client's finding: a request that reuses an answered id with other content
// was applied. The id alone decides: every copy gets the first outcome, none is applied again.
TEST_F(DedupHandlerTest, AReusedIdWithOtherContentGetsTheFirstOutcomeAndIsNotApplied) {
  EXPECT_EQ(send(request(wire::kPut, key, "v1", 5)).status, wire::kOk);
  const auto other_value = send(request(wire::kPut, key, "v2", 5));
  EXPECT_EQ(other_value.status, wire::kOk);
  EXPECT_EQ(other_value.seq, 5u);
  EXPECT_EQ(send(request(wire::kDelete, key, "", 5)).status, wire::kOk);
  const std::string key2 = key_owned_by(cluster, 0, "other");
  ASSERT_NE(key2, key);
  const auto other_key = send(request(wire::kPut, key2, "x", 5));
  EXPECT_EQ(other_key.status, wire::kOk);
  EXPECT_EQ(str(other_key.key), key2);  // the reply answers the copy it got
  EXPECT_EQ(store.data.at(key), "v1");
  EXPECT_FALSE(store.data.count(key2));
  EXPECT_EQ(log.events(), (std::vector<std::string>{"put " + key + "=v1"}));
  EXPECT_EQ(counter(c, "duplicate_writes"), 3u);
  EXPECT_EQ(counter(c, "duplicate_id_conflicts"), 3u);
  // An identical resend is a duplicate, not a conflict.
  EXPECT_EQ(send(request(wire::kPut, key, "v1", 5)).status, wire::kOk);
  EXPECT_EQ(counter(c, "duplicate_writes"), 4u);
  EXPECT_EQ(counter(c, "duplicate_id_conflicts"), 3u);
}

TEST_F(DedupHandlerTest, AReusedIdGetsAFirstBusyOrErrorToo) {
  store.fail_put = true;
  EXPECT_EQ(send(request(wire::kPut, key, "v1", 5)).status, wire::kError);
  store.fail_put = false;
  EXPECT_EQ(send(request(wire::kPut, key, "v2", 5)).status, wire::kError);
  EXPECT_FALSE(store.data.count(key));
}

TEST_F(DedupHandlerTest, ACopyWhileTheFirstIsInFlightIsNotAppliedNorAnswered) {
  // The first copy (another key, so another stripe lock) is still being handled: simulated by
  // its claim. The second must neither apply nor answer; its resend gets the first outcome.
  const RequestId id{0xC0FFEE, 5};
  ASSERT_EQ(node.dedup.claim(id, now_ms).kind, DedupTable::Lookup::kNew);
  EXPECT_TRUE(no_reply(request(wire::kPut, key, "v2", 5)));
  EXPECT_TRUE(store.data.empty());
  EXPECT_EQ(counter(c, "duplicate_id_conflicts"), 1u);
  node.dedup.insert(id, rec(1, now_ms, wire::kOk));  // the first copy's outcome
  EXPECT_EQ(send(request(wire::kPut, key, "v2", 5)).status, wire::kOk);
  EXPECT_TRUE(store.data.empty());
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

// RequestHandler driven with frame buffers, a fake store and a fake propagator: framing, GET,
// and the write paths. Writes to cached keys in detail: two_phase_test.cc; resends:
// dedup_test.cc.
#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include "handler_fixture.h"

namespace exo::db {
namespace {

using namespace exo::db::testing;

TEST_F(HandlerTest, PutThenGetRoundTrip) {
  auto r = send(request(wire::kPut, key, "hello", 7));
  EXPECT_EQ(r.opcode, wire::kPut | wire::kReplyBit);
  EXPECT_EQ(r.status, wire::kOk);
  EXPECT_EQ(r.seq, 7u);
  EXPECT_EQ(r.client_id, 0xC0FFEEu);
  EXPECT_EQ(store.data.at(key), "hello");

  r = send(request(wire::kGet, key, "", 8));
  EXPECT_EQ(r.opcode, wire::kGet | wire::kReplyBit);
  EXPECT_EQ(r.status, wire::kOk);
  EXPECT_EQ(str(r.key), key);
  EXPECT_EQ(str(r.value), "hello");
  EXPECT_EQ(r.flags, 0);  // not FROM_CACHE
  // Addressed straight back to the client, from this node.
  EXPECT_EQ(std::memcmp(r.eth_dst, kClientMac.data(), 6), 0);
  EXPECT_EQ(std::memcmp(r.eth_src, cluster.db_nodes[0].mac.data(), 6), 0);
  EXPECT_EQ(r.ip_dst, kClientIp);
  EXPECT_EQ(r.ip_src, cluster.db_nodes[0].ip);
  EXPECT_EQ(r.udp_dst, kClientPort);
  EXPECT_EQ(r.udp_src, cluster.udp_port);

  EXPECT_EQ(counter(c, "puts"), 1u);
  EXPECT_EQ(counter(c, "gets"), 1u);
  EXPECT_EQ(counter(c, "rx_frames"), 2u);
  EXPECT_EQ(counter(c, "misrouted"), 0u);
  EXPECT_EQ(counter(c, "errors"), 0u);
}

// A burst (the packet loop's recvmmsg): its GETs are read with ONE multi_get after its writes
// and bad frames were handled, every reply lands in its own frame's slot, and a GET that
// arrived before a write of the same key in the same burst sees that write (both were
// outstanding together, so either order is linearizable).
TEST_F(HandlerTest, BurstReadsItsGetsWithOneMultiGetAfterItsWrites) {
  store.data[key] = "old";
  const std::string other = key_owned_by(cluster, 0, "other");
  store.data[other] = "other";
  std::vector<uint8_t> bad = request(wire::kGet, key, "", 4);
  bad[24] ^= 0xFF;  // the IPv4 header checksum: malformed, no reply, counted
  std::vector<std::vector<uint8_t>> frames = {
      request(wire::kGet, key, "", 1),      // before the PUT below, sees it
      request(wire::kPut, key, "new", 2),
      request(wire::kGet, other, "", 3),
      bad,
      request(wire::kGet, "missing-key-xyz", "", 5),
  };
  std::vector<std::vector<uint8_t>> outs(frames.size(), std::vector<uint8_t>(16384));
  std::vector<BurstItem> items;
  for (size_t i = 0; i < frames.size(); ++i) items.push_back(BurstItem{frames[i], outs[i]});
  h.handle_burst(items);

  EXPECT_EQ(store.multi_gets, 1);
  auto reply_of = [&](size_t i) {
    wire::FrameView r{};
    EXPECT_GT(items[i].len, 0u) << "item " << i;
    EXPECT_EQ(wire::parse(std::span<const uint8_t>(outs[i].data(), items[i].len), r), wire::ParseError::kNone);
    return r;
  };
  auto r0 = reply_of(0);
  EXPECT_EQ(r0.seq, 1u);
  EXPECT_EQ(str(r0.value), "new");
  auto r1 = reply_of(1);
  EXPECT_EQ(r1.seq, 2u);
  EXPECT_EQ(r1.status, wire::kOk);
  auto r2 = reply_of(2);
  EXPECT_EQ(str(r2.value), "other");
  EXPECT_EQ(items[3].len, 0u);
  EXPECT_EQ(reply_of(4).status, wire::kNotFound);
  EXPECT_EQ(counter(c, "gets"), 3u);
  EXPECT_EQ(counter(c, "malformed_dropped"), 1u);
  EXPECT_EQ(counter(c, "rx_frames"), 5u);

  // A burst without GETs reads nothing.
  std::vector<BurstItem> writes{BurstItem{frames[1], outs[1]}};
  h.handle_burst(writes);
  EXPECT_EQ(store.multi_gets, 1);
}

TEST_F(HandlerTest, GetMissingIsNotFound) {
  auto r = send(request(wire::kGet, key));
  EXPECT_EQ(r.status, wire::kNotFound);
  EXPECT_EQ(r.value.size(), 0u);
  EXPECT_EQ(counter(c, "not_found"), 1u);
}

TEST_F(HandlerTest, DeleteRemovesAndDeletingMissingIsNotFound) {
  store.data[key] = "v";
  EXPECT_EQ(send(request(wire::kDelete, key, "", 1)).status, wire::kOk);
  EXPECT_FALSE(store.data.count(key));
  EXPECT_EQ(send(request(wire::kDelete, key, "", 2)).status, wire::kNotFound);
  EXPECT_EQ(counter(c, "deletes"), 2u);
  EXPECT_EQ(send(request(wire::kGet, key)).status, wire::kNotFound);
  // The NOT_FOUND is the outcome of id 2: a resend of it after a PUT neither deletes nor
  // answers differently.
  EXPECT_EQ(send(request(wire::kPut, key, "new", 3)).status, wire::kOk);
  EXPECT_EQ(send(request(wire::kDelete, key, "", 2)).status, wire::kNotFound);
  EXPECT_EQ(store.data.at(key), "new");
}

TEST_F(HandlerTest, MalformedFramesAreDroppedAndCounted) {
  auto f = request(wire::kPut, key, "v");
  auto bad_magic = f;
  bad_magic[wire::off::kMagic] = 0x00;
  EXPECT_TRUE(no_reply(bad_magic));
  auto truncated = f;
  truncated.resize(f.size() - 3);  // IP total length now exceeds the frame
  EXPECT_TRUE(no_reply(truncated));
  auto short_frame = std::vector<uint8_t>(f.begin(), f.begin() + 40);
  EXPECT_TRUE(no_reply(short_frame));
  auto not_ipv4 = f;
  wire::header_of(not_ipv4.data())->eth.ethertype.set(0x86dd);  // IPv6, but a request dst MAC
  EXPECT_TRUE(no_reply(not_ipv4));
  auto key_len_zero = f;
  wire::header_of(key_len_zero.data())->exo.key_len.set(0);
  EXPECT_TRUE(no_reply(key_len_zero));
  EXPECT_EQ(counter(c, "malformed_dropped"), 5u);
  EXPECT_EQ(counter(c, "rx_frames"), 5u);
  EXPECT_EQ(counter(c, "puts"), 0u);
  EXPECT_TRUE(store.data.empty());
  EXPECT_TRUE(log.events().empty());
}

TEST_F(HandlerTest, FramesLargerThanTheMtuAreDroppedAsMalformed) {
  // Well-formed, but no client of this cluster can send it: 1 byte over 14 + mtu.
  auto big = request(wire::kPut, key, std::string(wire::max_kv_bytes(cluster.mtu) - key.size() + 1, 'x'));
  ASSERT_EQ(big.size(), wire::kEthLen + cluster.mtu + 1);
  EXPECT_TRUE(no_reply(big));
  EXPECT_EQ(counter(c, "malformed_dropped"), 1u);
  EXPECT_TRUE(store.data.empty());
  // Exactly 14 + mtu is served.
  auto fits = request(wire::kPut, key, std::string(wire::max_kv_bytes(cluster.mtu) - key.size(), 'x'));
  EXPECT_EQ(send(fits).status, wire::kOk);
}

TEST_F(HandlerTest, ReplyFramesAreDroppedAsMalformed) {
  auto f = request(wire::kPut, key, "v");
  f[wire::off::kOpcode] |= wire::kReplyBit;
  EXPECT_TRUE(no_reply(f));
  EXPECT_EQ(counter(c, "malformed_dropped"), 1u);
  EXPECT_TRUE(store.data.empty());
}

TEST_F(HandlerTest, NonRequestTrafficIsIgnoredNotMalformed) {
  auto other_mac = request(wire::kGet, key, "", 1, 0, 7777, /*prefix=*/0x02);
  EXPECT_TRUE(no_reply(other_mac));
  auto other_port = request(wire::kGet, key, "", 1, 0, /*port=*/5353);
  EXPECT_TRUE(no_reply(other_port));
  std::vector<uint8_t> tiny(10, 0xAA);
  EXPECT_TRUE(no_reply(tiny));
  EXPECT_EQ(counter(c, "ignored"), 3u);
  EXPECT_EQ(counter(c, "malformed_dropped"), 0u);
  EXPECT_EQ(counter(c, "gets"), 0u);
}

// The switch routes a request by the hash in its dst MAC, so a frame reaches the wrong db node
// only when that hash and its key disagree: a forgery, or a switch and a node that disagree
// about the partitions. A write there would be applied and acknowledged but never read again
// (reads go to the owner): refused, BAD_REQUEST, counted; nothing is written, no dedup record
// is kept. A GET there is served (it changes nothing) but feeds no hot-key report.
TEST_F(HandlerTest, WritesForAnotherNodesKeysAreRefusedAndCounted) {
  const std::string theirs = key_owned_by(cluster, 1);
  for (uint8_t op : {wire::kPut, wire::kDelete}) {
    const wire::FrameView r = send(request(op, theirs, op == wire::kPut ? "x" : "", 5));
    EXPECT_EQ(r.status, wire::kBadRequest);
    EXPECT_EQ(r.opcode, op | wire::kReplyBit);
  }
  EXPECT_FALSE(store.data.count(theirs));
  EXPECT_EQ(counter(c, "wrong_owner_dropped"), 2u);
  EXPECT_EQ(counter(c, "misrouted"), 2u);
  EXPECT_EQ(counter(c, "puts") + counter(c, "deletes") + counter(c, "duplicate_writes"), 0u);
  // A resend of the same id after the mismatch is fixed is a new write, not a recorded outcome.
  store.data[theirs] = "kept";
  EXPECT_EQ(send(request(wire::kGet, theirs, "", 6)).status, wire::kOk);
  EXPECT_EQ(counter(c, "misrouted"), 3u);
  EXPECT_EQ(counter(c, "wrong_owner_dropped"), 2u);
  // This node's own keys are written as before.
  EXPECT_EQ(send(request(wire::kPut, key, "mine", 7)).status, wire::kOk);
  EXPECT_EQ(store.data.at(key), "mine");
  EXPECT_EQ(counter(c, "wrong_owner_dropped"), 2u);
}

// A cache node forwards a miss with the client's own addresses, so only the switch can vouch
// for it: it stamps wire::kForwardedDscp on frames with prefix 0xAE from cache-node ports and
// drops client frames with that prefix or the mark. A GET dressed as a forwarded miss (prefix
// 0xAE, an older cache node's 0xBA, or the FORWARDED flag) without the mark came from a client:
// refused, BAD_REQUEST, counted.
TEST_F(HandlerTest, ForwardedGetsWithoutTheCachePortMarkAreRefused) {
  store.data[key] = "v";
  const auto forged = {request(wire::kGet, key, "", 1, wire::kForwarded, 7777, kPrefixForwarded),
                       request(wire::kGet, key, "", 2, 0, 7777, kPrefixForwarded),
                       request(wire::kGet, key, "", 3, wire::kForwarded, 7777, kPrefixOther),
                       request(wire::kGet, key, "", 4, 0, 7777, kPrefixOther),
                       request(wire::kGet, key, "", 5, wire::kForwarded, 7777, kPrefixGet)};
  for (const auto& f : forged) {
    const wire::FrameView r = send(f);
    EXPECT_EQ(r.status, wire::kBadRequest);
    EXPECT_EQ(r.value.size(), 0u);
  }
  EXPECT_EQ(counter(c, "forwarded_unmarked_dropped"), 5u);
  EXPECT_EQ(counter(c, "forwarded_gets"), 0u);
  EXPECT_EQ(counter(c, "gets"), 0u);
  // The mark on a write or a plain GET changes nothing; a marked forwarded GET is served, with
  // prefix 0xAE (what a cache node sends) and, at rf 1, with an older cache node's 0xBA.
  EXPECT_EQ(send(from_cache_port(request(wire::kPut, key, "w", 6))).status, wire::kOk);
  EXPECT_EQ(str(send(from_cache_port(request(wire::kGet, key, "", 7, wire::kForwarded, 7777,
                                              kPrefixForwarded))).value), "w");
  EXPECT_EQ(str(send(from_cache_port(request(wire::kGet, key, "", 8, wire::kForwarded, 7777,
                                              kPrefixOther))).value), "w");
  EXPECT_EQ(str(send(request(wire::kGet, key, "", 9)).value), "w");
  EXPECT_EQ(counter(c, "forwarded_unmarked_dropped"), 5u);
  EXPECT_EQ(counter(c, "forwarded_gets"), 2u);
}

TEST_F(HandlerTest, ForwardedGetsAreCountedAndTheirRepliesCarryNoFlags) {
  store.data[key] = "v";
  const wire::FrameView fwd =
      send(from_cache_port(request(wire::kGet, key, "", 1, wire::kForwarded, 7777, kPrefixForwarded)));
  // FORWARDED is a request flag: no reply carries it (docs/wire-format.md, "Flags in replies").
  EXPECT_EQ(fwd.flags, 0);
  EXPECT_EQ(fwd.status, wire::kOk);
  EXPECT_EQ(send(request(wire::kGet, key)).flags, 0);
  EXPECT_EQ(counter(c, "forwarded_gets"), 1u);
  EXPECT_EQ(counter(c, "gets"), 2u);
}

// wire::screen, the nodes' one pre-filter: a wrong IPv4 header checksum or a wrong non-zero
// UDP checksum is malformed (dropped, counted, never applied); UDP checksum 0 means none.
TEST_F(HandlerTest, FramesWithWrongChecksumsAreDroppedAndCounted) {
  auto bad_ip = request(wire::kPut, key, "v");
  bad_ip[wire::off::kIpTtl] = 1;  // the header changed, its checksum did not
  EXPECT_TRUE(no_reply(bad_ip));
  auto bad_udp = request(wire::kPut, key, "v");
  wire::set_udp_checksum(bad_udp);
  bad_udp.back() = 'w';  // the value changed on the way
  EXPECT_TRUE(no_reply(bad_udp));
  EXPECT_EQ(counter(c, "malformed_dropped"), 2u);
  EXPECT_EQ(counter(c, "puts"), 0u);
  EXPECT_TRUE(store.data.empty());

  auto good_udp = request(wire::kPut, key, "v", 2);
  wire::set_udp_checksum(good_udp);
  EXPECT_EQ(send(good_udp).status, wire::kOk);
  EXPECT_EQ(store.data.at(key), "v");
  auto no_udp = request(wire::kGet, key, "", 3);
  ASSERT_EQ(wire::header_of(no_udp.data())->udp.checksum.get(), 0);
  EXPECT_EQ(send(no_udp).status, wire::kOk);
}

TEST_F(HandlerTest, StoreFailuresAnswerError) {
  store.fail_put = true;
  EXPECT_EQ(send(request(wire::kPut, key, "v", 1)).status, wire::kError);
  store.fail_del = true;
  store.data[key] = "v";  // present: a DELETE of a missing key answers NOT_FOUND before writing
  EXPECT_EQ(send(request(wire::kDelete, key, "", 2)).status, wire::kError);  // a new request id
  store.fail_get = true;
  EXPECT_EQ(send(request(wire::kGet, key)).status, wire::kError);
  EXPECT_EQ(counter(c, "errors"), 3u);
}

TEST_F(HandlerTest, ValueTooLargeForTheMtuAnswersError) {
  store.data[key] = std::string(wire::max_kv_bytes(cluster.mtu) - key.size() + 1, 'x');
  auto r = send(request(wire::kGet, key));
  EXPECT_EQ(r.status, wire::kError);
  EXPECT_EQ(r.value.size(), 0u);
  EXPECT_EQ(counter(c, "errors"), 1u);
  // Exactly at the limit still fits.
  store.data[key].pop_back();
  r = send(request(wire::kGet, key));
  EXPECT_EQ(r.status, wire::kOk);
  EXPECT_EQ(r.frame_len, wire::kEthLen + cluster.mtu);
}

TEST_F(HandlerTest, UncachedWriteIsNotPropagated) {
  EXPECT_EQ(send(request(wire::kPut, key, "v")).status, wire::kOk);
  EXPECT_EQ(log.events(), (std::vector<std::string>{"put " + key + "=v"}));
  EXPECT_EQ(counter(c, "writes_propagated"), 0u);
}

// The transaction is prepared (durable redo record) before the cache node is asked, and
// committed before the cache node is told to commit.
TEST_F(HandlerTest, CachedPutPreparesLocallyThenRemotelyThenCommitsBoth) {
  mark(key);
  EXPECT_EQ(send(request(wire::kPut, key, "new")).status, wire::kOk);
  EXPECT_EQ(log.events(),
            (std::vector<std::string>{"put " + key + "=new", "txn prepare",
                                      "prepare cache0 " + key + " put=new", "txn commit",
                                      "commit cache0 " + key}));
  EXPECT_EQ(counter(c, "writes_propagated"), 1u);
  EXPECT_EQ(store.data.at(key), "new");
  EXPECT_TRUE(store.txlog.empty());  // the Commit was delivered: nothing left to resolve
}

TEST_F(HandlerTest, CachedDeletePropagatesADelete) {
  store.data[key] = "old";
  mark(key);
  EXPECT_EQ(send(request(wire::kDelete, key)).status, wire::kOk);
  EXPECT_EQ(log.events(), (std::vector<std::string>{"del " + key, "txn prepare",
                                                    "prepare cache0 " + key + " delete",
                                                    "txn commit", "commit cache0 " + key}));
  EXPECT_FALSE(store.data.count(key));
}

// Was "PrepareFailureMeansNoWriteAndError": a failed Prepare now answers BUSY (definitely not
// applied, retry later) and leaves an Abort for the resolver, because the cache node may have
// prepared even though the RPC failed.
TEST_F(HandlerTest, PrepareFailureMeansNoWriteAndBusy) {
  store.data[key] = "old";
  mark(key);
  prop.prepare_result = PrepareOutcome::kFailed;
  prop.abort_result = FinishOutcome::kUnreachable;
  EXPECT_EQ(send(request(wire::kPut, key, "new")).status, wire::kBusy);
  EXPECT_EQ(log.events(), (std::vector<std::string>{"put " + key + "=new", "txn prepare",
                                                    "prepare cache0 " + key + " put=new",
                                                    "txn rollback"}));
  EXPECT_EQ(store.data.at(key), "old");
  EXPECT_EQ(counter(c, "busy_writes"), 1u);
  EXPECT_EQ(counter(c, "errors"), 0u);
  EXPECT_EQ(counter(c, "writes_propagated"), 0u);
  EXPECT_EQ(resolver.pending_count(), 1u);
}

// Was "WriteFailureAfterPrepareAborts": the local write now happens inside the transaction,
// before the cache node is asked anything, so a failed local write needs no Abort.
TEST_F(HandlerTest, LocalWriteFailureAnswersErrorWithoutAskingTheCacheNode) {
  mark(key);
  store.fail_put = true;
  EXPECT_EQ(send(request(wire::kPut, key, "new")).status, wire::kError);
  EXPECT_EQ(log.events(), (std::vector<std::string>{"put " + key + "=new FAIL", "txn rollback"}));
  EXPECT_EQ(counter(c, "errors"), 1u);
  EXPECT_EQ(resolver.pending_count(), 0u);
}

// Was "CommitFailureAnswersError" (the old code acked ERROR although the write was durable):
// a failed Commit RPC now answers OK, because the write is durable here and the cache node,
// still holding it prepared, forwards every GET of the key to this node until the resolver
// delivers the Commit.
TEST_F(HandlerTest, CommitRpcFailureAnswersOkAndLeavesTheCommitToTheResolver) {
  mark(key);
  prop.commit_result = FinishOutcome::kUnreachable;
  EXPECT_EQ(send(request(wire::kPut, key, "new")).status, wire::kOk);
  EXPECT_EQ(store.data.at(key), "new");
  EXPECT_EQ(counter(c, "writes_propagated"), 0u);
  EXPECT_EQ(counter(c, "commits_deferred"), 1u);
  EXPECT_EQ(counter(c, "errors"), 0u);
  EXPECT_EQ(resolver.pending_count(), 1u);
}

TEST_F(HandlerTest, NotCachedOnTheCacheNodeJustWrites) {
  mark(key);
  prop.prepare_result = PrepareOutcome::kNotCached;
  EXPECT_EQ(send(request(wire::kPut, key, "new")).status, wire::kOk);
  EXPECT_EQ(log.events(), (std::vector<std::string>{"put " + key + "=new", "txn prepare",
                                                    "prepare cache0 " + key + " put=new",
                                                    "txn commit"}));
  EXPECT_EQ(store.data.at(key), "new");
  // The cache node holds no entry and no Fetch of it: nothing will send Evict for certain, so
  // the write stops tracking the key itself (later writes need no Prepare), on disk too.
  EXPECT_EQ(cached.lock_key(B(key)).holder(key), nullptr);
  EXPECT_FALSE(store.marks.count(key));
  EXPECT_TRUE(store.txlog.empty());
}

TEST_F(HandlerTest, TxidsAreDistinct) {
  mark(key);
  send(request(wire::kPut, key, "a", 1));
  send(request(wire::kPut, key, "b", 2));
  ASSERT_EQ(prop.txids.size(), 2u);
  EXPECT_NE(prop.txids[0], prop.txids[1]);
  EXPECT_GE(prop.txids[0], 100u);
}

// Every GET of this node's keys (forwarded ones too) reaches the detector at sample rate 1;
// writes never do, nor GETs of another node's keys (its REPORTs speak for its own partitions).
TEST_F(HandlerTest, SampledGetsFeedTheHotKeyDetector) {
  HotKeysConfig cfg;
  cfg.sample_rate = 1;
  HotKeyDetector detector(cfg, steady_ms());
  NodeContext hot_ctx{cluster, 0, store, cached, prop, node.txids, node.dedup, resolver, &detector};
  Counters hc;
  RequestHandler hh(hot_ctx, hc);
  store.data[key] = "v";
  hh.handle(request(wire::kGet, key, "", 1), out);
  hh.handle(from_cache_port(request(wire::kGet, key, "", 2, wire::kForwarded, 7777, kPrefixForwarded)), out);
  hh.handle(request(wire::kGet, key_owned_by(cluster, 0, "absent"), "", 3), out);  // NOT_FOUND reads count as reads
  hh.handle(request(wire::kPut, key, "w", 4), out);
  hh.handle(request(wire::kDelete, key, "", 5), out);
  hh.handle(request(wire::kGet, key_owned_by(cluster, 1), "", 6), out);  // misrouted: served, not sampled
  EXPECT_EQ(counter(hc, "misrouted"), 1u);
  EXPECT_EQ(counter(hc, "hot_sampled"), 3u);
  EXPECT_EQ(counter(hc, "forwarded_gets"), 1u);
  EXPECT_EQ(detector.sampled(steady_ms()), 3u);
}

TEST_F(HandlerTest, GetsAreSampledAtTheConfiguredRate) {
  HotKeysConfig cfg;
  cfg.sample_rate = 0.25;
  HotKeyDetector detector(cfg, steady_ms());
  NodeContext hot_ctx{cluster, 0, store, cached, prop, node.txids, node.dedup, resolver, &detector};
  Counters hc;
  RequestHandler hh(hot_ctx, hc);
  const auto get = request(wire::kGet, key);
  for (int i = 0; i < 8000; ++i) hh.handle(get, out);
  EXPECT_NEAR(static_cast<double>(counter(hc, "hot_sampled")), 2000.0, 200.0);
}

TEST_F(HandlerTest, NoDetectorNoSampling) {
  const auto get = request(wire::kGet, key);
  for (int i = 0; i < 100; ++i) h.handle(get, out);
  EXPECT_EQ(counter(c, "hot_sampled"), 0u);
}

// Two packet threads writing the same cached key: propagations must not overlap, because the
// stripe lock is held across prepare -> Prepare -> commit -> Commit. (Distinct seqs: resends of
// one request id would be answered from the dedup table, not propagated.)
TEST_F(HandlerTest, WritesToOneKeyAreSerializedAcrossThreads) {
  FakeNode quiet;
  quiet.prop.prepare_delay = std::chrono::microseconds(200);
  NodeContext ctx2{quiet.cluster, 0, quiet.store, quiet.cached, quiet.prop, quiet.txids,
                   quiet.dedup, quiet.resolver, nullptr};
  quiet.cached.lock_key(B(key)).mark(key, "cache0");
  Counters c1, c2;
  auto worker = [&](Counters& cc, const std::string& v, uint32_t first_seq) {
    RequestHandler hh(ctx2, cc);
    std::vector<uint8_t> o(16384);
    for (uint32_t i = 0; i < 50; ++i) hh.handle(request(wire::kPut, key, v, first_seq + i), o);
  };
  std::thread t1(worker, std::ref(c1), "one", 1000), t2(worker, std::ref(c2), "two", 2000);
  t1.join();
  t2.join();
  EXPECT_EQ(quiet.prop.max_in_flight.load(), 1);
  EXPECT_EQ(counter(c1, "writes_propagated") + counter(c2, "writes_propagated"), 100u);
}

}  // namespace
}  // namespace exo::db

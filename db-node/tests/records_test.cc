// The on-disk record formats (records.h) round-trip and reject malformed input.
#include <gtest/gtest.h>

#include "records.h"
#include "test_util.h"

namespace exo::db {
namespace {

using testing::B;

TEST(Records, RequestKeyRoundTripsAndSortsByClientThenSeq) {
  const RequestId a{0x01020304, 0xfffffffe}, b{0x01020305, 0};
  RequestId got;
  ASSERT_TRUE(parse_request_key(request_key(a), &got));
  EXPECT_EQ(got, a);
  EXPECT_LT(request_key(a), request_key(b));
  EXPECT_FALSE(parse_request_key("short", &got));
}

TEST(Records, DedupRecordRoundTrips) {
  DedupRecord r{4, 0x1122334455667788ull, 1'700'000'000'123ull}, got;
  ASSERT_TRUE(decode_dedup(encode_dedup(r), &got));
  EXPECT_EQ(got.status, 4);
  EXPECT_EQ(got.fingerprint, r.fingerprint);
  EXPECT_EQ(got.recorded_ms, r.recorded_ms);
  EXPECT_FALSE(decode_dedup("", &got));
  EXPECT_FALSE(decode_dedup(encode_dedup(r) + "x", &got));
}

TEST(Records, FingerprintCoversOpcodeKeyAndValue) {
  const uint64_t f = request_fingerprint(2, B("ab"), B("c"));
  EXPECT_EQ(f, request_fingerprint(2, B("ab"), B("c")));
  EXPECT_NE(f, request_fingerprint(2, B("a"), B("bc")));
  EXPECT_NE(f, request_fingerprint(3, B("ab"), B("c")));
  EXPECT_NE(f, request_fingerprint(2, B("ab"), B("d")));
}

TEST(Records, TxlogKeyAndValueRoundTrip) {
  uint64_t txid = 0;
  Decision d;
  ASSERT_TRUE(parse_txlog_key(txlog_key(0xdeadbeef12345678ull, Decision::kAbort), &txid, &d));
  EXPECT_EQ(txid, 0xdeadbeef12345678ull);
  EXPECT_EQ(d, Decision::kAbort);
  EXPECT_LT(txlog_key(1, Decision::kCommit), txlog_key(2, Decision::kAbort));
  EXPECT_FALSE(parse_txlog_key("12345678X", &txid, &d));
  EXPECT_FALSE(parse_txlog_key("1234", &txid, &d));

  std::string v, node, key;
  ASSERT_TRUE(encode_txlog_value("cache0", std::string("k\0y", 3), &v));
  ASSERT_TRUE(decode_txlog_value(v, &node, &key));
  EXPECT_EQ(node, "cache0");
  EXPECT_EQ(key, std::string("k\0y", 3));
  EXPECT_FALSE(encode_txlog_value(std::string(256, 'n'), "k", &v));
  EXPECT_FALSE(decode_txlog_value("", &node, &key));
  EXPECT_FALSE(decode_txlog_value(std::string("\x06" "cache0", 7), &node, &key));  // no key
  EXPECT_FALSE(decode_txlog_value(std::string("\x09" "cache0k", 8), &node, &key));
}

TEST(Records, TxnNamesRoundTrip) {
  uint64_t txid = 0;
  ASSERT_TRUE(parse_txn_name(txn_name(18446744073709551615ull), &txid));
  EXPECT_EQ(txid, 18446744073709551615ull);
  EXPECT_FALSE(parse_txn_name("tx", &txid));
  EXPECT_FALSE(parse_txn_name("xa12", &txid));
  EXPECT_FALSE(parse_txn_name("tx12z", &txid));
}

}  // namespace
}  // namespace exo::db

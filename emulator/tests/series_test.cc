// Series: booking by send second, loss = sent - answered after the drain, arrivals by wall
// second, per-second percentiles; and the report built from it.
#include "loadgen/series.h"

#include <gtest/gtest.h>

#include "loadgen/report.h"
#include "wire.h"

namespace exo::loadgen {
namespace {

constexpr uint64_t kSec = 1'000'000'000;
constexpr uint64_t kStart = 7 * kSec;

TEST(Series, BooksBySendSecondAndArrivalSecond) {
  Series s(kStart, 5);
  s.on_sent(kStart + kSec / 2, 10);       // second 0
  s.on_sent(kStart + kSec + 1, 5);        // second 1
  s.on_sent(kStart + 3 * kSec - 1, 1);    // second 2, last ns
  // 8 of second 0's requests answered, arriving in seconds 0 and 1 (1 ms and 600 ms later).
  for (int i = 0; i < 8; ++i)
    s.on_reply(kStart + kSec / 2, kStart + kSec / 2 + (i < 4 ? 1'000'000 : 600'000'000), wire::kOk, 0);
  EXPECT_EQ(s.sent(), 16u);
  EXPECT_EQ(s.answered(), 8u);
  const auto rows = s.rows();
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].sent, 10u);
  EXPECT_EQ(rows[0].answered, 8u);
  EXPECT_EQ(rows[0].lost, 2u);
  EXPECT_EQ(rows[0].rx, 4u);
  EXPECT_EQ(rows[1].sent, 5u);
  EXPECT_EQ(rows[1].answered, 0u);
  EXPECT_EQ(rows[1].lost, 5u);
  EXPECT_EQ(rows[1].rx, 4u);  // by arrival: the 600 ms replies landed in second 1
  EXPECT_FALSE(rows[1].p50_us.has_value());  // nothing answered: no latency, not 0
  EXPECT_EQ(rows[2].sent, 1u);
  EXPECT_EQ(rows[2].t, 2u);
  ASSERT_TRUE(rows[0].p50_us.has_value());
  EXPECT_NEAR(*rows[0].p50_us, 1000.0, 5.0);     // 4 x 1 ms, 4 x 600 ms: rank 4 is 1 ms
  EXPECT_NEAR(*rows[0].p90_us, 600'000.0, 2400.0);
}

TEST(Series, EventsPastTheEndGoToTheLastRowAndBeforeStartToTheFirst) {
  Series s(kStart, 3);
  s.on_sent(kStart + 100 * kSec, 2);
  s.on_sent(kStart - 5, 1);
  const auto rows = s.rows();
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[2].sent, 2u);
  EXPECT_EQ(rows[0].sent, 1u);
  EXPECT_EQ(Series(kStart, 0).rows().size(), 0u);  // at least one row, but empty -> none listed
}

TEST(Series, PercentilesPerSecondFromKnownLatencies) {
  Series s(kStart, 2);
  s.on_sent(kStart, 1000);
  for (uint64_t i = 1; i <= 1000; ++i) s.on_reply(kStart, kStart + i * 1000, wire::kOk, 0);  // 1..1000 us
  const auto r = s.rows().at(0);
  EXPECT_NEAR(*r.p50_us, 500.0, 2.0);
  EXPECT_NEAR(*r.p90_us, 900.0, 4.0);
  EXPECT_NEAR(*r.p99_us, 990.0, 4.0);
  EXPECT_NEAR(*r.p999_us, 999.0, 4.0);
  EXPECT_EQ(r.lost, 0u);
  EXPECT_EQ(s.overall().count(), 1000u);
}

TEST(Report, TotalsAddUpAndLossIsAFraction) {
  Series s(kStart, 4);
  s.on_sent(kStart, 100);
  s.on_sent(kStart + kSec, 100);
  for (int i = 0; i < 150; ++i)
    s.on_reply(kStart + (i < 100 ? 0 : kSec), kStart + kSec + 2 * kSec / 10,
               i % 10 == 0 ? wire::kNotFound : wire::kOk, i % 2 ? wire::kFromCache : 0);
  TxStats tx;
  tx.sent = 200;
  tx.tx_errors = 3;
  tx.send_elapsed_ns = 2 * kSec;
  RxCounters rx;
  rx.duplicates = 4;
  rx.foreign = 5;
  rx.malformed = 6;
  const auto j = make_report({{"rate", 100}}, s, tx, rx, false, "");
  const auto& t = j["totals"];
  EXPECT_EQ(j["params"]["rate"], 100);
  EXPECT_EQ(t["sent"], 200);
  EXPECT_EQ(t["answered"], 150);
  EXPECT_EQ(t["lost"], 50);
  EXPECT_DOUBLE_EQ(t["loss"].get<double>(), 0.25);
  EXPECT_EQ(t["from_cache"], 75);
  EXPECT_EQ(t["not_found"], 15);
  EXPECT_DOUBLE_EQ(t["offered_rps"].get<double>(), 100.0);
  EXPECT_DOUBLE_EQ(t["answered_rps"].get<double>(), 75.0);
  EXPECT_EQ(t["tx_errors"], 3);
  EXPECT_EQ(t["rx_duplicates"], 4);
  EXPECT_EQ(t["rx_foreign"], 5);
  EXPECT_EQ(t["rx_malformed"], 6);
  EXPECT_FALSE(t["p50_us"].is_null());
  ASSERT_EQ(j["seconds"].size(), 2u);
  EXPECT_EQ(j["seconds"][1]["lost"], 50);
  EXPECT_EQ(j["seconds"][1]["rx"], 150);
  for (const char* k : {"t", "sent", "answered", "lost", "from_cache", "not_found", "errors",
                        "p50_us", "p90_us", "p99_us", "p999_us", "rx"})
    EXPECT_TRUE(j["seconds"][0].contains(k)) << k;
}

TEST(Report, EmptyRunHasNullLatencies) {
  Series s(kStart, 2);
  const auto j = make_report(nlohmann::json::object(), s, TxStats{}, RxCounters{}, true, "");
  EXPECT_TRUE(j["totals"]["p50_us"].is_null());
  EXPECT_EQ(j["totals"]["loss"], 0.0);
  EXPECT_EQ(j["totals"]["interrupted"], true);
  EXPECT_TRUE(j["seconds"].empty());
}

}  // namespace
}  // namespace exo::loadgen

namespace exo::loadgen {
namespace {

// --bin-ms 100: events land in 100 ms bins and rows carry the bin start in seconds.
TEST(Series, FinerBins) {
  constexpr uint64_t kStart = 3'000'000'000ULL, kMs = 1'000'000ULL;
  Series s(kStart, 30, 100 * kMs);
  s.on_sent(kStart + 50 * kMs, 2);    // bin 0
  s.on_sent(kStart + 250 * kMs, 3);   // bin 2
  s.on_reply(kStart + 250 * kMs, kStart + 260 * kMs, wire::kOk, wire::kFromCache);
  const auto rows = s.rows();
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_DOUBLE_EQ(rows[2].t, 0.2);
  EXPECT_EQ(rows[2].sent, 3u);
  EXPECT_EQ(rows[2].from_cache, 1u);
  EXPECT_EQ(rows[1].sent, 0u);
}

}  // namespace
}  // namespace exo::loadgen

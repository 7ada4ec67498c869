#include <gtest/gtest.h>

#include <set>
#include <string>

#include "counters.h"

namespace exo::db {
namespace {

TEST(Counters, NamesAreUniqueAndIncludeTheRequiredOnes) {
  std::set<std::string> names;
  for (const auto& d : kCounterDescs) {
    EXPECT_TRUE(names.insert(d.name).second) << d.name;
    EXPECT_GT(std::string(d.help).size(), 0u);
  }
  for (const char* n : {"rx_frames", "ignored", "malformed_dropped", "gets", "puts", "deletes",
                        "not_found", "misrouted", "forwarded_gets", "errors", "writes_propagated",
                        "requests_served", "tx_errors", "rate_limited", "wrong_owner_dropped",
                        "forwarded_unmarked_dropped"})
    EXPECT_TRUE(names.count(n)) << n;
}

TEST(Counters, SetSumsBlocksInDescOrder) {
  CounterSet set;
  Counters& a = set.add_block();
  Counters& b = set.add_block();
  bump(a.gets, 3);
  bump(b.gets);
  add_shared(b.tx_errors, 5);
  const CounterValues v = set.sum();
  for (size_t i = 0; i < kNumCounters; ++i) {
    const std::string n = kCounterDescs[i].name;
    const uint64_t want = n == "gets" ? 4 : n == "tx_errors" ? 5 : 0;
    EXPECT_EQ(v[i], want) << n;
  }
  EXPECT_EQ(alignof(Counters), 64u);
}

}  // namespace
}  // namespace exo::db

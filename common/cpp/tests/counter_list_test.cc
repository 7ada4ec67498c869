// The counters tables of docs/operations.md are generated from common/cpp/counter_list.h; this
// test fails while they differ, and rewrites them when run with EXO_UPDATE_DOCS=1:
//   EXO_UPDATE_DOCS=1 build/common/cpp/exo_common_tests --gtest_filter='CounterList.*'
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "counter_list.h"

namespace {

const std::string kDocPath = std::string(EXO_SOURCE_DIR) + "/docs/operations.md";
const std::string kBegin =
    "<!-- counters: generated from common/cpp/counter_list.h by common/cpp/tests/counter_list_test.cc "
    "(EXO_UPDATE_DOCS=1); do not edit by hand -->\n";
const std::string kEnd = "<!-- counters: end -->\n";

struct Program {
  const char* title;
  std::string prefix;  // of the Stats names
  std::vector<exo::CounterDesc> counters;
};

// Every program's Stats counters, in reply order.
std::vector<Program> programs() {
  return {
      {"Cache node (`exo-cache-node`)", "",
       {EXO_CACHE_DP_COUNTERS(EXO_COUNTER_DESC) EXO_CACHE_CP_COUNTERS(EXO_COUNTER_DESC)
            EXO_CACHE_GAUGES(EXO_COUNTER_DESC)}},
      {"Db node (`exo-db-node`, and every db node an `exo-emulator` hosts)", "",
       {EXO_DB_COUNTERS(EXO_COUNTER_DESC) EXO_DB_GAUGES(EXO_COUNTER_DESC)}},
      {"Wimpy emulator (`exo-emulator`): process-wide, after the db node's counters in every hosted "
       "node's `Stats`, the same values in each (not to be summed over nodes)",
       "emulator_",
       {EXO_EMULATOR_COUNTERS(EXO_COUNTER_DESC)}},
      {"Proxy (`exo-proxy`): its `stats` lines", "", {EXO_PROXY_COUNTERS(EXO_COUNTER_DESC)}},
      {"Every C++ program's /metrics listener: on the /metrics page only, not in `Stats`", "",
       {EXO_METRICS_HTTP_COUNTERS(EXO_COUNTER_DESC)}},
  };
}

std::string render() {
  std::string out = kBegin;
  for (const Program& p : programs()) {
    out += "\n" + std::string(p.title) + ":\n\n| counter | kind | meaning |\n|---|---|---|\n";
    for (const auto& c : p.counters)
      out += "| `" + p.prefix + c.name + "` | " +
             (c.kind == exo::CounterKind::COUNTER ? "counter" : "gauge") + " | " + c.help + " |\n";
  }
  return out + "\n" + kEnd;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The generated block of `doc` replaced by `block`; empty if the markers are missing.
std::string with_block(const std::string& doc, const std::string& block) {
  const size_t b = doc.find(kBegin);
  const size_t e = doc.find(kEnd, b == std::string::npos ? 0 : b);
  if (b == std::string::npos || e == std::string::npos) return "";
  return doc.substr(0, b) + block + doc.substr(e + kEnd.size());
}

// Empty if `doc` carries exactly the generated tables, else what is wrong.
std::string doc_mismatch(const std::string& doc) {
  const std::string fixed = with_block(doc, render());
  if (fixed.empty()) return "no generated counters block (markers missing)";
  if (fixed != doc) return "the counters tables differ from common/cpp/counter_list.h";
  return "";
}

TEST(CounterList, DocsTablesAreGeneratedFromTheList) {
  const std::string doc = read_file(kDocPath);
  ASSERT_FALSE(doc.empty()) << kDocPath;
  if (std::getenv("EXO_UPDATE_DOCS") != nullptr) {
    const std::string fixed = with_block(doc, render());
    ASSERT_FALSE(fixed.empty()) << "no markers in " << kDocPath;
    std::ofstream(kDocPath) << fixed;
  }
  EXPECT_EQ(doc_mismatch(read_file(kDocPath)), "")
      << "run: EXO_UPDATE_DOCS=1 build/common/cpp/exo_common_tests --gtest_filter='CounterList.*'\n"
      << "expected block:\n"
      << render();
}

// The known-bad inputs: a doc whose table was edited by hand, or that lost its markers.
TEST(CounterList, CheckRejectsAnEditedTable) {
  const std::string good = "# ops\n\n" + render() + "\nmore\n";
  EXPECT_EQ(doc_mismatch(good), "");
  std::string edited = good;
  edited.replace(edited.find("frames received"), 15, "frames received!");
  EXPECT_NE(doc_mismatch(edited), "");
  std::string dropped = good;
  const size_t row = dropped.find("| `gets` |");
  dropped.erase(row, dropped.find('\n', row) + 1 - row);
  EXPECT_NE(doc_mismatch(dropped), "");
  EXPECT_NE(doc_mismatch("# ops, no tables\n"), "");
}

// Stats names are unique within a program's reply (the emulator's hosted nodes reply with the
// db node's names and the emulator_ ones), lower_snake_case, and each has help.
TEST(CounterList, NamesAreUniqueAndDocumented) {
  const auto ps = programs();
  const std::regex name_re("[a-z][a-z0-9_]*");
  auto check = [&](const std::vector<const Program*>& reply) {
    std::set<std::string> names;
    for (const Program* p : reply)
      for (const auto& c : p->counters) {
        const std::string n = p->prefix + c.name;
        EXPECT_TRUE(names.insert(n).second) << "duplicate Stats name " << n;
        EXPECT_TRUE(std::regex_match(n, name_re)) << n;
        EXPECT_GT(std::string(c.help).size(), 0u) << n;
        EXPECT_EQ(std::string(c.help).find('|'), std::string::npos) << n << ": '|' breaks the table";
      }
  };
  check({&ps[0], &ps[4]});
  check({&ps[1], &ps[2], &ps[4]});
  check({&ps[3], &ps[4]});
}

}  // namespace

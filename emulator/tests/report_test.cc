// Output plumbing: the atomic JSON write and the progress line.
#include "loadgen/report.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace exo::loadgen {
namespace {

namespace fs = std::filesystem;

fs::path temp_dir() {
  std::string tmpl = (fs::temp_directory_path() / "exo_loadgen_testXXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) return {};
  return tmpl;
}

TEST(WriteFileAtomic, ReplacesTheFileAndLeavesNoTemporary) {
  const fs::path dir = temp_dir();
  ASSERT_FALSE(dir.empty());
  const fs::path out = dir / "run.json";
  std::ofstream(out) << "old";
  ASSERT_EQ(write_file_atomic(out.string(), "{\"new\": 1}\n"), "");
  std::stringstream text;
  text << std::ifstream(out).rdbuf();
  EXPECT_EQ(text.str(), "{\"new\": 1}\n");
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 1u);
  fs::remove_all(dir);
}

TEST(WriteFileAtomic, NamesTheOptionOnFailure) {
  const std::string err = write_file_atomic("/nonexistent-dir-for-exo/run.json", "{}");
  EXPECT_EQ(err.rfind("--out:", 0), 0u) << err;
}

TEST(ProgressLine, ShowsLossSoFar) {
  EXPECT_EQ(progress_line(3, 1000, 990), "t=3s sent=1000 answered=990 loss=1.00%");
  EXPECT_EQ(progress_line(0, 0, 0), "t=0s sent=0 answered=0 loss=0.00%");
}

}  // namespace
}  // namespace exo::loadgen

#include "dataset_cli.h"

#include <cstdio>

namespace exo::db::tools {

const CLI::Validator kUnsigned(
    [](std::string& v) {
      return v.find('-') == std::string::npos ? std::string() : std::string("must not be negative");
    },
    "");

void add_dataset_options(CLI::App& app, const DatasetFields& f, const std::string& data_dir_help) {
  app.add_option("--data-dir", *f.data_dir, data_dir_help)->required();
  app.add_option("--keys", *f.keys, "key ids first .. first + N - 1 (N)")->check(kUnsigned)->required();
  app.add_option("--first", *f.first, "first key id")->check(kUnsigned)->capture_default_str();
  app.add_option("--key-size", *f.key_size, "key bytes (\"key:\" + zero-padded id, as exo-loadgen sends)")
      ->check(kUnsigned)
      ->capture_default_str();
  app.add_option("--value-size", *f.value_size, "value bytes")->check(kUnsigned)->capture_default_str();
}

int parse_cli(CLI::App& app, int argc, const char* const* argv, std::string* error) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::printf("%s", app.help().c_str());
    return 0;
  } catch (const CLI::ParseError& e) {
    *error = e.what();
    return 2;
  }
  return -1;
}

}  // namespace exo::db::tools

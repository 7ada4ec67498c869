// The command line exo-db-load and exo-rocksdb-bench share: the data set's five options (the
// same names, help and checks in both, so a data set is named the same way to the loader and to
// the reader) and the parse step with its exit codes.
#pragma once

#include <CLI/CLI.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

namespace exo::db::tools {

// CLI11 reads "-3" into an unsigned option as 2^64 - 3; refuse it, naming the option.
extern const CLI::Validator kUnsigned;

// Where the data set's options are parsed to (fields of the tool's own options struct).
struct DatasetFields {
  std::string* data_dir;
  uint64_t* keys;
  uint64_t* first;
  size_t* key_size;
  size_t* value_size;
};

// --data-dir (required; `data_dir_help` says what the tool does with it), --keys (required),
// --first, --key-size, --value-size.
void add_dataset_options(CLI::App& app, const DatasetFields& f, const std::string& data_dir_help);

// Parses argv into the app's options. Returns -1 to go on (the caller then checks values), 0
// after --help (printed on stdout), 2 for a parse error (*error says which option).
int parse_cli(CLI::App& app, int argc, const char* const* argv, std::string* error);

}  // namespace exo::db::tools

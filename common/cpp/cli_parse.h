// Running a CLI11 app over a vector of arguments, the same way for every program: --help is
// printed with exit code 0, a usage error with exit code 2. Returning instead of exiting lets
// the option tests drive it without a process.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>
#include <vector>

namespace exo {

struct CliResult {
  bool run = false;   // false: exit with exit_code after printing message
  int exit_code = 0;  // 0 for --help, 2 for a usage error
  std::string message;
};

inline CliResult parse_cli(CLI::App& app, const std::vector<std::string>& args) {  // args[0]: program
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  CliResult r;
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::CallForHelp&) {
    r.message = app.help();
    return r;
  } catch (const CLI::ParseError& e) {
    r.exit_code = 2;
    r.message = std::string(e.what()) + "\nRun with --help for the options.";
    return r;
  }
  r.run = true;
  return r;
}

// For a result that does not run: prints its message (help to stdout, a usage error to stderr)
// and returns the exit code for main() to return.
inline int print_cli_exit(const CliResult& r) {
  std::FILE* to = r.exit_code == 0 ? stdout : stderr;
  std::fputs(r.message.c_str(), to);
  if (r.message.empty() || r.message.back() != '\n') std::fputc('\n', to);
  return r.exit_code;
}

}  // namespace exo

// The obsaug CLI's command line: each subcommand's options as "--key value",
// "--key=value" or a bare flag, and the mistakes that end in exit status 2.
// No torch here (tests/tools builds it on its own).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace obsaug::cli {

// A mistake on the command line: main() prints it with a pointer to --help
// and exits 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One subcommand's options.
struct Args {
  std::map<std::string, std::string> values;  // --key value
  std::set<std::string> flags;                // bare flags, and "help"
  std::vector<std::string> positional;

  bool has(const std::string& key) const { return values.count(key) || flags.count(key); }
  std::string get(const std::string& key, const std::string& fallback = "") const;
  // The value of --key as an integer >= min_value (also "1e7" style); the
  // fallback when absent; UsageError otherwise.
  int64_t get_int(const std::string& key, int64_t fallback, int64_t min_value) const;
};

// Parses argv[first..argc) for `command`: `valued` options take a value,
// `bare` ones do not; --help is always known. UsageError names an unknown
// option with the known ones.
Args parse_args(const std::string& command, int argc, char** argv, int first,
                const std::set<std::string>& valued, const std::set<std::string>& bare);

// The config path: --config FILE, or the one positional argument.
std::string required_config(const std::string& command, const Args& args);

}  // namespace obsaug::cli

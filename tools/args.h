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
  // The value of --key as an integer in min_value..max_value (min_value >= 0),
  // written in decimal digits or as a whole number in exponent form ("1e7",
  // "2.5e6");
  // the fallback when absent; UsageError, naming the range, otherwise.
  int64_t get_int(const std::string& key, int64_t fallback, int64_t min_value,
                  int64_t max_value = INT64_MAX) const;
  // The value of --key as an integer in 0..2^64-1, decimal digits only.
  uint64_t get_uint64(const std::string& key, uint64_t fallback) const;
};

// Parses argv[first..argc) for `command`: `valued` options take a value,
// `bare` ones do not; --help is always known. UsageError names an unknown
// option with the known ones, an option given twice, and a valued option
// followed by another option instead of its value ("--config --batch 4";
// "--config=--odd" still takes the text after '=').
Args parse_args(const std::string& command, int argc, char** argv, int first,
                const std::set<std::string>& valued, const std::set<std::string>& bare);

// The config path: --config FILE, or the one positional argument. UsageError
// for none, an empty one, or an extra argument (named).
std::string required_config(const std::string& command, const Args& args);

}  // namespace obsaug::cli

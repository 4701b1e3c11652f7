// The obsaug CLI's command line (tools/args.h).
#include "tools/args.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "tools/decimal.h"

namespace obsaug::cli {

std::string Args::get(const std::string& key, const std::string& fallback) const {
  auto it = values.find(key);
  return it == values.end() ? fallback : it->second;
}

namespace {

// Whether text is digits, optionally with a fraction and an exponent:
// 123, 1e7, 2.5e+6 (no sign, no hex, no inf or nan).
bool decimal_number(const std::string& text) {
  size_t i = 0;
  const auto digits = [&] {
    const size_t from = i;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
    return i > from;
  };
  if (!digits()) return false;
  if (i < text.size() && text[i] == '.') {
    ++i;
    if (!digits()) return false;
  }
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < text.size() && text[i] == '+') ++i;
    if (!digits()) return false;
  }
  return i == text.size();
}

}  // namespace

int64_t Args::get_int(const std::string& key, int64_t fallback, int64_t min_value,
                      int64_t max_value) const {
  auto it = values.find(key);
  if (it == values.end()) return fallback;
  const std::string& text = it->second;
  const std::string range =
      max_value == INT64_MAX ? ">= " + std::to_string(min_value)
                             : "in " + std::to_string(min_value) + ".." + std::to_string(max_value);
  const auto refuse = [&] {
    throw UsageError("--" + key + ": expected an integer " + range + ", got '" + text + "'");
  };
  if (!decimal_number(text)) refuse();  // no sign: every option counts from 0 or 1
  int64_t v = 0;
  if (uint64_t digits = 0; parse_decimal(text, INT64_MAX, &digits)) {  // digits: exact
    v = static_cast<int64_t>(digits);
  } else if (text.find_first_not_of("0123456789") == std::string::npos) {
    refuse();  // digits beyond int64
  } else {  // 1e7, 2.5e6: whole, and inside int64 before the cast (9e18 < 2^63)
    const double d = std::strtod(text.c_str(), nullptr);
    if (!(d == std::floor(d)) || d > 9.0e18) refuse();
    v = static_cast<int64_t>(d);
  }
  if (v < min_value || v > max_value) refuse();
  return v;
}

uint64_t Args::get_uint64(const std::string& key, uint64_t fallback) const {
  auto it = values.find(key);
  if (it == values.end()) return fallback;
  const std::string& text = it->second;
  uint64_t v = 0;
  if (!parse_decimal(text, UINT64_MAX, &v)) {
    throw UsageError("--" + key + ": expected an integer in 0..18446744073709551615, got '" + text +
                     "'");
  }
  return v;
}

Args parse_args(const std::string& command, int argc, char** argv, int first,
                const std::set<std::string>& valued, const std::set<std::string>& bare) {
  Args args;
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0 || arg == "--") {
      args.positional.push_back(arg);
      continue;
    }
    std::string key = arg.substr(2);
    std::string value;
    bool has_value = false;
    if (auto eq = key.find('='); eq != std::string::npos) {
      value = key.substr(eq + 1);
      key = key.substr(0, eq);
      has_value = true;
    }
    if (key == "help") {
      args.flags.insert("help");
    } else if (valued.count(key)) {
      if (!has_value) {
        if (i + 1 >= argc) throw UsageError("--" + key + " needs a value");
        value = argv[++i];
        // "--config --batch 4" forgot the config; a value that looks like
        // an option can still be given as --key=value.
        if (value.size() > 2 && value.rfind("--", 0) == 0)
          throw UsageError("--" + key + " needs a value, but the next argument is the option " +
                           value.substr(0, value.find('=')));
      }
      if (args.values.count(key))
        throw UsageError("--" + key + " given twice ('" + args.values[key] + "', then '" + value +
                         "'); give it once");
      args.values[key] = value;
    } else if (bare.count(key)) {
      if (has_value) throw UsageError("--" + key + " takes no value");
      if (args.flags.count(key)) throw UsageError("--" + key + " given twice; give it once");
      args.flags.insert(key);
    } else {
      std::string known;
      for (const auto& k : valued) known += " --" + k;
      for (const auto& k : bare) known += " --" + k;
      throw UsageError(command + ": unknown option '" + arg + "' (known:" + known + ")");
    }
  }
  return args;
}

std::string required_config(const std::string& command, const Args& args) {
  if (args.values.count("config")) {
    const std::string path = args.get("config");
    if (path.empty())
      throw UsageError(command + ": --config is empty; give a YAML file or a preset name");
    if (!args.positional.empty())
      throw UsageError(command + ": unexpected argument '" + args.positional[0] +
                       "' (the config is already --config " + path + ")");
    return path;
  }
  if (args.positional.empty()) throw UsageError(command + ": --config FILE is required");
  if (args.positional.size() > 1)
    throw UsageError(command + ": unexpected argument '" + args.positional[1] +
                     "' (the config is already '" + args.positional[0] + "')");
  if (args.positional[0].empty())
    throw UsageError(command + ": the config is empty; give a YAML file or a preset name");
  return args.positional[0];
}

}  // namespace obsaug::cli

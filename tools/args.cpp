// The obsaug CLI's command line (tools/args.h).
#include "tools/args.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace obsaug::cli {

std::string Args::get(const std::string& key, const std::string& fallback) const {
  auto it = values.find(key);
  return it == values.end() ? fallback : it->second;
}

int64_t Args::get_int(const std::string& key, int64_t fallback, int64_t min_value) const {
  auto it = values.find(key);
  if (it == values.end()) return fallback;
  const std::string& text = it->second;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(text.c_str(), &end, 10);
  // Accept 1e7 / 10e6 style counts too.
  if (end && *end != '\0') {
    double d = std::strtod(text.c_str(), &end);
    if (*end != '\0' || !(d == std::floor(d)) || d > 9.0e18)
      v = min_value - 1;
    else
      v = static_cast<long long>(d);
  }
  if (text.empty() || errno == ERANGE || v < min_value) {
    throw UsageError("--" + key + ": expected an integer >= " + std::to_string(min_value) +
                     ", got '" + text + "'");
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
      }
      args.values[key] = value;
    } else if (bare.count(key)) {
      if (has_value) throw UsageError("--" + key + " takes no value");
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
  std::string path = args.get("config");
  if (path.empty() && args.positional.size() == 1)
    path = args.positional[0];
  else if (!args.positional.empty())
    throw UsageError(command + ": unexpected argument '" + args.positional[0] + "'");
  if (path.empty()) throw UsageError(command + ": --config FILE is required");
  return path;
}

}  // namespace obsaug::cli

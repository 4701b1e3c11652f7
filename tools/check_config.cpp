// obsaug check-config FILE: loads and validates a config, then prints it
// with every default and inferred value spelled out (itself a valid config).
#include <cstdio>
#include <string>

#include "engine/config.h"
#include "tools/args.h"
#include "tools/commands.h"

namespace obsaug::cli {

int check_config_command(int argc, char** argv) {
  Args args = parse_args("check-config", argc, argv, 2, {"config"}, {});
  if (args.has("help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const std::string path = config_file("check-config", args);
  Config config = load_config_file(path, checkout_root());
  std::printf("# %s: valid\n%s", path.c_str(), describe(config).c_str());
  return 0;
}

}  // namespace obsaug::cli

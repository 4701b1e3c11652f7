// The config file a subcommand names (--config FILE or the positional): a
// path, or a preset name looked up by find_config (engine/locations.h) in the
// configs/ folder beside the executable's package. POSIX only: tools/ stays
// off std::filesystem (see main.cpp).
#include <unistd.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "engine/locations.h"
#include "tools/args.h"
#include "tools/commands.h"

namespace obsaug::cli {
namespace {

// The folder holding this executable ("" when /proc is not there).
std::string executable_dir() {
  std::string buffer(4096, '\0');
  const ssize_t n = readlink("/proc/self/exe", buffer.data(), buffer.size() - 1);
  if (n <= 0) return "";
  buffer.resize(static_cast<size_t>(n));
  return buffer.substr(0, buffer.rfind('/'));
}

}  // namespace

std::string checkout_root() {
  std::string root = executable_dir();  // <checkout>/build/tools
  for (int up = 0; up < 2 && !root.empty(); ++up) root = root.substr(0, root.rfind('/'));
  // As obsaug.locations.checkout_root tells a checkout from an installed package.
  if (root.empty() || access((root + "/configs/default.yaml").c_str(), R_OK) != 0) return "";
  return root;
}

std::string config_file(const std::string& command, const Args& args) {
  const std::string text = required_config(command, args);
  const std::string exe = executable_dir();
  // The wheel installs the presets as obsaug/configs and this tool as
  // obsaug/bin/obsaug; a build tree has it in build/tools/ under the checkout.
  const std::vector<std::string> preset_dirs =
      exe.empty() ? std::vector<std::string>{}
                  : std::vector<std::string>{exe + "/../configs", exe + "/../../configs"};
  try {
    return find_config(text, preset_dirs);
  } catch (const std::invalid_argument& e) {
    throw UsageError(command + ": " + e.what());
  }
}

}  // namespace obsaug::cli

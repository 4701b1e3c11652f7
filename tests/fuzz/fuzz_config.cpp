// libFuzzer target: the YAML config loader (yaml-cpp + obsaug's strict
// schema) on arbitrary text. Bad configs must end in ConfigError (an
// std::invalid_argument naming the key); a config it accepts must survive
// its own round trip: load(describe(c)) == c.
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "engine/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  obsaug::Config config;
  try {
    config = obsaug::load_config_string(text, "<fuzz>", "/nonexistent-obsaug-fuzz-base");
  } catch (const std::invalid_argument&) {
    return 0;
  }
  const obsaug::Config again = obsaug::load_config_string(obsaug::describe(config), "<describe>");
  if (!(again == config)) std::abort();
  return 0;
}

// libFuzzer target: the replay checkpoint loader on arbitrary bytes. A
// damaged or hostile file must end in std::invalid_argument (corrupt,
// truncated, inconsistent); a file it accepts must be usable: sampling
// from it walks only the links restore() validated.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "replay/replay_buffer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = "/tmp/obsaug_fuzz_replay_" + std::to_string(::getpid());
  ::mkdir(dir.c_str(), 0755);
  const std::string path = dir + "/replay.obsaug";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) std::abort();
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  try {
    obsaug::ReplayBuffer rb = obsaug::ReplayBuffer::load(dir);
    if (rb.num_valid() > 0) rb.sample(rb.num_valid() < 4 ? rb.num_valid() : 4);
  } catch (const std::invalid_argument&) {
  }
  return 0;
}

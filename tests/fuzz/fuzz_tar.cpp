// libFuzzer target: the WebDataset tar reader on arbitrary bytes (written
// to a temporary file, as shards are read from disk). Malformed archives
// must end in SourceError; every member it lists must lie inside the file.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "engine/source/image_source.h"
#include "engine/source/tar_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/obsaug_fuzz_tar_" + std::to_string(::getpid()) + ".tar";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) std::abort();
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  try {
    for (const obsaug::TarMember& m : obsaug::read_tar_index(path).members) {
      if (m.offset > size || m.size > size - m.offset) std::abort();  // outside the shard
    }
  } catch (const obsaug::SourceError&) {
  }
  return 0;
}

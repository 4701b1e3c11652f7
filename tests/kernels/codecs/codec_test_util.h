// Shared by the codec tests: frames (real ones from the committed fixture and
// from data/frames, structured synthetic ones, noise), records held in
// vectors of their exact size (so that AddressSanitizer sees a read past a
// record's end), and a checksum refresh (so that a corrupted record reaches
// the structural checks behind the checksum).
#pragma once

#include <dirent.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "benchmarks/npy_file.h"
#include "kernels/codecs/frame_codec.h"

namespace obsaug {
namespace codecs {
namespace testing {

// Consecutive frames of one shape, [count, C, H, W].
struct FrameSet {
  std::string name;
  FrameShape shape;
  int64_t count = 0;
  std::vector<uint8_t> bytes;
  const uint8_t* frame(int64_t i) const { return bytes.data() + i * shape.bytes(); }
};

inline std::vector<std::string> npy_files(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0)
        out.push_back(dir + "/" + name);
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

inline FrameSet load_frames(const std::string& path) {
  NpyArray a = read_npy_uint8(path);
  FrameSet f;
  f.name = path.substr(path.find_last_of('/') + 1);
  f.count = a.shape.at(0);
  f.shape = FrameShape{static_cast<int32_t>(a.shape.at(1)), static_cast<int32_t>(a.shape.at(2)),
                       static_cast<int32_t>(a.shape.at(3))};
  f.bytes = std::move(a.data);
  return f;
}

// The committed real frames (tests/kernels/codecs/data), always there.
inline std::vector<FrameSet> fixture_frames() {
  std::vector<FrameSet> out;
  for (const std::string& p :
       npy_files(std::string(OBSAUG_SOURCE_DIR) + "/tests/kernels/codecs/data"))
    out.push_back(load_frames(p));
  return out;
}

// What benchmarks/capture_frames.py wrote to data/frames (none in CI).
inline std::vector<std::string> captured_frame_files() {
  return npy_files(std::string(OBSAUG_SOURCE_DIR) + "/data/frames");
}

// Frames like renders: a gradient background, rectangles that move a pixel
// or two per frame, a few single pixels of noise; frame t of a sequence.
inline std::vector<uint8_t> scene_frame(FrameShape s, int t, uint32_t seed) {
  std::vector<uint8_t> f(static_cast<size_t>(s.bytes()));
  std::mt19937 rng(seed);
  struct Box {
    int y, x, h, w, dy, dx;
    uint8_t value[4];
  };
  std::vector<Box> boxes(3);
  for (Box& b : boxes) {
    b = Box{static_cast<int>(rng() % (s.height + 1)),
            static_cast<int>(rng() % (s.width + 1)),
            1 + static_cast<int>(rng() % (s.height / 2 + 1)),
            1 + static_cast<int>(rng() % (s.width / 2 + 1)),
            static_cast<int>(rng() % 3) - 1,
            static_cast<int>(rng() % 5) - 2,
            {}};
    for (uint8_t& v : b.value) v = static_cast<uint8_t>(rng());
  }
  for (int32_t c = 0; c < s.channels; ++c)
    for (int32_t y = 0; y < s.height; ++y)
      for (int32_t x = 0; x < s.width; ++x) {
        uint8_t v = static_cast<uint8_t>(40 + c * 30 + y / 3 + x / 5);
        for (const Box& b : boxes) {
          const int by = b.y + b.dy * t, bx = b.x + b.dx * t;
          if (y >= by && y < by + b.h && x >= bx && x < bx + b.w) v = b.value[c % 4];
        }
        f[static_cast<size_t>((static_cast<int64_t>(c) * s.height + y) * s.width + x)] = v;
      }
  std::mt19937 noise(seed * 7919u + static_cast<uint32_t>(t));
  for (int k = 0; k < 3; ++k) f[noise() % f.size()] = static_cast<uint8_t>(noise());
  return f;
}

inline std::vector<uint8_t> noise_frame(FrameShape s, uint32_t seed) {
  std::vector<uint8_t> f(static_cast<size_t>(s.bytes()));
  std::mt19937 rng(seed);
  for (uint8_t& v : f) v = static_cast<uint8_t>(rng());
  return f;
}

inline std::vector<uint8_t> to_vector(const RecordBytes& r) {
  return std::vector<uint8_t>(r.data, r.data + r.size);
}

// The record's checksum recomputed over its bytes as they are now.
inline void refresh_checksum(std::vector<uint8_t>& record) {
  if (static_cast<int64_t>(record.size()) < kRecordHeaderBytes) return;
  const uint32_t terms = checksum_terms(record.data(), record.size(), 0, 1);
  store_u32(record.data() + kChecksumOffset, finish_checksum(terms, record.size()));
}

// Every codec the tests round-trip, by name.
inline const std::vector<std::string>& all_codec_names() {
  static const std::vector<std::string> names = {
      "stored",    "packed-1", "packed-3", "packed-4", "packed-255",  "lz4",
      "lz4-plain", "lz4hc-9",  "zstd-1",   "zstd-3",   "zstd-3-plain"};
  return names;
}

// The ISAs this CPU runs (kPortable always).
inline std::vector<CodecIsa> isas() { return available_codec_isas(); }

inline std::string shape_name(FrameShape s) {
  return std::to_string(s.channels) + "x" + std::to_string(s.height) + "x" +
         std::to_string(s.width);
}

}  // namespace testing
}  // namespace codecs
}  // namespace obsaug

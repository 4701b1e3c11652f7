// obsaug_codec_bench: the frame codecs of kernels/codecs on real frames
// (one .npy of [N, C, H, W] uint8 and its episodes), per codec and per coding
// scheme, side by side in one run; benchmarks/bench_codecs.py runs it per
// environment and prints the tables of BENCHMARKS.md "Compressed frames".
//
// Schemes (which reference each frame is coded against):
//   frame    every frame intra (no reference)
//   prev-K   a key frame (intra) at the start of every episode and every K
//            frames after it; the others delta against their predecessor
//   key-K    the same key frames; the others delta against their group's key
//   rawkey-K key-K with the key frames stored as they are (codec "stored"):
//            the gather reads a key's pixels in place, decoding no key
//
// Per (codec, scheme), one JSON line: ratio (raw bytes / record bytes),
// encode and decode MB/s of frame bytes on one thread (the least thread CPU
// time of --repeats runs, steadier than wall time where other jobs share the
// cores; decode includes the residual's add, each frame decoded once given
// its reference, as the gather consumes it), and the sampled-batch model: --batch
// transitions drawn uniformly, each needing the S + 1 consecutive frames of
// its stack and next stack (the first frame of an episode repeated), decoded
// with everything their references need (the group's key once per sample for
// key-K; the chain from the key for prev-K), against a copy of the same
// frames from raw storage; on one thread (CPU time) and on --threads threads
// (wall time, best of --repeats). Every
// record is decoded and compared with its frame once, before timing.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "benchmarks/npy_file.h"
#include "kernels/codecs/frame_codec.h"

namespace {

using obsaug::codecs::CodecSpec;
using obsaug::codecs::FrameDecoder;
using obsaug::codecs::FrameEncoder;
using obsaug::codecs::FrameShape;
using Clock = std::chrono::steady_clock;

struct Scheme {
  std::string name;
  enum Kind { kFrame, kPrev, kKey, kRawKey } kind = kFrame;
  int k = 1;
};

Scheme parse_scheme(const std::string& s) {
  Scheme scheme;
  scheme.name = s;
  if (s == "frame") return scheme;
  const size_t dash = s.find('-');
  const std::string kind = s.substr(0, dash);
  if (dash == std::string::npos || (kind != "prev" && kind != "key" && kind != "rawkey"))
    throw std::invalid_argument("scheme '" + s + "': expected frame, prev-K, key-K or rawkey-K");
  scheme.kind = kind == "prev" ? Scheme::kPrev : kind == "key" ? Scheme::kKey : Scheme::kRawKey;
  scheme.k = std::stoi(s.substr(dash + 1));
  if (scheme.k < 1) throw std::invalid_argument("scheme '" + s + "': K must be >= 1");
  return scheme;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    const size_t comma = s.find(',', pos);
    const std::string item =
        s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (!item.empty()) out.push_back(item);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

// The frames and, per frame, its episode's first frame and the frame its
// record is coded against under a scheme (-1: intra).
struct Frames {
  FrameShape shape;
  int64_t count = 0;
  std::vector<uint8_t> bytes;
  std::vector<int64_t> episode_start;  // per frame
  std::vector<int64_t> episode_end;    // per frame, exclusive
  const uint8_t* frame(int64_t i) const { return bytes.data() + i * shape.bytes(); }
};

int64_t key_of(const Frames& f, const Scheme& s, int64_t i) {
  const int64_t start = f.episode_start[i];
  return start + (i - start) / s.k * s.k;
}
int64_t reference_of(const Frames& f, const Scheme& s, int64_t i) {
  if (s.kind == Scheme::kFrame || key_of(f, s, i) == i) return -1;
  return s.kind == Scheme::kPrev ? i - 1 : key_of(f, s, i);
}
bool stored_key(const Scheme& s, const Frames& f, int64_t i) {
  return s.kind == Scheme::kRawKey && key_of(f, s, i) == i;
}

struct Records {
  std::vector<uint8_t> bytes;
  std::vector<int64_t> offset;  // count + 1
  int64_t stored = 0;           // frames that fell back to kStored
  const uint8_t* data(int64_t i) const { return bytes.data() + offset[i]; }
  int64_t size(int64_t i) const { return offset[i + 1] - offset[i]; }
};

Records encode_all(const Frames& f, const Scheme& s, FrameEncoder& enc, FrameEncoder& stored) {
  Records r;
  r.offset.assign(f.count + 1, 0);
  r.bytes.resize(static_cast<size_t>(f.count * enc.max_record_bytes()));
  for (int64_t i = 0; i < f.count; ++i) {
    const int64_t ref = reference_of(f, s, i);
    const obsaug::codecs::RecordBytes rec =
        (stored_key(s, f, i) ? stored : enc).encode(f.frame(i), ref < 0 ? nullptr : f.frame(ref));
    std::memcpy(r.bytes.data() + r.offset[i], rec.data, static_cast<size_t>(rec.size));
    r.offset[i + 1] = r.offset[i] + rec.size;
    r.stored += rec.data[1] == static_cast<uint8_t>(obsaug::codecs::RecordCodec::kStored);
  }
  return r;
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// One sampled transition's frames: [first, last] of one episode.
struct Draw {
  int64_t first;
  int64_t last;
};

std::vector<Draw> draw_batch(const Frames& f, int64_t batch, int stack, uint64_t seed) {
  std::vector<int64_t> valid;  // t with t + 1 in the same episode
  for (int64_t t = 0; t < f.count; ++t)
    if (t + 1 < f.episode_end[t]) valid.push_back(t);
  std::mt19937_64 rng(seed);
  std::vector<Draw> draws;
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t t = valid[rng() % valid.size()];
    draws.push_back({std::max(f.episode_start[t], t - stack + 1), t + 1});
  }
  return draws;
}

// Decodes what draws[begin, end) need into per-thread scratch: the frames of
// each draw, and the frames their references need first.
void decode_draws(const Frames& f, const Scheme& s, const Records& r,
                  const std::vector<Draw>& draws, size_t begin, size_t end, FrameDecoder& dec,
                  std::vector<uint8_t>& scratch, bool verify = false) {
  const int64_t n = f.shape.bytes();
  const int span = 16;  // frames per draw at most, for the scratch slots
  scratch.resize(static_cast<size_t>((span + 1) * n));
  uint8_t* key_slot = scratch.data() + span * n;
  for (size_t d = begin; d < end; ++d) {
    const Draw& draw = draws[d];
    int64_t decoded_key = -1;  // key-K: the key frame decoded last, and where it is
    const uint8_t* key = nullptr;
    const int64_t from = s.kind == Scheme::kPrev ? key_of(f, s, draw.first) : draw.first;
    for (int64_t i = from; i <= draw.last; ++i) {
      uint8_t* out = scratch.data() + ((i - from) % span) * n;
      const int64_t ref = reference_of(f, s, i);
      if (stored_key(s, f, i)) continue;  // read in place by the gather
      const uint8_t* ref_ptr = nullptr;
      if (ref >= 0 && s.kind == Scheme::kPrev) ref_ptr = scratch.data() + ((ref - from) % span) * n;
      if (ref >= 0 && s.kind == Scheme::kRawKey)
        ref_ptr = r.data(ref) + obsaug::codecs::kRecordHeaderBytes;
      if (ref >= 0 && s.kind == Scheme::kKey) {
        if (decoded_key != ref) {  // a key before the draw's first frame
          dec.decode(r.data(ref), r.size(ref), nullptr, key_slot);
          decoded_key = ref;
          key = key_slot;
        }
        ref_ptr = key;
      }
      dec.decode(r.data(i), r.size(i), ref_ptr, out);
      if (verify && std::memcmp(out, f.frame(i), static_cast<size_t>(n)) != 0)
        throw std::runtime_error(s.name + ": the sampled frame " + std::to_string(i) +
                                 " decodes wrong");
      if (ref < 0) decoded_key = i, key = out;
    }
  }
}

// The thread's own CPU time (user + system): on a shared machine, the time it
// ran, not the time other jobs held its core.
double thread_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// The least thread CPU time of `repeats` runs of body() on this thread.
template <typename Body>
double best_of(int repeats, Body body) {
  double best = 1e30;
  for (int k = 0; k < repeats; ++k) {
    const double t0 = thread_cpu_seconds();
    body();
    best = std::min(best, thread_cpu_seconds() - t0);
  }
  return best;
}

// The least wall time of `repeats` runs of body(t) on `threads` threads.
template <typename Body>
double parallel_best_of(int repeats, int threads, Body body) {
  double best = 1e30;
  for (int k = 0; k < repeats; ++k) {
    const Clock::time_point t0 = Clock::now();
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) pool.emplace_back(body, t);
    body(0);
    for (std::thread& th : pool) th.join();
    best = std::min(best, seconds_since(t0));
  }
  return best;
}

void run(const Frames& f, const std::string& codec, const Scheme& s, int repeats, int64_t batch,
         int stack, int threads, uint64_t seed) {
  const CodecSpec spec = obsaug::codecs::parse_codec_spec(codec);
  FrameEncoder enc(spec, f.shape);
  FrameEncoder stored(obsaug::codecs::parse_codec_spec("stored"), f.shape);
  const int64_t n = f.shape.bytes();
  const double raw_mb = static_cast<double>(f.count * n) / 1e6;
  Records records;
  const double enc_s = best_of(repeats, [&] { records = encode_all(f, s, enc, stored); });

  FrameDecoder dec(f.shape);
  std::vector<uint8_t> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < f.count; ++i) {  // bit-exact, once
    const int64_t ref = reference_of(f, s, i);
    dec.decode(records.data(i), records.size(i), ref < 0 ? nullptr : f.frame(ref), out.data());
    if (std::memcmp(out.data(), f.frame(i), static_cast<size_t>(n)) != 0)
      throw std::runtime_error(codec + " " + s.name + ": frame " + std::to_string(i) +
                               " decodes wrong");
  }
  const double dec_s = best_of(repeats, [&] {
    for (int64_t i = 0; i < f.count; ++i) {
      const int64_t ref = reference_of(f, s, i);
      dec.decode(records.data(i), records.size(i), ref < 0 ? nullptr : f.frame(ref), out.data());
    }
  });

  const std::vector<Draw> draws = draw_batch(f, batch, stack, seed);
  int64_t frames_decoded = 0;
  for (const Draw& d : draws) {
    const int64_t from = s.kind == Scheme::kPrev ? key_of(f, s, d.first) : d.first;
    frames_decoded += d.last - from + 1;
    if (s.kind == Scheme::kRawKey)
      for (int64_t i = from; i <= d.last; ++i) frames_decoded -= stored_key(s, f, i);
    if (s.kind == Scheme::kKey) {  // plus the keys before the draw's first frame
      const int64_t ref = reference_of(f, s, d.first);
      frames_decoded += ref >= 0;
    }
  }
  std::vector<std::vector<uint8_t>> scratch(static_cast<size_t>(threads));
  std::vector<std::unique_ptr<FrameDecoder>> decoders;
  for (int t = 0; t < threads; ++t) decoders.emplace_back(new FrameDecoder(f.shape));
  const auto slice = [&](int t, int parts) {
    return std::make_pair(draws.size() * t / parts, draws.size() * (t + 1) / parts);
  };
  decode_draws(f, s, records, draws, 0, draws.size(), *decoders[0], scratch[0], true);
  const double sample1_s = best_of(repeats, [&] {
    decode_draws(f, s, records, draws, 0, draws.size(), *decoders[0], scratch[0]);
  });
  const double sample_n_s = parallel_best_of(repeats, threads, [&](int t) {
    const auto range = slice(t, threads);
    decode_draws(f, s, records, draws, range.first, range.second, *decoders[t], scratch[t]);
  });
  std::vector<uint8_t> copy_out(static_cast<size_t>(16 * n));
  const double copy_s = best_of(repeats, [&] {
    for (const Draw& d : draws)
      for (int64_t i = d.first; i <= d.last; ++i)
        std::memcpy(copy_out.data() + (i - d.first) * n, f.frame(i), static_cast<size_t>(n));
  });
  std::printf(
      "{\"codec\": \"%s\", \"scheme\": \"%s\", \"frames\": %lld, \"raw_bytes\": %lld, "
      "\"record_bytes\": %lld, \"stored_frames\": %lld, \"ratio\": %.4f, \"encode_mbps\": %.1f, "
      "\"encode_us_per_frame\": %.2f, \"decode_mbps\": %.1f, \"sample_frames_decoded\": %lld, "
      "\"sample_ms_1t\": %.3f, \"sample_ms_%dt\": %.3f, \"copy_ms\": %.3f}\n",
      obsaug::codecs::codec_spec_name(spec).c_str(), s.name.c_str(),
      static_cast<long long>(f.count), static_cast<long long>(f.count * n),
      static_cast<long long>(records.bytes.size() ? records.offset.back() : 0),
      static_cast<long long>(records.stored),
      static_cast<double>(f.count * n) / records.offset.back(), raw_mb / enc_s,
      enc_s * 1e6 / f.count, raw_mb / dec_s, static_cast<long long>(frames_decoded),
      sample1_s * 1e3, threads, sample_n_s * 1e3, copy_s * 1e3);
  std::fflush(stdout);
}

const char* kUsage =
    "usage: obsaug_codec_bench --frames FILE.npy [--episode-starts 0,50,...] [--codecs a,b]\n"
    "       [--schemes frame,prev-8,key-8] [--repeats 5] [--batch 256] [--stack 3]\n"
    "       [--threads 2] [--seed 0]\n";

}  // namespace

int main(int argc, char** argv) {
  std::string path;
  std::string starts_text = "0";
  std::string codecs = "packed,lz4,zstd-3";
  std::string schemes = "frame,prev-8,key-8";
  int repeats = 5;
  int64_t batch = 256;
  int stack = 3;
  int threads = 2;
  uint64_t seed = 0;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      const auto value = [&]() -> std::string {
        if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value");
        return argv[++i];
      };
      if (arg == "--frames")
        path = value();
      else if (arg == "--episode-starts")
        starts_text = value();
      else if (arg == "--codecs")
        codecs = value();
      else if (arg == "--schemes")
        schemes = value();
      else if (arg == "--repeats")
        repeats = std::stoi(value());
      else if (arg == "--batch")
        batch = std::stoll(value());
      else if (arg == "--stack")
        stack = std::stoi(value());
      else if (arg == "--threads")
        threads = std::stoi(value());
      else if (arg == "--seed")
        seed = std::stoull(value());
      else
        throw std::invalid_argument("unknown argument " + arg);
    }
    if (path.empty()) throw std::invalid_argument("--frames is required");
    if (stack < 1 || stack > 15 || threads < 1 || repeats < 1 || batch < 1)
      throw std::invalid_argument("--stack must be 1..15, --threads, --repeats and --batch >= 1");
    const obsaug::NpyArray array = obsaug::read_npy_uint8(path);
    if (array.shape.size() != 4) throw std::invalid_argument(path + ": expected [N, C, H, W]");
    Frames f;
    f.count = array.shape[0];
    f.shape = FrameShape{static_cast<int32_t>(array.shape[1]), static_cast<int32_t>(array.shape[2]),
                         static_cast<int32_t>(array.shape[3])};
    f.bytes = array.data;
    std::vector<int64_t> starts;
    for (const std::string& s : split(starts_text)) starts.push_back(std::stoll(s));
    if (starts.empty() || starts[0] != 0 || !std::is_sorted(starts.begin(), starts.end()) ||
        starts.back() >= f.count)
      throw std::invalid_argument(
          "--episode-starts must start at 0, rise, and stay below the frame count");
    f.episode_start.resize(f.count);
    f.episode_end.resize(f.count);
    for (size_t e = 0; e < starts.size(); ++e) {
      const int64_t end = e + 1 < starts.size() ? starts[e + 1] : f.count;
      for (int64_t i = starts[e]; i < end; ++i)
        f.episode_start[i] = starts[e], f.episode_end[i] = end;
    }
    for (const std::string& c : split(codecs))
      for (const std::string& s : split(schemes))
        run(f, c, parse_scheme(s), repeats, batch, stack, threads, seed);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "obsaug_codec_bench: %s\n%s", e.what(), kUsage);
    return 2;
  }
  return 0;
}

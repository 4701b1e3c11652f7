// obsaug_decode_bench: throughput of the distractor decode pipeline
// (decode.h: read the file, decode with or without TurboJPEG DCT-domain
// scaling, RandomResizedCrop, flip, antialiased resize to Hp x Wp, CHW).
// benchmarks/bench_decode.py runs it next to Pillow + torchvision.
//
//   obsaug_decode_bench SOURCE... [--size HxW] [--channels 1|3]
//                       [--seconds T | --repeats N] [--warmup T] [--no-dct]
//                       [--threads N] [--whole-passes] [--preload] [--seed S]
//
// SOURCE: image files, directories, .txt lists or .tar shards (anything
// obsaug's image sources accept). Each thread owns one ImageDecoder and walks
// the images round-robin (thread t starts at image t), one serial number per
// image decoded, for about T seconds (default 3) or, with --repeats N, for N
// passes over the list per thread. --whole-passes makes a timed run stop
// only at the end of a pass (the first one ending after T seconds), so that
// every image of the list counts alike however much their decoding costs
// differ: the rate is then that of the whole set. Each image's bytes are read from disk
// every time (as the pool's refresher and torchvision's ImageFolder loader
// do) unless --preload keeps them all in memory (decode only). A warm-up of
// --warmup seconds (default 0.2, at least one image per thread) precedes the
// timed part and is not counted.
//
// Prints one JSON line:
//   {"images": n, "seconds": s, "images_per_s": r, "dct": true/false, ...}
// where images_per_s = n / s over all threads and images_per_s_per_thread =
// images_per_s / threads; cpu_seconds is the CPU time the timed part took
// (CLOCK_THREAD_CPUTIME_ID summed over the threads, user + system, so file
// reads count) and images_per_cpu_s = n / cpu_seconds, the per-thread rate
// with the time a thread was descheduled left out (the steadier figure on a
// shared machine). Exit status 1 when an image fails to decode (the
// benchmark wants a clean set), 2 on bad usage.
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/decode/decode.h"
#include "engine/source/image_source.h"
#include "tools/decode_spec_args.h"

namespace {

int usage(const char* msg) {
  std::fprintf(stderr,
               "obsaug_decode_bench: %s\nusage: obsaug_decode_bench SOURCE... [--size HxW] "
               "[--channels 1|3] [--seconds T | --repeats N] [--warmup T] [--no-dct] "
               "[--threads N] [--whole-passes] [--preload] [--seed S]\n",
               msg);
  return 2;
}

using Clock = std::chrono::steady_clock;

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct WorkerResult {
  uint64_t images = 0;
  uint64_t scaled = 0;  // images decoded at a DCT scale below 1/1
  double cpu_seconds = 0.0;
  std::string error;
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> sources;
  obsaug::AugmentSpec spec;
  spec.out_height = 84;
  spec.out_width = 84;
  double seconds = 3.0, warmup = 0.2;
  long repeats = 0;
  bool repeats_given = false;
  int threads = 1;
  bool preload = false, whole_passes = false;
  uint64_t seed = 0;
  const std::string problem = obsaug::parse_decode_args(
      argc, argv, 1, &spec, [&](const std::string& arg, const char* value) {
        if (arg.rfind("--", 0) != 0) {
          sources.push_back(arg);
          return obsaug::kUsedArg;
        }
        if (arg == "--whole-passes") {
          whole_passes = true;
          return obsaug::kUsedArg;
        }
        if (arg == "--preload") {
          preload = true;
          return obsaug::kUsedArg;
        }
        if (value == nullptr) return obsaug::kUnknownArg;
        if (arg == "--seconds") {
          seconds = std::atof(value);
        } else if (arg == "--repeats") {
          repeats = std::atol(value);
          repeats_given = true;
        } else if (arg == "--warmup") {
          warmup = std::atof(value);
        } else if (arg == "--threads") {
          uint64_t n = 0;
          if (!obsaug::parse_decimal(value, 1024, &n)) return obsaug::kUnknownArg;
          threads = static_cast<int>(n);
        } else if (arg == "--seed") {
          if (!obsaug::parse_decimal(value, UINT64_MAX, &seed)) return obsaug::kUnknownArg;
        } else {
          return obsaug::kUnknownArg;
        }
        return obsaug::kUsedArgAndValue;
      });
  if (!problem.empty()) return usage(problem.c_str());
  if (repeats_given && repeats <= 0) return usage("--repeats must be positive");
  if (sources.empty()) return usage("need at least one image, directory, .txt list or .tar");
  if (threads < 1) return usage("--threads must be at least 1");
  if (!(seconds > 0) && repeats == 0) return usage("--seconds must be positive");
  if (!(warmup >= 0)) return usage("--warmup must be >= 0");

  try {
    const std::vector<obsaug::ImageRef> refs = obsaug::list_sources(sources);
    const obsaug::DecodeLimits limits;
    std::vector<std::vector<uint8_t>> preloaded;
    uint64_t total_bytes = 0;
    for (const auto& ref : refs) {
      if (preload) {
        preloaded.push_back(obsaug::read_image_bytes(ref, limits.max_bytes));
        total_bytes += preloaded.back().size();
      } else {
        total_bytes += ref.size;
      }
    }
    const size_t n = refs.size();

    // Serial numbers: a shared counter, so every decode draws its own crop.
    std::atomic<uint64_t> next_serial{0};
    std::vector<WorkerResult> results(threads);
    std::vector<double> worker_seconds(threads, 0.0);
    std::atomic<bool> stop{false};

    auto worker = [&](int t) {
      WorkerResult& res = results[t];
      try {
        obsaug::ImageDecoder decoder(limits);
        std::vector<uint8_t> out(static_cast<size_t>(spec.channels) * spec.out_height *
                                 spec.out_width);
        size_t index = static_cast<size_t>(t) % n;
        auto one = [&](bool counted) {
          const obsaug::ImageRef& ref = refs[index];
          obsaug::AugmentRecord rec;
          const uint64_t serial = next_serial.fetch_add(1, std::memory_order_relaxed);
          if (preload) {
            const std::vector<uint8_t>& bytes = preloaded[index];
            decoder.decode_augmented(bytes.data(), bytes.size(), ref.display_name(), spec, seed,
                                     serial, out.data(), &rec);
          } else {
            const std::vector<uint8_t> bytes = obsaug::read_image_bytes(ref, limits.max_bytes);
            decoder.decode_augmented(bytes.data(), bytes.size(), ref.display_name(), spec, seed,
                                     serial, out.data(), &rec);
          }
          if (counted) {
            ++res.images;
            if (rec.scale_num != rec.scale_denom) ++res.scaled;
          }
          index = (index + 1) % n;
        };
        // Warm-up: page cache, decoder handle, scratch buffers.
        const auto warm_end = Clock::now() + std::chrono::duration<double>(warmup);
        do {
          one(false);
        } while (Clock::now() < warm_end);
        index = static_cast<size_t>(t) % n;

        const auto start = Clock::now();
        const double cpu_start = thread_cpu_seconds();
        if (repeats > 0) {
          const uint64_t todo = static_cast<uint64_t>(repeats) * n;
          for (uint64_t k = 0; k < todo; ++k) one(true);
        } else {
          const auto end = start + std::chrono::duration<double>(seconds);
          // Check the clock after every image: one decode is tens of
          // microseconds at least, next to which now() is free.
          while (!stop.load(std::memory_order_relaxed)) {
            one(true);
            if (whole_passes && res.images % n != 0) continue;
            if (Clock::now() >= end) break;
          }
        }
        worker_seconds[t] = std::chrono::duration<double>(Clock::now() - start).count();
        res.cpu_seconds = thread_cpu_seconds() - cpu_start;
      } catch (const std::exception& e) {
        res.error = e.what();
        stop.store(true);
      }
    };

    if (threads == 1) {
      worker(0);
    } else {
      std::vector<std::thread> pool;
      for (int t = 0; t < threads; ++t) pool.emplace_back(worker, t);
      for (auto& th : pool) th.join();
    }
    uint64_t images = 0, scaled = 0;
    double wall = 0.0, cpu = 0.0;
    for (int t = 0; t < threads; ++t) {
      if (!results[t].error.empty()) {
        std::fprintf(stderr, "obsaug_decode_bench: %s\n", results[t].error.c_str());
        return 1;
      }
      images += results[t].images;
      scaled += results[t].scaled;
      wall = std::max(wall, worker_seconds[t]);
      cpu += results[t].cpu_seconds;
    }
    const double rate = wall > 0 ? images / wall : 0.0;
    std::printf(
        "{\"images\": %llu, \"seconds\": %.4f, \"images_per_s\": %.2f, \"dct\": %s, "
        "\"threads\": %d, \"images_per_s_per_thread\": %.2f, \"cpu_seconds\": %.4f, "
        "\"images_per_cpu_s\": %.2f, \"files\": %zu, \"bytes\": %llu, "
        "\"passes\": %.2f, \"size\": [%d, %d], \"channels\": %d, \"preload\": %s, "
        "\"dct_scaled_fraction\": %.4f}\n",
        static_cast<unsigned long long>(images), wall, rate, spec.dct_scaling ? "true" : "false",
        threads, rate / threads, cpu, cpu > 0 ? images / cpu : 0.0, n,
        static_cast<unsigned long long>(total_bytes),
        static_cast<double>(images) / (static_cast<double>(n) * threads), spec.out_height,
        spec.out_width, spec.channels, preload ? "true" : "false",
        images ? static_cast<double>(scaled) / images : 0.0);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "obsaug_decode_bench: %s\n", e.what());
    return 1;
  }
}

// obsaug bench: streams N augmented samples through the engine and reports
// the rates (tools/bench_loop.h runs the loop). The plain workload augments
// one random uint8 batch [B, S*C, H, W] per call, in place or out of place;
// --replay CAP streams sample+augment from a ReplayBuffer (bench_replay.cpp).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "engine/config.h"
#include "engine/engine.h"
#include "kernels/huge_pages.h"
#include "kernels/tensor_text.h"
#include "tools/args.h"
#include "tools/bench_loop.h"
#include "tools/commands.h"
#ifdef OBSAUG_WITH_REPLAY
#include "tools/bench_replay.h"
#endif

namespace obsaug::cli {
namespace {

// --threads: at::set_num_threads takes an int, and beyond this many an
// OpenMP team only measures oversubscription.
constexpr int64_t kMaxThreads = 1024;
// --samples: the progress arithmetic (10 * done) stays inside int64.
constexpr int64_t kMaxSamples = 100000000000000;  // 1e14

// The bytes one sample moves: each observation byte read once and each
// output byte written once (in place: read and written), plus the
// distractor pixels each overlay reads: C*Hp*Wp per sample (S*C*Hp*Wp
// with per_frame).
struct BytesPerSample {
  double observation = 0;
  double distractor = 0;
};

BytesPerSample bytes_per_sample(const Config& config, bool inplace) {
  const FramesConfig& f = config.frames;
  const auto [out_h, out_w] = frame_size_after(config);
  const int64_t planes = f.stack * f.channels;
  const int64_t out_elem = inplace || config.output.dtype == OutputDtype::kUint8 ? 1 : 4;
  BytesPerSample b;
  b.observation = static_cast<double>(planes) * f.height * f.width +
                  static_cast<double>(planes) * out_h * out_w * out_elem;
  for (const OpSpec& op : config.pipeline) {
    if (op.kind() != OpKind::kOverlay) continue;
    b.distractor += static_cast<double>(op.get_bool("per_frame") ? planes : f.channels) *
                    config.pool.image_height * config.pool.image_width;
  }
  return b;
}

// The memory one call's tensors hold: the random uint8 batch and, out of
// place, its output; with --replay, the sampled obs and next_obs.
double call_bytes(const Config& config, int64_t batch, bool inplace, bool replay) {
  const FramesConfig& f = config.frames;
  const auto [out_h, out_w] = frame_size_after(config);
  const double planes = static_cast<double>(f.stack) * f.channels;
  const double out_elem = config.output.dtype == OutputDtype::kUint8 ? 1 : 4;
  const double output = planes * out_h * out_w * out_elem;
  const double per_sample =
      replay ? 2 * output : planes * f.height * f.width + (inplace ? 0 : output);
  return static_cast<double>(batch) * per_sample;
}

// Augments one random batch per call (a narrowed one for the last, partial
// call) and prints the batch line; the summary adds bytes/s.
BenchWorkload augment_workload(Engine& engine, const Config& config, int64_t batch, int64_t samples,
                               bool inplace, int64_t threads, int64_t cores) {
  const FramesConfig& f = config.frames;
  const at::Tensor obs = at::randint(0, 256, {batch, f.stack * f.channels, f.height, f.width},
                                     at::TensorOptions().dtype(at::kByte).device(config.device));
  const int64_t calls = (samples + batch - 1) / batch;
  std::printf("batch:     %s uint8 random, %s per call, %" PRId64 " calls, %s, %" PRId64
              " intra-op threads (%" PRId64 " cores)\n",
              shape_text(obs.sizes()).c_str(), mib(obs.nbytes()).c_str(), calls,
              inplace ? "in place (augment_)" : "out of place (augment)", threads, cores);
  std::fflush(stdout);

  auto out = std::make_shared<at::Tensor>();  // the latest out-of-place result
  const BytesPerSample per_sample = bytes_per_sample(config, inplace);
  BenchWorkload w;
  w.calls_note = "calls";
  w.call = [&engine, obs, out, batch, inplace](int64_t count) {
    at::Tensor x = count == batch ? obs : obs.narrow(0, 0, count);
    if (inplace) {
      engine.augment_(x);
    } else {
      *out = engine.augment(x);
    }
  };
  // Reading one element synchronises with the device (a no-op on CPU).
  w.wait = [obs, out, inplace] { (void)(inplace ? obs : *out).flatten()[0].item<double>(); };
  w.rate_lines = [per_sample](int64_t done, double secs) {
    const double total = per_sample.observation + per_sample.distractor;
    std::printf("bytes/s:   %s (%.0f bytes per sample: %.0f observation bytes read + written",
                si(total * done / secs, "B").c_str(), total, per_sample.observation);
    if (per_sample.distractor > 0)
      std::printf(", %.0f distractor bytes read", per_sample.distractor);
    std::printf(")\n");
  };
  return w;
}

}  // namespace

int bench_command(int argc, char** argv) {
  Args args =
      parse_args("bench", argc, argv, 2, {"config", "batch", "samples", "threads", "replay"},
                 {"inplace", "out-of-place"});
  if (args.has("help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const std::string path = config_file("bench", args);
  const int64_t batch = args.get_int("batch", 256, 1);
  const int64_t samples = args.get_int("samples", 10000000, 1, kMaxSamples);
  if (args.has("inplace") && args.has("out-of-place"))
    throw UsageError("bench: --inplace and --out-of-place exclude each other");
  if (args.has("inplace") && args.has("replay")) {
    throw UsageError(
        "bench: --replay samples into new obs and next_obs tensors, never in place "
        "(drop --inplace)");
  }
  // A replay of frames.stack + 2 frames always holds a valid transition (see
  // below); 3 is that for a stack of 1, checked before the config loads.
  [[maybe_unused]] const int64_t replay_capacity = args.get_int("replay", 0, 3);
#ifndef OBSAUG_WITH_REPLAY
  if (args.has("replay"))
    throw UsageError("bench: --replay needs the replay library (not built here)");
#endif

  const uint64_t rss_start = resident_bytes();
  Config config = load_config_file(path, checkout_root());
  // Default: the cores the pool's background decoders leave free. OpenMP's
  // barriers stall when its threads share cores with busy decoders (measured
  // on 2 cores with one decoder: 2 threads ran 4x slower than 1).
  const int64_t cores = std::max(1u, std::thread::hardware_concurrency());
  const int64_t decoders =
      has_overlay(config.pipeline) && config.pool.refresh.mode == RefreshMode::kAsync
          ? config.pool.refresh.threads
          : 0;
  const int64_t threads =
      args.get_int("threads", std::max<int64_t>(1, cores - decoders), 1, kMaxThreads);
  at::set_num_threads(static_cast<int>(threads));

  const auto [out_h, out_w] = frame_size_after(config);
  const FramesConfig& f = config.frames;
  // Each call adds a step, then samples: the S - 1 oldest frames have lost
  // their stack's start, the newest has no next frame, nor has an episode's
  // last (at most one in a replay of under 1000 frames); one more is valid.
  if (args.has("replay") && replay_capacity < f.stack + 2) {
    throw UsageError(
        "bench: --replay must be at least frames.stack + 2 = " + std::to_string(f.stack + 2) +
        " for " + path + " (a transition needs its " + std::to_string(f.stack) +
        " stacked frames and the next one stored, beside the newest frame and an "
        "episode's last, which have none), got " +
        std::to_string(replay_capacity));
  }
  const bool keeps_size = out_h == f.height && out_w == f.width;
  if (args.has("inplace") && !keeps_size) {
    throw UsageError("bench: --inplace needs a pipeline that keeps the frame size; " + path +
                     " turns " + std::to_string(f.height) + "x" + std::to_string(f.width) +
                     " frames into " + std::to_string(out_h) + "x" + std::to_string(out_w) +
                     " (use --out-of-place)");
  }
  // augment_ writes uint8 over the input and ignores config.output.
  const bool float_output = config.output.dtype == OutputDtype::kFloat32;
  if (args.has("inplace") && float_output) {
    throw UsageError("bench: --inplace writes the uint8 input over itself, but " + path +
                     " asks for float32 output (output.dtype), which only augment gives "
                     "(use --out-of-place)");
  }
  const bool inplace = !args.has("out-of-place") && keeps_size && !float_output;
  // On CUDA the caching allocator names a batch too large for the device.
  const double batch_bytes = call_bytes(config, batch, inplace, args.has("replay"));
  const double ram_bytes = static_cast<double>(physical_memory_bytes());
  if (at::Device(config.device).is_cpu() && ram_bytes > 0 && batch_bytes > ram_bytes) {
    throw UsageError("bench: --batch " + std::to_string(batch) + " needs " + mib(batch_bytes) +
                     " per call, more than this machine's " + mib(ram_bytes) +
                     " of memory (use a smaller --batch)");
  }

  std::printf("config:    %s (device %s, seed %" PRIu64 ")\n", path.c_str(), config.device.c_str(),
              config.seed);
  std::printf("rss start: %s\n", mib(rss_start).c_str());
  std::fflush(stdout);

  const auto t_build = std::chrono::steady_clock::now();
  Engine engine(config);
  const double build_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_build).count();
  std::printf("engine:    built in %.2f s%s\n", build_s,
              engine.pool() ? " (distractor pool filled)" : "");

  BenchWorkload workload;
#ifdef OBSAUG_WITH_REPLAY
  if (args.has("replay")) {
    workload = replay_workload(engine, config, batch, replay_capacity);
  } else
#endif
  {
    workload = augment_workload(engine, config, batch, samples, inplace, threads, cores);
  }
  run_bench(engine, workload, samples, batch);
  return 0;
}

}  // namespace obsaug::cli

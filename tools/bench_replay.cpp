// The bench --replay workload (tools/bench_replay.h).
#include "tools/bench_replay.h"

#include <ATen/ATen.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <memory>
#include <utility>
#include <vector>

#include "replay/engine_augment.h"
#include "replay/replay_buffer.h"

namespace obsaug::cli {
namespace {

constexpr int64_t kEpisodeSteps = 1000;
constexpr int64_t kDistinctFrames = 64;  // cycled through the episodes: real bytes to copy
constexpr int64_t kActionSize = 6;

// The buffer and what the calls share.
struct ReplayBench {
  ReplayBuffer buffer;
  at::Tensor frames;  // [kDistinctFrames, C, H, W] uint8 random
  at::Tensor action;  // [kActionSize] zeros
  StackAugment augment;
  int64_t steps = 0;  // steps added so far
  ReplayBatch last;

  ReplayBench(ReplayOptions options, Engine& engine) : buffer(std::move(options)) {
    const std::vector<int64_t>& shape = buffer.options().frame_shape;
    frames = at::randint(0, 256, {kDistinctFrames, shape[0], shape[1], shape[2]},
                         at::TensorOptions().dtype(at::kByte));
    action = at::zeros({kActionSize});
    augment = augment_with(engine);
  }

  // The next step of the current episode (the first one after every
  // kEpisodeSteps - 1 steps, which end the previous episode as terminated).
  void add_step() {
    const at::Tensor frame = frames[steps % kDistinctFrames];
    if (steps % kEpisodeSteps == 0) {
      buffer.add_first(frame);
    } else {
      buffer.add(action, 1.0, frame, steps % kEpisodeSteps == kEpisodeSteps - 1, false);
    }
    ++steps;
  }
};

}  // namespace

BenchWorkload replay_workload(Engine& engine, const Config& config, int64_t batch,
                              int64_t capacity) {
  const FramesConfig& f = config.frames;
  ReplayOptions o;
  o.capacity = capacity;
  o.frame_shape = {f.channels, f.height, f.width};
  o.frame_stack = static_cast<int32_t>(f.stack);
  o.action_shape = {kActionSize};
  o.device = c10::Device(config.device);
  auto bench = std::make_shared<ReplayBench>(std::move(o), engine);

  const auto t_fill = std::chrono::steady_clock::now();
  while (bench->steps < capacity) bench->add_step();
  const double fill_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_fill).count();
  std::printf("replay:    %" PRId64 " frames [%" PRId64 ", %" PRId64 ", %" PRId64
              "] filled in %.1f s (%s), %" PRId64
              " valid transitions; per call: add 1 step, "
              "sample %" PRId64 " with obs and next_obs augmented\n",
              capacity, f.channels, f.height, f.width, fill_s,
              mib(bench->buffer.storage().nbytes()).c_str(), bench->buffer.num_valid(), batch);
  std::printf("rss filled: %s\n", mib(resident_bytes()).c_str());
  std::fflush(stdout);

  BenchWorkload w;
  w.samples_note = " transitions (obs + next_obs each)";
  w.calls_note = "engine calls";
  w.call = [bench](int64_t count) {
    bench->add_step();
    bench->last = bench->buffer.sample(count, &bench->augment);
  };
  // Reading one element synchronises with the device (a no-op on CPU).
  w.wait = [bench] { (void)bench->last.obs.flatten()[0].item<double>(); };
  return w;
}

}  // namespace obsaug::cli

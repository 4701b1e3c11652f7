// obsaug from C++, built against an installed obsaug (examples/cpp/CMakeLists.txt):
// the fused ops on a batch, then a replay buffer sampled through an Engine
// made from a YAML config, as a C++ training loop would use them.
//
//   replay_augment CONFIG      e.g. configs/default.yaml (its photos: OBSAUG_PHOTOS
//                              or the embedded ones, engine/locations.h)
//
// Prints what it did; exits 1, saying what went wrong, if a result is not what
// obsaug's contract says (scripts/cxx_package_check.sh runs it).
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/zeros.h>

#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/augment.h"
#include "replay/engine_augment.h"

namespace {

void expect(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error("replay_augment: " + what);
}

std::string shape_of(const at::Tensor& t) {
  std::string s = "[";
  for (int64_t d = 0; d < t.dim(); ++d) s += (d ? ", " : "") + std::to_string(t.size(d));
  return s + "]";
}

// The ops on a [B, S*C, H, W] uint8 batch and a pool of [P, C, H, W] photos.
void ops_on_a_batch() {
  using obsaug::OpSpec;
  const at::Tensor obs = at::randint(256, {16, 9, 84, 84}, at::kByte);
  const at::Tensor pool = at::randint(256, {8, 3, 84, 84}, at::kByte);
  const obsaug::Pipeline pipeline{OpSpec::shift(4), OpSpec::overlay(0.5)};
  const at::Tensor out = obsaug::ops::augment(obs, pool, pipeline, /*seed=*/0, /*step=*/17);
  expect(out.sizes() == obs.sizes() && out.scalar_type() == at::kByte,
         "augment returned " + shape_of(out) + ", not the input's [16, 9, 84, 84] uint8");
  expect(!at::equal(out, obs), "shift + overlay 0.5 left every pixel as it was");
  // Every draw is a function of (seed, step, sample, op): the same call gives
  // the same bits, in place or not.
  expect(at::equal(out, obsaug::ops::augment(obs, pool, pipeline, 0, 17)),
         "the same (seed, step) gave different bits");
  const at::Tensor inplace = obs.clone();
  obsaug::ops::augment_(inplace, pool, pipeline, 0, 17);
  expect(at::equal(out, inplace), "augment_ (in place) differs from augment");
  // The ops are in the dispatcher as well (obsaug::shift, obsaug::augment, ...).
  c10::Dispatcher::singleton().findSchemaOrThrow("obsaug::shift", "");
  std::printf("ops: shift(4) + overlay(0.5) on %s uint8, deterministic, in place == out of place\n",
              shape_of(obs).c_str());
}

// A replay buffer filled by one environment, sampled with the Engine's pipeline.
void replay_with_engine(const std::string& config_path) {
  obsaug::Engine engine = obsaug::Engine::from_file(config_path);
  const obsaug::FramesConfig& f = engine.config().frames;
  obsaug::ReplayOptions options;
  options.capacity = 1000;
  options.frame_shape = {f.channels, f.height, f.width};
  options.frame_stack = f.stack;
  options.action_shape = {6};
  obsaug::ReplayBuffer rb(options);
  const auto frame = [&](int64_t t) {
    return at::arange(f.channels * f.height * f.width, at::kLong)
        .add(t)
        .remainder(256)
        .to(at::kByte)
        .view({f.channels, f.height, f.width});
  };
  rb.add_first(frame(0));
  for (int64_t t = 1; t <= 100; ++t) {
    rb.add(at::zeros({6}), /*reward=*/1.0, frame(t), /*terminated=*/t == 100, /*truncated=*/false);
  }
  const obsaug::StackAugment augment = obsaug::augment_with(engine);
  const obsaug::ReplayBatch batch = rb.sample(32, &augment);
  const std::vector<int64_t> want{32, f.stack * f.channels, f.height, f.width};
  expect(
      batch.obs.sizes() == at::IntArrayRef(want) && batch.next_obs.sizes() == batch.obs.sizes(),
      "sample(32) gave obs " + shape_of(batch.obs) + " and next_obs " + shape_of(batch.next_obs));
  expect(
      batch.action.sizes() == at::IntArrayRef({32, 6}) && batch.reward.numel() == 32,
      "sample(32) gave action " + shape_of(batch.action) + " and reward " + shape_of(batch.reward));
  expect(batch.reward.eq(1.0f).all().item<bool>(), "every stored reward is 1");
  // obs and next_obs draw their own parameters: steps 0 and 1.
  expect(engine.step() == 2, "a sample with augmentation takes two engine steps, took " +
                                 std::to_string(engine.step()));
  const obsaug::EngineStats stats = engine.stats();
  std::printf(
      "replay: %lld transitions, sample(32) + the engine's pipeline: obs %s %s, "
      "pool of %llu photos decoded\n",
      static_cast<long long>(rb.num_valid()), shape_of(batch.obs).c_str(),
      std::string(c10::toString(batch.obs.scalar_type())).c_str(),
      static_cast<unsigned long long>(stats.pool_decoded));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CONFIG.yaml   (e.g. configs/default.yaml)\n", argv[0]);
    return 2;
  }
  try {
    ops_on_a_batch();
    replay_with_engine(argv[1]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  std::printf("ok\n");
  return 0;
}

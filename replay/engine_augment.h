// The bridge from obsaug::Engine to ReplayBuffer::sample:
//   rb.sample(256, &obsaug::augment_with(engine))  — or keep the StackAugment.
// Header-only, so the replay library itself needs no engine (yaml-cpp,
// decoders) to build.
#pragma once

#include "engine/engine.h"
#include "replay/replay_buffer.h"

namespace obsaug {

inline StackAugment augment_with(Engine& engine) {
  StackAugment augment;
  augment.reserve_steps = [&engine](uint64_t count) { return engine.reserve_steps(count); };
  augment.gather = [&engine](const at::Tensor& storage, const at::Tensor& indices, uint64_t step,
                             bool next_obs) {
    return engine.gather_augment(storage, indices, step, /*check_indices=*/false, at::Tensor(),
                                 next_obs ? OutputSite::kSampleNextObs : OutputSite::kSampleObs);
  };
  augment.output_bytes = [&engine](const at::Tensor& storage, int64_t batch, int64_t stack) {
    return engine.gather_output_bytes(storage, batch, stack);
  };
  return augment;
}

}  // namespace obsaug

// bench --replay CAP: the workload of an RL update loop on a ReplayBuffer
// (built only with the replay library, OBSAUG_WITH_REPLAY).
#pragma once

#include <cstdint>

#include "engine/config.h"
#include "engine/engine.h"
#include "tools/bench_loop.h"

namespace obsaug::cli {

// Fills a ReplayBuffer of `capacity` frames (the config's frame shape) with
// synthetic episodes of 1000 steps and prints what it holds; each call of
// the workload then adds one step and samples `count` transitions with obs
// and next_obs augmented by `engine` in the gather (two engine calls).
BenchWorkload replay_workload(Engine& engine, const Config& config, int64_t batch,
                              int64_t capacity);

}  // namespace obsaug::cli

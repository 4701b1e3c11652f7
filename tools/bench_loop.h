// The timing loop `obsaug bench` runs, for its plain workload (augment
// random batches) and its replay workload (bench --replay: add a step,
// sample with fused augmentation): progress on stderr, then one summary.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "engine/engine.h"

namespace obsaug::cli {

// 12345678 -> "12.35 M" (SI, for rates and counts), with an optional unit.
std::string si(double v, const char* unit = "");
std::string mib(double bytes);    // "455.4 MiB"
uint64_t resident_bytes();        // this process's RSS (0 where /proc is absent)

// What a bench streams through the engine.
struct BenchWorkload {
  std::string samples_note;                 // after the sample count, e.g. " transitions (...)"
  std::string calls_note;                   // what the engine's call count counts: "calls"
  std::function<void(int64_t count)> call;  // processes `count` (<= batch) samples
  std::function<void()> wait;               // returns once the device has finished
  // Lines printed after samples/s from the samples done and the seconds.
  std::function<void(int64_t done, double seconds)> rate_lines;
};

// Runs `samples` samples in calls of `batch` (the last one partial), with
// progress on stderr (a redrawn bar on a terminal, else a line per 10 %
// with the rate over the last 10 % and the RSS), then prints:
//   samples:   N<samples_note> in C <calls_note>
//   seconds:   T
//   samples/s: R (R in SI)
//   <rate_lines>
//   pool:      the distractor pool's counters, or "none (...)"
//   rss end:   RSS
// and closes the engine.
void run_bench(Engine& engine, const BenchWorkload& workload, int64_t samples, int64_t batch);

}  // namespace obsaug::cli

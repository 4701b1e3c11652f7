// obsaug::Engine: what an RL agent holds (DESIGN.md sections 3, 6, 7). It owns
// the resolved configuration, the distractor pool (when the pipeline
// overlays) and the step counter, and applies the configured pipeline to
// observations [B, S*C, H, W] on the configured device.
//
// Steps: every augment call without an explicit step takes the next value of
// an atomic counter (so augment(obs) and augment(next_obs) draw independent
// parameters, as DrQ does); passing `step` reuses a value (two tensors that
// must share parameters) and leaves the counter alone. A call rejected for
// its arguments takes no step and refreshes no pool.
//
// The pool refresh (DistractorPool::prepare_for_augment) runs once the
// call's checks have passed, and only when the call's step differs from the
// step of the last refresh: calls in a row at one step see the same
// distractors, so two tensors that share a step share their overlays too.
//
// Threads: augment / augment_ may be called from several threads at once.
// With a refreshing pool each call holds the engine's lock exclusively, its
// refresh and its kernel together, so no call reads a slot mid-upload and
// none sees another call's refresh; on CUDA the upload and the kernels are
// ordered on the calling thread's current stream (callers on different
// streams must synchronise those streams).
// stats(), step(), config() may be called from any thread; close() and
// load_state() from one thread while no augment call is in flight.
//
// Outputs: augment / gather_augment return a fresh tensor per call, or write
// into a caller's `out` (checked as ops::OutputOptions::out says). With
// config.output.reuse, a call without `out` returns a tensor the engine
// keeps: one per (OutputSite, shape, dtype, device), the four most recently
// used shapes per site; a result stays valid until the next call of the same
// site with the same shape, dtype and device, which overwrites and returns
// the same storage. The sites never share buffers, so the obs and next_obs
// of a replay sample (kSampleObs, kSampleNextObs) and a plain augment never
// alias each other. Concurrent calls of one site would write one buffer:
// with reuse, each site is called from one thread at a time. On CUDA the
// buffer is rewritten in stream order (callers on one stream need no sync).
// close() drops the buffers.
#pragma once

#include <ATen/core/Tensor.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

#include "engine/config.h"
#include "engine/source/image_source.h"

namespace obsaug {

class DistractorPool;
struct DistractorPoolStats;

struct EngineStats {
  uint64_t calls = 0;    // augment + augment_ calls
  uint64_t samples = 0;  // observations augmented (sum of B)
  uint64_t step = 0;     // the next step the counter hands out
  bool has_pool = false;
  // Pool counters (zero without a pool).
  uint64_t pool_decoded = 0;
  uint64_t pool_failed = 0;
  uint64_t pool_uploaded = 0;
  double pool_decode_rate = 0;
  double pool_mean_age_calls = 0;
  uint64_t pool_queue_depth = 0;
  uint64_t pool_distinct_crops = 0;  // DistractorPoolStats::distinct_crops
  double pool_new_crops_per_call = 0;
  // The first kMaxReportedFailures skipped inputs, each with the reason
  // (DistractorPoolStats::first_failures): unreadable or undecodable files,
  // missing .txt entries, truncated shards. pool_failed counts them all.
  std::vector<SourceFailure> pool_first_failures;
};

// What a resumed run needs to continue the same stream of augmentations.
// In sync mode the restore is exact: load_state re-decodes every pool slot
// from `pool_slots` (DistractorPool::restore, P decodes), so the pool holds
// what it held when the state was taken, and refuses (SourceError) sources
// whose listing differs from `pool_files` / `pool_listing` or an image that
// decodes to another checksum than `pool_checksums`. In async mode only the
// cursor is restored (the background refresh is not reproducible anyway).
struct EngineState {
  uint64_t seed = 0;  // the engine's key, config seed + rank (Engine::seed())
  uint64_t step = 0;
  uint64_t pool_serial = 0;  // the pool's refresh cursor (exact in sync mode)
  uint64_t pool_calls = 0;
  uint64_t pool_stamp = 0;           // PoolCursor::next_stamp
  std::vector<uint64_t> pool_slots;  // serial held by each pool slot (empty without a pool)
  // The listing those serials refer to (PoolListing: files, fingerprint) and
  // each slot's image checksum (SlotInfo::checksum); 0 and empty without a pool.
  uint64_t pool_files = 0;
  uint64_t pool_listing = 0;
  std::vector<uint64_t> pool_checksums;
};

// Which share of a data-parallel job this engine serves (torch.distributed's
// rank and world size). A constructor argument rather than a config key, so
// one config file is shared by every rank.
//   - Parameters: the engine's Philox key is (config.seed + rank), so ranks
//     draw different parameters; rank 0 keeps the configured seed (a
//     single-process run is rank 0 of 1). The pool's file order, crops and
//     flips use the same key.
//   - Files: the pool is built with (rank, world_size), so each rank reads a
//     disjoint share of the sources' files (DistractorPool shards them).
// std::invalid_argument unless world_size >= 1 and 0 <= rank < world_size.
struct DistributedRank {
  int rank = 0;
  int world_size = 1;
};

// Which result a reused output buffer holds (config.output.reuse): each site
// keeps its own buffers.
enum class OutputSite { kAugment, kGather, kSampleObs, kSampleNextObs };

class Engine {
 public:
  // Builds (and fills) the pool when the pipeline overlays.
  explicit Engine(Config config, DistributedRank distributed = {});
  static Engine from_file(const std::string& path, DistributedRank distributed = {});
  ~Engine();  // = close()
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;
  Engine(Engine&&) noexcept;
  Engine& operator=(Engine&&) noexcept;

  // obs: [B, S*C, H, W] uint8 or float32 on the engine's device, with the
  // configured C, H, W (S may be any positive number). Out of place, output
  // dtype/scale/bias from config.output; into `out` when it is defined, else
  // into a reused buffer (config.output.reuse) or a fresh tensor.
  at::Tensor augment(const at::Tensor& obs, std::optional<uint64_t> step = std::nullopt,
                     const at::Tensor& out = {});
  // In place (the pipeline must keep the frame size; output options ignored).
  void augment_(const at::Tensor& obs, std::optional<uint64_t> step = std::nullopt);

  // Gathers stacks from a frame storage [N, C, H, W] (the configured C, H, W,
  // on the engine's device) by int64 indices [B, S] and augments them in one
  // pass (ops::gather_augment), with the step and output options of augment.
  // check_indices = false skips the range check (one sync on CUDA) for
  // callers that made the indices themselves (the replay buffer). `out` as
  // for augment; `site` picks the reused buffer (the replay buffer passes
  // kSampleObs / kSampleNextObs).
  at::Tensor gather_augment(const at::Tensor& storage, const at::Tensor& indices,
                            std::optional<uint64_t> step = std::nullopt, bool check_indices = true,
                            const at::Tensor& out = {}, OutputSite site = OutputSite::kGather);

  // Bytes of the result gather_augment makes for `batch` stacks of `stack`
  // frames of `storage` (the pipeline's output size and dtype): what the
  // replay buffer checks against the memory limit before it samples.
  uint64_t gather_output_bytes(const at::Tensor& storage, int64_t batch, int64_t stack) const;

  // gather_augment for another rank's draws (obsaug.distributed): the
  // requester's Philox key `seed` and `step` (the counter is not advanced),
  // row b drawn as sample sample_ids[b] (ops::gather_augment), this engine's
  // pool and output options; `out` as for augment (the sharded buffer writes
  // the rows straight into the requester's receive area). With `out_rows`
  // (int64 [B] on the CPU, each in [0, out.size(0)), distinct), row b is
  // written to out[out_rows[b]] instead of out[b] (`out` then has any number
  // of rows; ops::gather_augment): the requester's draw positions.
  at::Tensor gather_augment_for(const at::Tensor& storage, const at::Tensor& indices, uint64_t seed,
                                uint64_t step, const at::Tensor& sample_ids,
                                const at::Tensor& out = {}, const at::Tensor& out_rows = {});

  // Takes `count` consecutive steps from the counter; returns the first.
  uint64_t reserve_steps(uint64_t count);

  uint64_t step() const;
  const Config& config() const;
  DistributedRank distributed() const;
  uint64_t seed() const;  // the Philox key in use: config().seed + rank
  // config().device resolved: "cuda" is cuda:N, N the device current at construction.
  c10::Device device() const;
  EngineStats stats() const;
  EngineState state() const;
  void load_state(const EngineState& state);
  const DistractorPool* pool() const;  // null without overlay
  void close();
  bool closed() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace obsaug

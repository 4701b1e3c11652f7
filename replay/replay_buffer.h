// obsaug::ReplayBuffer: frames stored once, stacks rebuilt at sample time,
// uniform or proportional prioritized sampling, n-step returns, and the
// sampled stacks gathered and augmented in one kernel pass. The contract,
// with the exact sampling rules, is docs/replay.md.
//
// Storage: frames in one uint8 tensor [capacity, C, H, W] on the buffer's
// device; actions, rewards, episode links and priorities on the host (a few
// dozen bytes per frame). Thread-safe: every call but options() and
// storage() holds the buffer's lock, so calls from several threads (an actor
// adding while a learner samples) run one at a time; what sample() returns
// is the caller's.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "replay/episode_ring.h"

namespace obsaug {

// The dtypes a buffer stores actions as (ReplayOptions::action_dtype).
inline constexpr at::ScalarType kActionDtypes[] = {at::kFloat, at::kDouble, at::kLong,    at::kInt,
                                                   at::kByte,  at::kHalf,   at::kBFloat16};

// The most sample calls a buffer counts (sample_calls(), the Philox counter's
// call words): 2^62, far beyond any run; a checkpoint with more is refused,
// and a buffer at the cap refuses to sample (std::overflow_error).
inline constexpr uint64_t kMaxSampleCalls = uint64_t{1} << 62;

struct ReplayOptions {
  int64_t capacity = 100000;                    // frames stored
  std::vector<int64_t> frame_shape{3, 84, 84};  // C, H, W
  int32_t frame_stack = 3;                      // S
  std::vector<int64_t> action_shape;            // empty: a scalar action
  at::ScalarType action_dtype = at::kFloat;
  c10::Device device{c10::kCPU};
  int32_t n_step = 1;
  double gamma = 0.99;
  bool prioritized = false;
  double alpha = 0.6;  // priority exponent
  double beta = 0.4;   // importance-sampling exponent (sample() may override)
  uint64_t seed = 0;
};

struct ReplayBatch {
  at::Tensor obs;       // [B, S*C, H, W]
  at::Tensor action;    // [B, *action_shape]
  at::Tensor reward;    // [B] float32, n-step discounted sum
  at::Tensor discount;  // [B] float32, gamma^n' or 0 after termination
  at::Tensor next_obs;  // [B, S*C, H, W]
  at::Tensor indices;   // [B] int64 slots (for update_priorities)
  at::Tensor weights;   // [B] float32 importance weights (prioritized only)
};

// The rows of a batch for given transitions, before gathering (rows_at).
struct TransitionRows {
  at::Tensor obs_index;   // [K, S] int64 slots of the obs stack (host)
  at::Tensor next_index;  // [K, S] int64 slots of the next_obs stack (host)
  at::Tensor action;      // [K, *action_shape] (host)
  at::Tensor reward;      // [K] float32 (host)
  at::Tensor discount;    // [K] float32 (host)
  at::Tensor weight;      // [K] float64 q = p^alpha (prioritized), else 1 (host)
};

// Sum and smallest positive weight q of the valid transitions (uniform
// buffers: num_valid and 1).
struct PrioritySummary {
  double total = 0;
  double smallest = 0;
};

// How sample() augments: a step source and a gather+augment of stacks from
// a storage. replay/engine_augment.h makes one from an obsaug::Engine.
struct StackAugment {
  std::function<uint64_t(uint64_t count)> reserve_steps;  // first of `count` consecutive steps
  // next_obs: the call gathers the sample's next_obs (else its obs); a
  // gather that reuses output buffers keeps the two apart.
  std::function<at::Tensor(const at::Tensor& storage, const at::Tensor& indices, uint64_t step,
                           bool next_obs)>
      gather;
  // Bytes of one output gather() makes for `batch` stacks of `stack` frames
  // of `storage`: what sample() checks against the memory limit before it
  // allocates anything.
  std::function<uint64_t(const at::Tensor& storage, int64_t batch, int64_t stack)> output_bytes;
};

class ReplayBuffer {
 public:
  explicit ReplayBuffer(ReplayOptions options);
  ~ReplayBuffer();
  ReplayBuffer(ReplayBuffer&&) noexcept;
  ReplayBuffer& operator=(ReplayBuffer&&) noexcept;

  // Starts an episode: frames [C, H, W] (env envs[0], default 0) or
  // [N, C, H, W] (envs envs[i], default i). `envs` not given (nullopt, or
  // {}) means the default; a given list must name exactly N envs (an empty
  // std::vector is a mismatch). An env's open episode is closed as truncated.
  void add_first(const at::Tensor& frames,
                 const std::optional<std::vector<int64_t>>& envs = std::nullopt);
  // One step per env: action [*action_shape] or [N, *action_shape]; reward
  // a scalar (one env) or [N] (batched: one per env); terminated, truncated
  // scalars (one for all) or [N]; frames and envs as for add_first.
  // Everything is checked and converted before anything is written: a call
  // that throws leaves the buffer as it was.
  void add(const at::Tensor& action, const at::Tensor& reward, const at::Tensor& frames,
           const at::Tensor& terminated, const at::Tensor& truncated,
           const std::optional<std::vector<int64_t>>& envs = std::nullopt);

  // One env's step with plain values (the common single-env call, without
  // building tensors for the reward and flags).
  void add(const at::Tensor& action, double reward, const at::Tensor& frame, bool terminated,
           bool truncated, int64_t env = 0);

  // B transitions by the buffer's sampler; obs / next_obs gathered (and
  // augmented when `augment` is given: steps s, s+1, or s, s when
  // share_augmentation) in one pass each. std::invalid_argument for B < 1,
  // B > 2^32, no valid transition, or a B whose draws, rows and outputs
  // would take more than memory_limit_bytes (kernels/output_tensor.h),
  // checked before anything is allocated; std::overflow_error after
  // kMaxSampleCalls calls.
  ReplayBatch sample(int64_t batch, const StackAugment* augment = nullptr,
                     bool share_augmentation = false, std::optional<double> beta = std::nullopt);
  // indices [K] slots, priorities [K] finite >= 0 (prioritized buffers only).
  void update_priorities(const at::Tensor& indices, const at::Tensor& priorities);
  // Raises what update_priorities(indices, priorities) would raise, and
  // changes nothing (the sharded buffer's owners check before all agree).
  void check_priorities(const at::Tensor& indices, const at::Tensor& priorities) const;

  // Draws made elsewhere (obsaug.distributed.ShardedReplayBuffer,
  // docs/distributed.md): the slot of draw id b (< 2^32) of sample call
  // `call` by the uniform rule of sample(); the slots at fractions in [0, 1)
  // of the total weight (prioritized); the weight totals; the rows of given
  // valid slots (IndexError otherwise); and counting a call made so.
  std::vector<int64_t> uniform_slots_for(uint64_t call, const std::vector<int64_t>& draw_ids) const;
  std::vector<int64_t> priority_slots_for(const std::vector<double>& fractions);
  PrioritySummary priority_summary() const;
  TransitionRows rows_at(const std::vector<int64_t>& slots) const;
  void count_sample_call();

  // dir/replay.obsaug, written atomically (docs/replay.md).
  void save(const std::string& dir) const;
  static ReplayBuffer load(const std::string& dir,
                           std::optional<c10::Device> device = std::nullopt);

  const ReplayOptions& options() const;
  int64_t size() const;       // frames stored, min(total_frames, capacity)
  int64_t num_valid() const;  // transitions that can be sampled now
  int64_t total_frames() const;
  uint64_t sample_calls() const;
  const at::Tensor& storage() const;  // [capacity, C, H, W] uint8

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Which shard owns each of the draws first_id .. first_id + batch - 1 of a
// sharded sample call (docs/distributed.md): shard_mass[r] is shard r's
// number of valid transitions (uniform) or weight total (prioritized).
// Draw b_global uses Philox (seed, counter (call, b_global, 0x8000)):
// uniform: the index floor(((r3 << 32) | r2) * N / 2^64) into the N
// transitions of all shards in rank order; prioritized: the stratified
// target (b + unit(r0)) / batch * total. owner[b] = the shard holding it,
// target[b] = its offset in that shard. Throws std::invalid_argument when
// every shard is empty.
void shard_draws(uint64_t seed, uint64_t call, int64_t first_id, int64_t batch,
                 const std::vector<double>& shard_mass, bool prioritized, int32_t* owner,
                 double* target);

}  // namespace obsaug

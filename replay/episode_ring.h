// The host side of the replay buffer: which frame follows which, where
// episodes end, which transitions can be sampled, and the stacks and n-step
// returns of a transition (docs/replay.md). No torch: frames, actions and
// priorities live with the ReplayBuffer; this class only hands out slots.
//
// Frames are numbered by a logical index t = 0, 1, 2, ... over the ring's
// life and live in slot t % capacity. Each environment's frames are linked
// (predecessor and successor in the same episode), so frames of parallel
// environments may interleave in the ring.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace obsaug {

struct SampledTransition {
  int64_t next_frame = -1;   // logical index of the frame n' steps later
  int64_t action_slot = -1;  // slot holding the first step's action
  int32_t steps = 0;         // n' (1..n_step)
  double reward = 0;         // sum_{k < n'} gamma^k r_{k+1}
  double discount = 0;       // gamma^n', or 0 when the last step terminated
};

class EpisodeRing {
 public:
  // The most frames a ring counts (total()): 2^62, so that no index
  // arithmetic on a logical index (t + capacity, t + n_step, ...) comes near
  // int64's end; at 10^9 frames a second a run takes 146 years to get there.
  static constexpr int64_t kMaxFrames = int64_t{1} << 62;
  // Env ids are in [0, kMaxEnvs).
  static constexpr int64_t kMaxEnvs = int64_t{1} << 20;

  EpisodeRing(int64_t capacity, int32_t stack, int32_t n_step, double gamma);

  // Writes the next frame (logical index total()) for `env`; returns its
  // slot. push_first starts an episode (closing the env's open one, which
  // then ends as truncated); push continues the env's open episode with the
  // transition's reward and flags. Callers check can_continue and
  // check_room first (both push again check_room(1)).
  int64_t push_first(int64_t env);
  int64_t push(int64_t env, float reward, bool terminated, bool truncated);
  // std::overflow_error unless `count` more frames keep total() <= kMaxFrames.
  void check_room(int64_t count) const;
  // Whether `env` has an open episode that push may continue.
  bool can_continue(int64_t env) const;

  // Slots whose validity changed in the last push (each once).
  const std::vector<int64_t>& changed() const { return changed_; }

  bool valid(int64_t slot) const { return valid_[static_cast<size_t>(slot)] != 0; }
  int64_t num_valid() const { return num_valid_; }
  int64_t capacity() const { return capacity_; }
  int64_t total() const { return total_; }  // frames ever written
  int64_t size() const { return total_ < capacity_ ? total_ : capacity_; }
  int64_t oldest() const { return total_ > capacity_ ? total_ - capacity_ : 0; }
  int64_t slot_of(int64_t t) const { return t % capacity_; }
  int64_t logical_of(int64_t slot) const;  // the frame now in `slot` (slot < size())

  // The S slots of the stack ending at logical frame t, oldest first (the
  // episode's first frame repeats). Requires an intact stack (valid(t)).
  void stack(int64_t t, int64_t* slots) const;
  // The n-step transition starting at valid logical frame t.
  SampledTransition transition(int64_t t) const;

  // Checkpoint access: the per-slot and per-env arrays, and a rebuild of
  // the validity flags from them.
  struct Slot {
    int64_t prev = -1;  // logical index of the predecessor in the episode, or -1
    int64_t next = -1;  // logical index of the successor, or -1 (none yet)
    float reward = 0;   // of the transition into this frame
    uint8_t terminated = 0;
    uint8_t ended = 0;  // last frame of its episode (terminated, truncated or closed)
  };
  struct Env {
    int64_t last = -1;  // logical index of the env's latest frame
    uint8_t open = 0;   // its episode may continue
  };
  const std::vector<Slot>& slots() const { return slots_; }
  const std::vector<Env>& envs() const { return envs_; }
  // Throws std::invalid_argument ("replay state is inconsistent: slot 4
  // (frame 10): ...", naming the slot or env, the field and what it should
  // be) unless (total, slots, envs) is a state pushes could have made: the
  // first min(total, capacity) slots hold the frames in the ring (slots
  // beyond are not read); changes nothing. The invariants, for a frame t in
  // the ring [oldest, total) (a "first frame" has prev -1):
  //   - terminated and ended are 0 or 1; terminated implies ended; the
  //     reward is finite, and 0 (not terminated) on a first frame;
  //   - prev is -1 or an earlier frame; one in the ring has next == t, one
  //     before it (overwritten) is the prev of no other frame and no env's
  //     last;
  //   - next is -1 or a later frame (< total) whose prev is t; an ended
  //     frame has none;
  //   - each env: last in [-1, total), open 0 or 1, open only with a last,
  //     no two envs share a last; an open env's last, when in the ring, has
  //     no successor and has not ended; a closed env's last, when in the
  //     ring, has ended and is no first frame; every frame without a
  //     successor that has not ended
  //     is an open env's last;
  //   - every episode that ended without being its env's last (the env went
  //     on) is followed by a later first frame of that env: each such end
  //     has a first frame after it, a different one for each.
  // At most kMaxFrames frames, kMaxEnvs envs.
  void check_state(int64_t total, const std::vector<Slot>& slots,
                   const std::vector<Env>& envs) const;
  // Replaces the state (arrays sized capacity / any) after check_state, and
  // recomputes validity; on an exception nothing changed.
  void restore(int64_t total, std::vector<Slot> slots, std::vector<Env> envs);

  int32_t stack_size() const { return stack_; }
  int32_t n_step() const { return n_step_; }
  double gamma() const { return gamma_; }

 private:
  bool in_ring(int64_t t) const { return t >= oldest() && t < total_; }
  const Slot& at(int64_t t) const { return slots_[static_cast<size_t>(slot_of(t))]; }
  Slot& at(int64_t t) { return slots_[static_cast<size_t>(slot_of(t))]; }
  bool compute_valid(int64_t t) const;
  void recheck(int64_t t);
  int64_t begin_push();
  void recheck_predecessors(int64_t t, int32_t count);
  Env& env_state(int64_t env);

  int64_t capacity_;
  int32_t stack_;
  int32_t n_step_;
  double gamma_;
  int64_t total_ = 0;
  int64_t num_valid_ = 0;
  std::vector<Slot> slots_;
  std::vector<uint8_t> valid_;
  std::vector<Env> envs_;
  std::vector<int64_t> changed_;
  std::vector<int64_t> pending_;  // frames to recheck after a push
};

}  // namespace obsaug

// EpisodeRing (replay/episode_ring.h). Validity of transition t follows
// docs/replay.md: t is in the ring, its stack reaches no overwritten frame,
// and at least one (up to n) successor steps exist before its episode ends.
// A push can change the validity of only a few transitions: the up to n
// predecessors of the new frame (their future grew), the up to n predecessors
// of an episode it closes, and the up to S-1 successors of the frame it
// overwrites (their stacks lost a frame); those are rechecked.
#include "replay/episode_ring.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/huge_pages.h"

namespace obsaug {

EpisodeRing::EpisodeRing(int64_t capacity, int32_t stack, int32_t n_step, double gamma)
    : capacity_(capacity), stack_(stack), n_step_(n_step), gamma_(gamma) {
  if (capacity < 1) {
    throw std::invalid_argument("capacity must be >= 1 frame, got " + std::to_string(capacity));
  }
  if (stack < 1)
    throw std::invalid_argument("frame_stack must be >= 1, got " + std::to_string(stack));
  if (n_step < 1) throw std::invalid_argument("n_step must be >= 1, got " + std::to_string(n_step));
  if (!(gamma >= 0.0 && gamma <= 1.0)) {
    throw std::invalid_argument("gamma must be in [0, 1], got " + std::to_string(gamma));
  }
  // read at random by every sample: on huge pages (kernels/huge_pages.h)
  assign_on_huge_pages(&slots_, static_cast<size_t>(capacity), Slot());
  assign_on_huge_pages(&valid_, static_cast<size_t>(capacity), uint8_t{0});
}

int64_t EpisodeRing::logical_of(int64_t slot) const {
  return slot + capacity_ * ((total_ - 1 - slot) / capacity_);
}

EpisodeRing::Env& EpisodeRing::env_state(int64_t env) {
  if (env < 0) throw std::invalid_argument("env must be >= 0, got " + std::to_string(env));
  if (static_cast<size_t>(env) >= envs_.size()) envs_.resize(static_cast<size_t>(env) + 1);
  return envs_[static_cast<size_t>(env)];
}

bool EpisodeRing::can_continue(int64_t env) const {
  return env >= 0 && static_cast<size_t>(env) < envs_.size() &&
         envs_[static_cast<size_t>(env)].open != 0;
}

bool EpisodeRing::compute_valid(int64_t t) const {
  if (!in_ring(t)) return false;
  int64_t cur = t;
  for (int32_t s = 1; s < stack_; ++s) {
    const int64_t prev = at(cur).prev;
    if (prev < 0) break;
    if (prev < oldest()) return false;
    cur = prev;
  }
  cur = t;
  int32_t steps = 0;
  for (int32_t k = 1; k <= n_step_; ++k) {
    if (at(cur).ended) break;
    const int64_t next = at(cur).next;
    if (next < 0) return false;
    cur = next;
    steps = k;
  }
  return steps >= 1;
}

void EpisodeRing::recheck(int64_t t) {
  const size_t slot = static_cast<size_t>(slot_of(t));
  const uint8_t now = compute_valid(t) ? 1 : 0;
  if (now == valid_[slot]) return;
  valid_[slot] = now;
  num_valid_ += now ? 1 : -1;
  changed_.push_back(static_cast<int64_t>(slot));
}

void EpisodeRing::recheck_predecessors(int64_t t, int32_t count) {
  int64_t cur = t;
  for (int32_t k = 0; k < count; ++k) {
    const int64_t prev = at(cur).prev;
    if (prev < 0 || !in_ring(prev)) return;
    recheck(prev);
    cur = prev;
  }
}

// Makes room for frame total_: forgets the frame it overwrites and returns
// the frames whose stacks reached it, to recheck once the frame is written.
int64_t EpisodeRing::begin_push() {
  const int64_t t = total_;
  const size_t slot = static_cast<size_t>(slot_of(t));
  pending_.clear();
  if (t >= capacity_) {
    const int64_t overwritten = t - capacity_;
    int64_t cur = overwritten;
    for (int32_t s = 1; s < stack_; ++s) {
      const int64_t next = at(cur).next;
      if (next < 0) break;
      pending_.push_back(next);
      cur = next;
    }
    if (valid_[slot]) {
      valid_[slot] = 0;
      --num_valid_;
      changed_.push_back(static_cast<int64_t>(slot));
    }
  }
  slots_[slot] = Slot();
  return static_cast<int64_t>(slot);
}

int64_t EpisodeRing::push_first(int64_t env) {
  Env& e = env_state(env);
  changed_.clear();
  if (e.open && in_ring(e.last)) {  // the env's open episode ends here (truncated)
    at(e.last).ended = 1;
    e.open = 0;
    recheck_predecessors(e.last, n_step_);
  }
  const int64_t slot = begin_push();
  const int64_t t = total_++;
  for (int64_t p : pending_) recheck(p);
  e.last = t;
  e.open = 1;
  return slot;
}

int64_t EpisodeRing::push(int64_t env, float reward, bool terminated, bool truncated) {
  if (!can_continue(env)) {
    throw std::invalid_argument("env " + std::to_string(env) +
                                " has no open episode: call add_first(frame) after a reset "
                                "(and after terminated or truncated)");
  }
  Env& e = envs_[static_cast<size_t>(env)];
  changed_.clear();
  const int64_t slot = begin_push();
  const int64_t t = total_++;
  Slot& s = slots_[static_cast<size_t>(slot)];
  s.prev = e.last;
  s.reward = reward;
  s.terminated = terminated ? 1 : 0;
  s.ended = (terminated || truncated) ? 1 : 0;
  if (in_ring(e.last)) at(e.last).next = t;
  e.last = t;
  e.open = s.ended ? 0 : 1;
  for (int64_t p : pending_) recheck(p);
  recheck_predecessors(t, n_step_);
  return slot;
}

void EpisodeRing::stack(int64_t t, int64_t* slots) const {
  int64_t cur = t;
  slots[stack_ - 1] = slot_of(cur);
  for (int32_t s = stack_ - 2; s >= 0; --s) {
    const int64_t prev = at(cur).prev;
    if (prev >= 0) cur = prev;
    slots[s] = slot_of(cur);
  }
}

SampledTransition EpisodeRing::transition(int64_t t) const {
  SampledTransition out;
  int64_t cur = t;
  double g = 1.0;
  for (int32_t k = 1; k <= n_step_; ++k) {
    if (at(cur).ended) break;
    cur = at(cur).next;
    if (k == 1) out.action_slot = slot_of(cur);
    out.reward += g * static_cast<double>(at(cur).reward);
    g *= gamma_;
    out.steps = k;
  }
  out.next_frame = cur;
  out.discount = at(cur).terminated ? 0.0 : g;
  return out;
}

void EpisodeRing::restore(int64_t total, std::vector<Slot> slots, std::vector<Env> envs) {
  const auto fail = [](const std::string& what) {
    throw std::invalid_argument("replay state is inconsistent: " + what);
  };
  if (total < 0) fail("negative frame count " + std::to_string(total));
  if (static_cast<int64_t>(slots.size()) != capacity_) {
    fail(std::to_string(slots.size()) + " slots for capacity " + std::to_string(capacity_));
  }
  const int64_t size = std::min(total, capacity_);
  for (int64_t slot = 0; slot < size; ++slot) {
    const int64_t t = slot + capacity_ * ((total - 1 - slot) / capacity_);
    const Slot& s = slots[static_cast<size_t>(slot)];
    if (s.prev < -1 || s.prev >= t || (s.next != -1 && (s.next <= t || s.next >= total))) {
      fail("slot " + std::to_string(slot) + " links outside its frame's past/future");
    }
  }
  for (const Env& e : envs) {
    if (e.last < -1 || e.last >= total) fail("an env's latest frame lies outside the ring");
  }
  total_ = total;
  std::copy(slots.begin(), slots.end(), slots_.begin());  // into the huge pages
  envs_ = std::move(envs);
  num_valid_ = 0;
  changed_.clear();
  std::fill(valid_.begin(), valid_.end(), 0);
  for (int64_t slot = 0; slot < size; ++slot) {
    const bool v = compute_valid(logical_of(slot));
    valid_[static_cast<size_t>(slot)] = v ? 1 : 0;
    num_valid_ += v ? 1 : 0;
  }
}

}  // namespace obsaug

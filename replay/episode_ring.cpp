// EpisodeRing (replay/episode_ring.h). Validity of transition t follows
// docs/replay.md: t is in the ring, its stack reaches no overwritten frame,
// and at least one (up to n) successor steps exist before its episode ends.
// A push can change the validity of only a few transitions: the up to n
// predecessors of the new frame (their future grew), the up to n predecessors
// of an episode it closes, and the up to S-1 successors of the frame it
// overwrites (their stacks lost a frame); those are rechecked.
#include "replay/episode_ring.h"

#include <algorithm>
#include <cmath>
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
  if (env < 0 || env >= kMaxEnvs) {
    throw std::invalid_argument("env ids must be in [0, 2^20), got " + std::to_string(env));
  }
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
  check_room(1);
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
  check_room(1);
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

void EpisodeRing::check_room(int64_t count) const {
  if (count > kMaxFrames - total_) {
    throw std::overflow_error("the buffer has counted " + std::to_string(total_) + " frames; " +
                              std::to_string(count) +
                              " more would pass 2^62 = " + std::to_string(kMaxFrames) +
                              ", the most it counts (a checkpoint near that count cannot grow)");
  }
}

void EpisodeRing::check_state(int64_t total, const std::vector<Slot>& slots,
                              const std::vector<Env>& envs) const {
  const auto fail = [](const std::string& what) {
    throw std::invalid_argument("replay state is inconsistent: " + what);
  };
  if (total < 0 || total > kMaxFrames) {
    fail("the frame count " + std::to_string(total) +
         " is outside [0, 2^62 = " + std::to_string(kMaxFrames) + "]");
  }
  if (static_cast<int64_t>(slots.size()) != capacity_) {
    fail(std::to_string(slots.size()) + " slots for capacity " + std::to_string(capacity_));
  }
  if (static_cast<int64_t>(envs.size()) > kMaxEnvs) {
    fail(std::to_string(envs.size()) + " envs, more than 2^20 (env ids lie in [0, 2^20))");
  }
  const int64_t size = std::min(total, capacity_);
  const int64_t oldest = total - size;
  const auto in_ring = [&](int64_t t) { return t >= oldest && t < total; };
  const auto at = [&](int64_t t) -> const Slot& {
    return slots[static_cast<size_t>(t % capacity_)];
  };
  const auto frame = [&](int64_t t) {
    return "frame " + std::to_string(t) + " (slot " + std::to_string(t % capacity_) + ")";
  };
  const auto slot_text = [&](int64_t t) {
    return "slot " + std::to_string(t % capacity_) + " (frame " + std::to_string(t) + ")";
  };
  std::vector<int64_t> gone_prevs;  // predecessors already overwritten
  int64_t open_tails = 0;           // frames without a successor that have not ended
  for (int64_t t = oldest; t < total; ++t) {
    const Slot& s = at(t);
    const std::string where = slot_text(t) + ": ";
    if (s.terminated > 1 || s.ended > 1) {
      fail(where + "'terminated' is " + std::to_string(s.terminated) + " and 'ended' " +
           std::to_string(s.ended) + " (flags are 0 or 1)");
    }
    if (s.terminated && !s.ended) fail(where + "'terminated' is 1 but 'ended' is 0");
    if (!std::isfinite(s.reward)) fail(where + "'reward' is " + std::to_string(s.reward));
    if (s.prev < -1 || s.prev >= t) {
      fail(where + "'prev' is " + std::to_string(s.prev) + ", not -1 or an earlier frame");
    }
    if (s.prev == -1 && (s.reward != 0.0f || s.terminated)) {
      fail(where + "the first frame of an episode (its 'prev' is -1) has 'reward' " +
           std::to_string(s.reward) + " and 'terminated' " + std::to_string(s.terminated) +
           ", not 0 and 0 (no transition leads into it)");
    }
    if (s.prev >= 0 && in_ring(s.prev) && at(s.prev).next != t) {
      fail(where + "'prev' is " + std::to_string(s.prev) + " but " + frame(s.prev) +
           " has 'next' " + std::to_string(at(s.prev).next) + ", not " + std::to_string(t));
    }
    if (s.prev >= 0 && !in_ring(s.prev)) gone_prevs.push_back(s.prev);
    if (s.next != -1) {
      if (s.next <= t || s.next >= total) {
        fail(where + "'next' is " + std::to_string(s.next) +
             ", not -1 or a later frame of the ring (up to " + std::to_string(total - 1) + ")");
      }
      if (at(s.next).prev != t) {
        fail(where + "'next' is " + std::to_string(s.next) + " but " + frame(s.next) +
             " has 'prev' " + std::to_string(at(s.next).prev) + ", not " + std::to_string(t));
      }
      if (s.ended) fail(where + "'ended' is 1 but 'next' is " + std::to_string(s.next));
    } else if (!s.ended) {
      ++open_tails;
    }
  }
  std::sort(gone_prevs.begin(), gone_prevs.end());
  const auto adjacent = std::adjacent_find(gone_prevs.begin(), gone_prevs.end());
  if (adjacent != gone_prevs.end()) {
    fail("two frames of the ring have 'prev' " + std::to_string(*adjacent) +
         " (a frame has one successor)");
  }
  std::vector<int64_t> lasts;
  int64_t open_lasts_in_ring = 0;
  for (size_t e = 0; e < envs.size(); ++e) {
    const Env& env = envs[e];
    const std::string where = "env " + std::to_string(e) + ": ";
    if (env.last < -1 || env.last >= total) {
      fail(where + "'last' is " + std::to_string(env.last) + ", not -1 or a frame written (< " +
           std::to_string(total) + ")");
    }
    if (env.open > 1) fail(where + "'open' is " + std::to_string(env.open) + " (0 or 1)");
    if (env.last == -1) {
      if (env.open) fail(where + "'open' is 1 but 'last' is -1 (no frame)");
      continue;
    }
    lasts.push_back(env.last);
    if (!in_ring(env.last)) {
      if (std::binary_search(gone_prevs.begin(), gone_prevs.end(), env.last)) {
        fail(where + "'last' is " + std::to_string(env.last) +
             ", the 'prev' of a later frame (an env's latest frame has no successor)");
      }
      continue;
    }
    const Slot& s = at(env.last);
    if (env.open && (s.next != -1 || s.ended)) {
      fail(where + "'open' is 1 but its 'last' " + frame(env.last) +
           (s.ended ? " has ended"
                    : " has a successor (its 'next' is " + std::to_string(s.next) + ")"));
    }
    if (!env.open && (!s.ended || s.prev == -1)) {
      // an episode ends with its env's last frame only by a step that
      // terminated or truncated (a reset ends it with an older frame)
      fail(where + "'open' is 0 but its 'last' " + frame(env.last) +
           (s.ended ? " is the first frame of an episode, which only a reset, with a later "
                      "frame, ends"
                    : " has not ended"));
    }
    open_lasts_in_ring += env.open;
  }
  std::sort(lasts.begin(), lasts.end());
  const auto shared = std::adjacent_find(lasts.begin(), lasts.end());
  if (shared != lasts.end()) {
    fail("two envs have 'last' " + std::to_string(*shared) + " (a frame is one env's)");
  }
  if (open_tails != open_lasts_in_ring) {
    for (int64_t t = oldest; t < total; ++t) {
      if (at(t).next == -1 && !at(t).ended && !std::binary_search(lasts.begin(), lasts.end(), t)) {
        fail(slot_text(t) +
             ": it has no successor and has not ended, but it is no open env's "
             "'last' (no env can continue its episode)");
      }
    }
  }
  // An episode that ended but is not its env's last was followed by a first
  // frame of that env: from the newest frame back, each such end takes one
  // of the first frames after it.
  int64_t later_firsts = 0;
  for (int64_t t = total - 1; t >= oldest; --t) {
    const Slot& s = at(t);
    if (s.ended && !std::binary_search(lasts.begin(), lasts.end(), t)) {
      if (later_firsts == 0) {
        fail(slot_text(t) +
             ": its episode ended and it is no env's 'last', so its env went "
             "on, but no first frame (one whose 'prev' is -1) of its own follows it");
      }
      --later_firsts;
    }
    if (s.prev == -1) ++later_firsts;
  }
}

void EpisodeRing::restore(int64_t total, std::vector<Slot> slots, std::vector<Env> envs) {
  check_state(total, slots, envs);
  const int64_t size = std::min(total, capacity_);
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

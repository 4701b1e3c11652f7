// The first fill's progress on stderr (DistractorPool::Impl::fill). On a
// terminal a redrawn count; elsewhere (a notebook's log, a pipe) one line once
// the fill has taken a second and one when it ends: a fill of a few hundred
// photos takes seconds, and silent it looks like a hang. Nothing when off.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdio>

namespace obsaug {

class FillProgress {
 public:
  explicit FillProgress(bool on) : on_(on), terminal_(on && ::isatty(STDERR_FILENO)) {}

  bool on() const { return on_; }

  // While the fill threads run: how long to wait before the next call.
  std::chrono::milliseconds tick(long long filled, long long size, int threads) {
    if (terminal_) {
      std::fprintf(stderr, "\robsaug: filling the distractor pool: %lld / %lld images", filled,
                   size);
      std::fflush(stderr);
      return std::chrono::milliseconds(100);
    }
    if (on_ && !announced_ && Clock::now() - started_ > std::chrono::seconds(1)) {
      std::fprintf(stderr,
                   "obsaug: decoding %lld photos into the distractor pool (%d thread%s, once "
                   "per pool)...\n",
                   size, threads, threads == 1 ? "" : "s");
      std::fflush(stderr);
      announced_ = true;
    }
    return std::chrono::milliseconds(10);
  }

  // The fill is complete.
  void done(long long size) const {
    if (!terminal_ && !announced_) return;
    const double seconds = std::chrono::duration<double>(Clock::now() - started_).count();
    std::fprintf(stderr, "%sobsaug: filled the distractor pool: %lld / %lld images in %.1f s\n",
                 terminal_ ? "\r" : "", size, size, seconds);
  }

 private:
  using Clock = std::chrono::steady_clock;
  bool on_;
  bool terminal_;
  bool announced_ = false;
  Clock::time_point started_ = Clock::now();
};

}  // namespace obsaug

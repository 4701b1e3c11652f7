// The timing loop of `obsaug bench` (tools/bench_loop.h).
#include "tools/bench_loop.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>

namespace obsaug::cli {
namespace {

using Clock = std::chrono::steady_clock;

// Progress on stderr: a redrawn bar on a terminal, a line per 10 % otherwise.
class Progress {
 public:
  explicit Progress(int64_t total)
      : total_(total), tty_(isatty(STDERR_FILENO) == 1), start_(Clock::now()) {}

  void update(int64_t done) {
    auto now = Clock::now();
    if (tty_) {
      if (done < total_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
      last_draw_ = now;
      const int width = 30;
      int filled = static_cast<int>(width * static_cast<double>(done) / total_);
      std::string bar(filled, '#');
      bar.resize(width, '.');
      double secs = seconds(now);
      double rate = secs > 0 ? done / secs : 0;
      double eta = rate > 0 ? (total_ - done) / rate : 0;
      std::fprintf(stderr, "\r[%s] %3.0f%% %s/%s samples  %s/s  ETA %.0fs   ", bar.c_str(),
                   100.0 * done / total_, si(done).c_str(), si(total_).c_str(), si(rate).c_str(),
                   eta);
      if (done >= total_) std::fputc('\n', stderr);
    } else {
      int tenth = static_cast<int>(10 * done / total_);
      if (tenth <= last_tenth_) return;
      const int window_percent = 10 * (tenth - last_tenth_);  // 10 unless a call spans more
      last_tenth_ = tenth;
      double secs = seconds(now);
      const double window = secs - last_secs_;
      std::fprintf(stderr,
                   "bench: %3d%%  %s samples  %.1f s  %s samples/s (last %d%%: %s/s)  rss %s\n",
                   tenth * 10, si(done).c_str(), secs, si(secs > 0 ? done / secs : 0).c_str(),
                   window_percent, si(window > 0 ? (done - last_done_) / window : 0).c_str(),
                   mib(resident_bytes()).c_str());
      last_secs_ = secs;
      last_done_ = done;
    }
    std::fflush(stderr);
  }

 private:
  double seconds(Clock::time_point now) const {
    return std::chrono::duration<double>(now - start_).count();
  }
  int64_t total_;
  bool tty_;
  Clock::time_point start_;
  Clock::time_point last_draw_{};
  int last_tenth_ = 0;
  double last_secs_ = 0;
  int64_t last_done_ = 0;
};

}  // namespace

std::string si(double v, const char* unit) {
  const char* prefixes[] = {"", "k", "M", "G", "T"};
  int p = 0;
  while (std::fabs(v) >= 1000.0 && p < 4) {
    v /= 1000.0;
    ++p;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, p == 0 ? "%.0f %s%s" : "%.2f %s%s", v, prefixes[p], unit);
  return buf;
}

std::string mib(double bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / (1024.0 * 1024.0));
  return buf;
}

uint64_t resident_bytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long long size = 0, resident = 0;
  int n = std::fscanf(f, "%llu %llu", &size, &resident);
  std::fclose(f);
  return n == 2 ? resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) : 0;
}

void run_bench(Engine& engine, const BenchWorkload& workload, int64_t samples, int64_t batch) {
  Progress progress(samples);
  const auto t0 = Clock::now();
  int64_t done = 0;
  while (done < samples) {
    const int64_t b = std::min(batch, samples - done);
    workload.call(b);
    done += b;
    progress.update(done);
  }
  workload.wait();
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();

  const EngineStats st = engine.stats();
  std::printf("samples:   %" PRId64 "%s in %" PRIu64 " %s\n", done, workload.samples_note.c_str(),
              st.calls, workload.calls_note.c_str());
  std::printf("seconds:   %.3f\n", secs);
  std::printf("samples/s: %.0f (%s/s)\n", done / secs, si(done / secs).c_str());
  if (workload.rate_lines) workload.rate_lines(done, secs);
  if (st.has_pool) {
    std::printf("pool:      decoded %" PRIu64 ", failed %" PRIu64 ", uploaded %" PRIu64
                ", decode rate %.1f images/s, mean age %.1f calls, queue depth %" PRIu64 "\n",
                st.pool_decoded, st.pool_failed, st.pool_uploaded, st.pool_decode_rate,
                st.pool_mean_age_calls, st.pool_queue_depth);
  } else {
    std::printf("pool:      none (the pipeline has no overlay)\n");
  }
  std::printf("rss end:   %s\n", mib(resident_bytes()).c_str());
  std::fflush(stdout);
  engine.close();
}

}  // namespace obsaug::cli

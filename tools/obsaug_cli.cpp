// The `obsaug` command-line tool (DESIGN.md section 7; issue 4 items 5, 6):
//
//   obsaug check-config FILE                 validate a config, print it resolved
//   obsaug bench --config FILE [options]     stream N augmented samples, report rates
//   obsaug preview --config FILE --out PNG   original and augmented frames side by side
//
// Everything goes through obsaug::Engine (engine/engine.h), exactly as a C++
// agent would use it. Exit status: 0 ok, 2 usage or configuration error,
// 1 runtime error; errors are one line on stderr starting with "obsaug: ".
//
// Built into build/tools/obsaug. Linked with libtorch, so no std::filesystem
// here (libtorch exports incompatible copies of it): files go through stdio
// and POSIX.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/util/Exception.h>
#include <png.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "engine/config.h"
#include "engine/engine.h"
#ifdef OBSAUG_WITH_REPLAY
#include "replay/engine_augment.h"
#endif

namespace obsaug::cli {
namespace {

constexpr char kUsage[] =
    R"(obsaug: observation augmentation for RL (shift, crop, distractor overlay)

usage:
  obsaug check-config FILE
      Load and validate a YAML config; print it with every default and
      inferred value spelled out.
  obsaug bench --config FILE [--batch B] [--samples N] [--threads T]
               [--inplace | --out-of-place]
      Stream N augmented samples through the engine in batches of B random
      uint8 observations [B, S*C, H, W] on the config's device; print
      samples/s, bytes/s and the distractor pool's counters.
        --batch B        observations per augment call (default 256)
        --samples N      samples to augment in all (default 10000000)
        --threads T      intra-op threads (default: all cores but one per
                         background pool decoder, at least 1)
        --inplace        augment_ on the batch (default; needs a pipeline
                         that keeps the frame size)
        --out-of-place   augment, a new output tensor per call
        --replay CAP     sample+augment instead: fill an obsaug::ReplayBuffer
                         of CAP frames (synthetic episodes of 1000 steps),
                         then per call add one step and sample B transitions
                         with fused augmentation of obs and next_obs
                         (counts B samples per call)
  obsaug preview --config FILE --out GRID.png [--batch B] [--seed-step S]
                 [--scale K]
      Augment B synthetic scenes (a cart-pole-like render, S stacked frames
      of motion) and write a PNG grid: one row per sample, its S original
      frames, then its S augmented frames.
        --batch B        rows (default 8)
        --seed-step S    the step the augmentation draws with (default 0)
        --scale K        nearest-neighbour magnification (default 2)
  obsaug help | --help
      This text.

exit status: 0 ok, 2 usage or configuration error, 1 runtime error.
)";

// A mistake on the command line: exit 2 with the message.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// --- command line ------------------------------------------------------------

// Options of one subcommand: "--key value", "--key=value" or a bare flag.
struct Args {
  std::map<std::string, std::string> values;
  std::set<std::string> flags;
  std::vector<std::string> positional;

  bool has(const std::string& key) const { return values.count(key) || flags.count(key); }
  std::string get(const std::string& key, const std::string& fallback = "") const {
    auto it = values.find(key);
    return it == values.end() ? fallback : it->second;
  }
  int64_t get_int(const std::string& key, int64_t fallback, int64_t min_value) const {
    auto it = values.find(key);
    if (it == values.end()) return fallback;
    const std::string& text = it->second;
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(text.c_str(), &end, 10);
    // Accept 1e7 / 10e6 style counts too.
    if (end && *end != '\0') {
      double d = std::strtod(text.c_str(), &end);
      if (*end != '\0' || !(d == std::floor(d)) || d > 9.0e18)
        v = min_value - 1;
      else
        v = static_cast<long long>(d);
    }
    if (text.empty() || errno == ERANGE || v < min_value) {
      throw UsageError("--" + key + ": expected an integer >= " + std::to_string(min_value) +
                       ", got '" + text + "'");
    }
    return v;
  }
};

// `valued`: options that take a value; `bare`: flags without one.
Args parse_args(const std::string& command, int argc, char** argv, int first,
                const std::set<std::string>& valued, const std::set<std::string>& bare) {
  Args args;
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0 || arg == "--") {
      args.positional.push_back(arg);
      continue;
    }
    std::string key = arg.substr(2);
    std::string value;
    bool has_value = false;
    if (auto eq = key.find('='); eq != std::string::npos) {
      value = key.substr(eq + 1);
      key = key.substr(0, eq);
      has_value = true;
    }
    if (key == "help") {
      args.flags.insert("help");
    } else if (valued.count(key)) {
      if (!has_value) {
        if (i + 1 >= argc) throw UsageError("--" + key + " needs a value");
        value = argv[++i];
      }
      args.values[key] = value;
    } else if (bare.count(key)) {
      if (has_value) throw UsageError("--" + key + " takes no value");
      args.flags.insert(key);
    } else {
      std::string known;
      for (const auto& k : valued) known += " --" + k;
      for (const auto& k : bare) known += " --" + k;
      throw UsageError(command + ": unknown option '" + arg + "' (known:" + known + ")");
    }
  }
  return args;
}

std::string required_config(const std::string& command, const Args& args) {
  std::string path = args.get("config");
  if (path.empty() && args.positional.size() == 1)
    path = args.positional[0];
  else if (!args.positional.empty())
    throw UsageError(command + ": unexpected argument '" + args.positional[0] + "'");
  if (path.empty()) throw UsageError(command + ": --config FILE is required");
  return path;
}

// --- formatting --------------------------------------------------------------

// 12345678 -> "12.3M" (SI, for rates and counts).
std::string si(double v, const char* unit = "") {
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

std::string mib(uint64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / (1024.0 * 1024.0));
  return buf;
}

// Resident set size of this process, from /proc/self/statm (0 where absent).
uint64_t resident_bytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long long size = 0, resident = 0;
  int n = std::fscanf(f, "%llu %llu", &size, &resident);
  std::fclose(f);
  return n == 2 ? resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) : 0;
}

std::string shape_text(const at::Tensor& t) {
  std::string s = "[";
  for (int64_t d = 0; d < t.dim(); ++d) s += (d ? ", " : "") + std::to_string(t.size(d));
  return s + "]";
}

// --- check-config ------------------------------------------------------------

int cmd_check_config(int argc, char** argv) {
  Args args = parse_args("check-config", argc, argv, 2, {"config"}, {});
  if (args.has("help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const std::string path = required_config("check-config", args);
  Config config = load_config_file(path);
  std::printf("# %s: valid\n%s", path.c_str(), describe(config).c_str());
  return 0;
}

// --- bench -------------------------------------------------------------------

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
      last_tenth_ = tenth;
      double secs = seconds(now);
      const double window = secs - last_secs_;
      std::fprintf(
          stderr, "bench: %3d%%  %s samples  %.1f s  %s samples/s (last 10%%: %s/s)  rss %s\n",
          tenth * 10, si(done).c_str(), secs, si(secs > 0 ? done / secs : 0).c_str(),
          si(window > 0 ? (done - last_done_) / window : 0).c_str(), mib(resident_bytes()).c_str());
      last_secs_ = secs;
      last_done_ = done;
    }
    std::fflush(stderr);
  }

 private:
  using Clock = std::chrono::steady_clock;
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

// bench --replay: a ReplayBuffer of `capacity` frames filled with synthetic
// episodes, then per call one added step and one fused sample+augment of
// `batch` transitions (obs and next_obs), as an RL update loop does.
int bench_replay(Engine& engine, const Config& config, int64_t batch, int64_t samples,
                 int64_t capacity, uint64_t rss_start) {
#ifndef OBSAUG_WITH_REPLAY
  throw UsageError("bench: --replay needs the replay library (not built here)");
#else
  const FramesConfig& f = config.frames;
  ReplayOptions o;
  o.capacity = capacity;
  o.frame_shape = {f.channels, f.height, f.width};
  o.frame_stack = static_cast<int32_t>(f.stack);
  o.action_shape = {6};
  o.device = c10::Device(config.device);
  ReplayBuffer rb(o);
  // 64 distinct random frames cycled through the episodes: real bytes to copy.
  const at::Tensor frames = at::randint(0, 256, {64, f.channels, f.height, f.width},
                                        at::TensorOptions().dtype(at::kByte));
  const at::Tensor action = at::zeros({6});
  int64_t t = 0;
  const auto add_step = [&] {
    const at::Tensor frame = frames[t % 64];
    if (t % 1000 == 0) {
      rb.add_first(frame);
    } else {
      rb.add(action, 1.0, frame, t % 1000 == 999, false);
    }
    ++t;
  };
  auto t_fill = std::chrono::steady_clock::now();
  while (t < capacity) add_step();
  const double fill_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_fill).count();
  std::printf("replay:    %" PRId64 " frames [%" PRId64 ", %" PRId64 ", %" PRId64
              "] filled in %.1f s (%s), %" PRId64
              " valid transitions; per call: add 1 step, "
              "sample %" PRId64 " with obs and next_obs augmented\n",
              capacity, f.channels, f.height, f.width, fill_s, mib(rb.storage().nbytes()).c_str(),
              rb.num_valid(), batch);
  std::printf("rss filled: %s\n", mib(resident_bytes()).c_str());
  std::fflush(stdout);
  const StackAugment augment = augment_with(engine);
  Progress progress(samples);
  auto t0 = std::chrono::steady_clock::now();
  int64_t done = 0;
  ReplayBatch last;
  while (done < samples) {
    const int64_t b = std::min(batch, samples - done);
    add_step();
    last = rb.sample(b, &augment);
    done += b;
    progress.update(done);
  }
  (void)last.obs.flatten()[0].item<double>();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const EngineStats st = engine.stats();
  std::printf("samples:   %" PRId64 " transitions (obs + next_obs each) in %" PRIu64
              " engine calls\n",
              done, st.calls);
  std::printf("seconds:   %.3f\n", secs);
  std::printf("samples/s: %.0f (%s/s)\n", done / secs, si(done / secs).c_str());
  if (st.has_pool) {
    std::printf("pool:      decoded %" PRIu64 ", failed %" PRIu64 ", uploaded %" PRIu64
                ", decode rate %.1f images/s, mean age %.1f calls\n",
                st.pool_decoded, st.pool_failed, st.pool_uploaded, st.pool_decode_rate,
                st.pool_mean_age_calls);
  }
  std::printf("rss start: %s, end: %s\n", mib(rss_start).c_str(), mib(resident_bytes()).c_str());
  std::fflush(stdout);
  engine.close();
  return 0;
#endif
}

int cmd_bench(int argc, char** argv) {
  Args args =
      parse_args("bench", argc, argv, 2, {"config", "batch", "samples", "threads", "replay"},
                 {"inplace", "out-of-place"});
  if (args.has("help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const std::string path = required_config("bench", args);
  const int64_t batch = args.get_int("batch", 256, 1);
  const int64_t samples = args.get_int("samples", 10000000, 1);
  if (args.has("inplace") && args.has("out-of-place"))
    throw UsageError("bench: --inplace and --out-of-place exclude each other");

  const uint64_t rss_start = resident_bytes();
  Config config = load_config_file(path);
  // Default: the cores the pool's background decoders leave free. OpenMP's
  // barriers stall when its threads share cores with busy decoders (measured
  // on 2 cores with one decoder: 2 threads ran 4x slower than 1).
  const int64_t cores = std::max(1u, std::thread::hardware_concurrency());
  const int64_t decoders =
      has_overlay(config.pipeline) && config.pool.refresh.mode == RefreshMode::kAsync
          ? config.pool.refresh.threads
          : 0;
  const int64_t threads = args.get_int("threads", std::max<int64_t>(1, cores - decoders), 1);
  at::set_num_threads(static_cast<int>(threads));

  const auto [out_h, out_w] = frame_size_after(config);
  const FramesConfig& f = config.frames;
  const bool keeps_size = out_h == f.height && out_w == f.width;
  if (args.has("inplace") && !keeps_size) {
    throw UsageError("bench: --inplace needs a pipeline that keeps the frame size; " + path +
                     " turns " + std::to_string(f.height) + "x" + std::to_string(f.width) +
                     " frames into " + std::to_string(out_h) + "x" + std::to_string(out_w) +
                     " (use --out-of-place)");
  }
  const bool inplace = !args.has("out-of-place") && keeps_size;

  std::printf("config:    %s (device %s, seed %" PRIu64 ")\n", path.c_str(), config.device.c_str(),
              config.seed);
  std::printf("rss start: %s\n", mib(rss_start).c_str());
  std::fflush(stdout);

  auto t_build = std::chrono::steady_clock::now();
  Engine engine(config);
  double build_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_build).count();

  if (args.has("replay")) {
    std::printf("engine:    built in %.2f s%s\n", build_s,
                engine.pool() ? " (distractor pool filled)" : "");
    return bench_replay(engine, config, batch, samples, args.get_int("replay", 0, 1), rss_start);
  }
  const int64_t planes = f.stack * f.channels;
  at::Tensor obs = at::randint(0, 256, {batch, planes, f.height, f.width},
                               at::TensorOptions().dtype(at::kByte).device(config.device));
  const int64_t calls = (samples + batch - 1) / batch;
  std::printf("engine:    built in %.2f s%s\n", build_s,
              engine.pool() ? " (distractor pool filled)" : "");
  std::printf("batch:     %s uint8 random, %s per call, %" PRId64 " calls, %s, %" PRId64
              " intra-op threads (%" PRId64 " cores)\n",
              shape_text(obs).c_str(), mib(obs.nbytes()).c_str(), calls,
              inplace ? "in place (augment_)" : "out of place (augment)", threads, cores);
  std::fflush(stdout);

  Progress progress(samples);
  auto t0 = std::chrono::steady_clock::now();
  int64_t done = 0;
  at::Tensor out;
  while (done < samples) {
    const int64_t b = std::min(batch, samples - done);
    at::Tensor x = b == batch ? obs : obs.narrow(0, 0, b);
    if (inplace) {
      engine.augment_(x);
    } else {
      out = engine.augment(x);
    }
    done += b;
    progress.update(done);
  }
  // Wait for the device (a no-op on CPU): reading one element synchronises.
  (void)(inplace ? obs : out).flatten()[0].item<double>();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // Bytes: each observation byte is read once and each output byte written
  // once (in place: read and written), plus the distractor pixels each
  // overlay reads: C*Hp*Wp per sample (S*C*Hp*Wp with per_frame).
  const int64_t out_elem = inplace || config.output.dtype == OutputDtype::kUint8 ? 1 : 4;
  const double obs_bytes_per_sample = static_cast<double>(planes) * f.height * f.width +
                                      static_cast<double>(planes) * out_h * out_w * out_elem;
  double pool_bytes_per_sample = 0;
  for (const OpSpec& op : config.pipeline) {
    if (op.kind() != OpKind::kOverlay) continue;
    pool_bytes_per_sample += static_cast<double>(op.get_bool("per_frame") ? planes : f.channels) *
                             config.pool.image_height * config.pool.image_width;
  }
  const double bytes = (obs_bytes_per_sample + pool_bytes_per_sample) * done;

  const EngineStats st = engine.stats();
  const uint64_t rss_end = resident_bytes();
  std::printf("samples:   %" PRId64 " in %" PRIu64 " calls\n", done, st.calls);
  std::printf("seconds:   %.3f\n", secs);
  std::printf("samples/s: %.0f (%s/s)\n", done / secs, si(done / secs).c_str());
  std::printf("bytes/s:   %s (%.0f bytes per sample: %.0f observation bytes read + written",
              si(bytes / secs, "B").c_str(), obs_bytes_per_sample + pool_bytes_per_sample,
              obs_bytes_per_sample);
  if (pool_bytes_per_sample > 0) std::printf(", %.0f distractor bytes read", pool_bytes_per_sample);
  std::printf(")\n");
  if (st.has_pool) {
    std::printf("pool:      decoded %" PRIu64 ", failed %" PRIu64 ", uploaded %" PRIu64
                ", decode rate %.1f images/s, mean age %.1f calls, queue depth %" PRIu64 "\n",
                st.pool_decoded, st.pool_failed, st.pool_uploaded, st.pool_decode_rate,
                st.pool_mean_age_calls, st.pool_queue_depth);
  } else {
    std::printf("pool:      none (the pipeline has no overlay)\n");
  }
  std::printf("rss end:   %s\n", mib(rss_end).c_str());
  std::fflush(stdout);
  engine.close();
  return 0;
}

// --- preview -----------------------------------------------------------------

struct Rgb {
  double r, g, b;
};

uint64_t mix(uint64_t x) {  // splitmix64 finaliser: per-sample scene variety
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
double unit(uint64_t& state) { return (mix(state++) >> 11) * (1.0 / 9007199254740992.0); }

double segment_distance(double px, double py, double ax, double ay, double bx, double by) {
  double dx = bx - ax, dy = by - ay;
  double t = std::clamp(((px - ax) * dx + (py - ay) * dy) / (dx * dx + dy * dy + 1e-12), 0.0, 1.0);
  double ex = px - (ax + t * dx), ey = py - (ay + t * dy);
  return std::sqrt(ex * ex + ey * ey);
}

// A DMControl cart-pole-like scene: sky gradient, checkered floor, a cart
// moving right and a swinging pole, one step of motion per stacked frame.
// Returns [B, S*C, H, W] uint8 on the CPU (C = 1: luma of the render).
at::Tensor synthetic_observations(int64_t batch, const FramesConfig& f) {
  at::Tensor obs = at::empty({batch, f.stack * f.channels, f.height, f.width}, at::kByte);
  uint8_t* data = obs.data_ptr<uint8_t>();
  const int64_t H = f.height, W = f.width, plane = H * W;
  for (int64_t b = 0; b < batch; ++b) {
    uint64_t rng = 1000 * static_cast<uint64_t>(b) + 17;
    const Rgb sky_top{60 + 60 * unit(rng), 110 + 60 * unit(rng), 190 + 50 * unit(rng)};
    const Rgb sky_low{200 + 40 * unit(rng), 215 + 30 * unit(rng), 230 + 20 * unit(rng)};
    const Rgb tile_a{40 + 40 * unit(rng), 70 + 50 * unit(rng), 90 + 50 * unit(rng)};
    const Rgb tile_b{tile_a.r + 50, tile_a.g + 50, tile_a.b + 50};
    const Rgb cart{180 + 70 * unit(rng), 60 + 120 * unit(rng), 30 + 60 * unit(rng)};
    const Rgb pole{230, 200 + 40 * unit(rng), 120 + 60 * unit(rng)};
    const double horizon = H * (0.6 + 0.1 * unit(rng));
    const double cart_x0 = W * (0.25 + 0.3 * unit(rng));
    const double speed = W * (0.04 + 0.04 * unit(rng));
    const double angle0 = -0.6 + 1.2 * unit(rng);
    const double swing = 0.15 + 0.2 * unit(rng);
    const double cell = std::max<double>(4.0, W / 8.0);
    for (int64_t s = 0; s < f.stack; ++s) {
      const double cx = cart_x0 + speed * s, cy = horizon - 0.02 * H;
      const double cw = 0.22 * W, ch = 0.1 * H;
      const double angle = angle0 + swing * s;
      const double len = 0.4 * H;
      const double tip_x = cx + len * std::sin(angle), tip_y = cy - ch / 2 - len * std::cos(angle);
      for (int64_t y = 0; y < H; ++y) {
        for (int64_t x = 0; x < W; ++x) {
          const double px = x + 0.5, py = y + 0.5;
          Rgb c;
          if (py < horizon) {
            double t = py / horizon;
            c = {sky_top.r + t * (sky_low.r - sky_top.r), sky_top.g + t * (sky_low.g - sky_top.g),
                 sky_top.b + t * (sky_low.b - sky_top.b)};
          } else {
            bool odd = (static_cast<int64_t>(px / cell) +
                        static_cast<int64_t>((py - horizon) / cell * 2)) &
                       1;
            c = odd ? tile_a : tile_b;
          }
          if (std::fabs(px - cx) < cw / 2 && std::fabs(py - cy) < ch / 2) c = cart;
          double d = segment_distance(px, py, cx, cy - ch / 2, tip_x, tip_y);
          if (d < std::max(1.2, 0.025 * W)) c = pole;
          if (std::hypot(px - tip_x, py - tip_y) < std::max(2.0, 0.05 * W)) c = {240, 80, 60};
          auto u8 = [](double v) { return static_cast<uint8_t>(std::clamp(v, 0.0, 255.0) + 0.5); };
          uint8_t* sample = data + b * f.stack * f.channels * plane;
          if (f.channels == 3) {
            sample[(s * 3 + 0) * plane + y * W + x] = u8(c.r);
            sample[(s * 3 + 1) * plane + y * W + x] = u8(c.g);
            sample[(s * 3 + 2) * plane + y * W + x] = u8(c.b);
          } else {
            uint8_t gray = u8(0.299 * c.r + 0.587 * c.g + 0.114 * c.b);
            for (int64_t ch_i = 0; ch_i < f.channels; ++ch_i)
              sample[(s * f.channels + ch_i) * plane + y * W + x] = gray;
          }
        }
      }
    }
  }
  return obs;
}

// RGB canvas; frames are pasted in, magnified by nearest neighbour.
struct Canvas {
  int64_t width = 0, height = 0;
  std::vector<uint8_t> rgb;
  Canvas(int64_t w, int64_t h, uint8_t fill) : width(w), height(h), rgb(w * h * 3, fill) {}

  // frame: [C, H, W] uint8 contiguous CPU; C = 3 (RGB) or else channel 0 as gray.
  void paste(const at::Tensor& frame, int64_t left, int64_t top, int64_t scale) {
    const int64_t C = frame.size(0), H = frame.size(1), W = frame.size(2);
    const uint8_t* p = frame.data_ptr<uint8_t>();
    for (int64_t y = 0; y < H * scale; ++y) {
      for (int64_t x = 0; x < W * scale; ++x) {
        const int64_t src = (y / scale) * W + x / scale;
        uint8_t* dst = &rgb[((top + y) * width + left + x) * 3];
        for (int k = 0; k < 3; ++k) dst[k] = p[(C == 3 ? k : 0) * H * W + src];
      }
    }
  }

  void write_png(const std::string& path) const {
    FILE* file = std::fopen(path.c_str(), "wb");
    if (!file) throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
    png_infop info = png ? png_create_info_struct(png) : nullptr;
    if (!png || !info || setjmp(png_jmpbuf(png))) {
      png_destroy_write_struct(&png, &info);
      std::fclose(file);
      throw std::runtime_error("libpng failed writing " + path);
    }
    png_init_io(png, file);
    png_set_IHDR(png, info, static_cast<png_uint_32>(width), static_cast<png_uint_32>(height), 8,
                 PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int64_t y = 0; y < height; ++y)
      png_write_row(png, const_cast<png_bytep>(&rgb[y * width * 3]));
    png_write_end(png, nullptr);
    png_destroy_write_struct(&png, &info);
    if (std::fclose(file) != 0)
      throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
  }
};

// Augmented output back to uint8 0..255 on the CPU (undoing float32 scale/bias).
at::Tensor to_display(const at::Tensor& out, const OutputConfig& output) {
  at::Tensor cpu = out.cpu();
  if (cpu.scalar_type() == at::kByte) return cpu.contiguous();
  at::Tensor v = cpu.to(at::kDouble);
  if (output.scale != 0) v = (v - output.bias) / output.scale;
  return v.round().clamp(0, 255).to(at::kByte).contiguous();
}

int cmd_preview(int argc, char** argv) {
  Args args =
      parse_args("preview", argc, argv, 2, {"config", "out", "batch", "seed-step", "scale"}, {});
  if (args.has("help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const std::string path = required_config("preview", args);
  const std::string out_path = args.get("out");
  if (out_path.empty()) throw UsageError("preview: --out GRID.png is required");
  const int64_t batch = args.get_int("batch", 8, 1);
  const int64_t step = args.get_int("seed-step", 0, 0);
  const int64_t scale = args.get_int("scale", 2, 1);
  if (batch > 4096 || scale > 64) throw UsageError("preview: --batch <= 4096 and --scale <= 64");

  Config config = load_config_file(path);
  const FramesConfig& f = config.frames;
  Engine engine(config);
  at::Tensor original = synthetic_observations(batch, f);
  at::Tensor augmented = to_display(
      engine.augment(original.to(config.device), static_cast<uint64_t>(step)), config.output);
  engine.close();

  const int64_t gap = 2, group_gap = 8;
  const int64_t oh = f.height * scale, ow = f.width * scale;
  const int64_t ah = augmented.size(2) * scale, aw = augmented.size(3) * scale;
  const int64_t S = f.stack, C = f.channels;
  const int64_t row_h = std::max(oh, ah);
  const int64_t width = S * ow + (S - 1) * gap + group_gap + S * aw + (S - 1) * gap;
  const int64_t height = batch * row_h + (batch - 1) * gap;
  Canvas canvas(width, height, 255);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t top = b * (row_h + gap);
    for (int64_t s = 0; s < S; ++s) {
      canvas.paste(original[b].narrow(0, s * C, C).contiguous(), s * (ow + gap), top, scale);
      canvas.paste(augmented[b].narrow(0, s * C, C).contiguous(),
                   S * ow + (S - 1) * gap + group_gap + s * (aw + gap), top, scale);
    }
  }
  canvas.write_png(out_path);
  std::printf("wrote %s: %" PRId64 "x%" PRId64 " pixels; %" PRId64 " rows (samples, step %" PRId64
              "), each %" PRId64 " original %" PRId64 "x%" PRId64 " frames | %" PRId64
              " augmented %" PRId64 "x%" PRId64 " frames, magnified %" PRId64 "x\n",
              out_path.c_str(), width, height, batch, step, S, f.height, f.width, S,
              augmented.size(2), augmented.size(3), scale);
  return 0;
}

int run(int argc, char** argv) {
  const std::string command = argc > 1 ? argv[1] : "";
  if (command.empty()) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  if (command == "help" || command == "--help" || command == "-h") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (command == "check-config") return cmd_check_config(argc, argv);
  if (command == "bench") return cmd_bench(argc, argv);
  if (command == "preview") return cmd_preview(argc, argv);
  throw UsageError("unknown command '" + command +
                   "' (commands: check-config, bench, preview, help)");
}

}  // namespace
}  // namespace obsaug::cli

int main(int argc, char** argv) {
  try {
    return obsaug::cli::run(argc, argv);
  } catch (const obsaug::cli::UsageError& e) {
    std::fprintf(stderr, "obsaug: %s (see obsaug --help)\n", e.what());
    return 2;
  } catch (const obsaug::ConfigError& e) {
    std::fprintf(stderr, "obsaug: %s\n", e.what());
    return 2;
  } catch (const c10::Error& e) {
    // Torch's first line is the message; the rest is debugging advice.
    std::string message = e.what_without_backtrace();
    std::fprintf(stderr, "obsaug: error: %s\n", message.substr(0, message.find('\n')).c_str());
    return 1;
  } catch (const std::exception& e) {
    std::string message = e.what();
    std::replace(message.begin(), message.end(), '\n', ' ');
    std::fprintf(stderr, "obsaug: error: %s\n", message.c_str());
    return 1;
  }
}

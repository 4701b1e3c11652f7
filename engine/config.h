// obsaug's configuration: the YAML schema of DESIGN.md section 6 as a plain
// C++ struct, its loader and its printer.
//
// This header and engine/config.cpp are the only code that sees yaml-cpp; the
// rest of obsaug (Engine, CLI, bindings) reads the plain structs below.
//
// Every default lives in the member initialisers of this file and nowhere
// else. A config file only needs the keys that differ from them:
//
//   device: cpu                 # cpu | cuda | cuda:N
//   seed: 0                     # uint64, the Philox key (DESIGN.md section 3)
//   frames: {stack: 3, channels: 3, height: 84, width: 84}
//   pipeline: []                # ordered ops; [] is the identity (output conversion only)
//     # - {op: shift, pad: 4}     # each op's keys, defaults and ranges: the op schema
//     #                           # (kernels/op_schema.cpp; README's op table)
//   pool:                       # the distractor pool, needed by an overlay
//     size: 1024                # images resident in the pool
//     image_size: [84, 84]      # default: the frame size the overlay sees
//     sources: []               # directories, .txt lists, .tar shards; required with an overlay
//     refresh: {threads: 1, max_per_second: 0, mode: async, per_call: 8}
//   output: {dtype: uint8, scale: 1.0, bias: 0.0, reuse: false}   # scale/bias need dtype float32
//
// Loading is strict: an unknown key (with the nearest known key suggested), a
// wrong type, an out-of-range value, a missing required key or a source path
// that does not exist throws ConfigError, whose message starts with where the
// text came from and the key's full path:
//   "configs/x.yaml: pool.refresh.mode: must be one of async, sync; got 'asnc' (line 12)"
//
// Python dicts load through the same code: the binding sends json.dumps(d),
// which is valid YAML, to load_config_string (JSON null means "use the default"
// for optional keys, like YAML's null / ~).
//
// Thread safety: the functions are pure (they read the file system, nothing
// else); a Config is a plain value.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "engine/pool/refresh_mode.h"
#include "kernels/pipeline_spec.h"

namespace obsaug {

// A config that fails to load or validate. what() is the full message;
// origin() and key() name where (e.g. "configs/x.yaml" and "pool.refresh.mode").
class ConfigError : public std::invalid_argument {
 public:
  ConfigError(std::string origin, std::string key, const std::string& message);
  const std::string& origin() const { return origin_; }
  const std::string& key() const { return key_; }

 private:
  std::string origin_;
  std::string key_;
};

enum class OutputDtype { kUint8, kFloat32 };

struct FramesConfig {
  int64_t stack = 3;     // S: frames stacked per observation, >= 1
  int64_t channels = 3;  // C: 3 (RGB, e.g. DMControl) or 1 (grayscale, e.g. Atari)
  int64_t height = 84;   // H of the observations the engine receives
  int64_t width = 84;    // W
};

struct RefreshConfig {
  // Background decoder threads (async mode). 0: the pool is filled once and
  // never refreshed.
  int64_t threads = 1;
  // Cap on images decoded per second across threads (async mode); 0: no
  // cap, else at least kMinMaxPerSecond (refresh_mode.h).
  double max_per_second = 0.0;
  // async: threads refresh in the background (fast, not reproducible).
  // sync: `per_call` images per augment call from a seeded file order (exact).
  RefreshMode mode = RefreshMode::kAsync;
  int64_t per_call = 8;  // sync mode: images replaced per augment call, >= 1
};

struct PoolConfig {
  int64_t size = 1024;  // P: images resident in the pool, >= 1
  // Hp x Wp of the pool images. 0 x 0 in the file means "infer": after loading
  // it holds the frame size at the (first) overlay's stage, i.e. after any crop
  // before it. Stays 0 x 0 when the pipeline has no overlay and none was given.
  int64_t image_height = 0;
  int64_t image_width = 0;
  // Directories (scanned recursively), .txt lists, .tar shards. After loading,
  // each is an absolute, lexically normal path that exists (see load_config_file).
  std::vector<std::string> sources;
  RefreshConfig refresh;
};

struct OutputConfig {
  OutputDtype dtype = OutputDtype::kUint8;
  // float32 output only: out = v * scale + bias (e.g. 1/255 and -0.5 for DrQ-v2).
  double scale = 1.0;
  double bias = 0.0;
  // Keep the output tensors between calls instead of allocating one per call
  // (engine/engine.h, "Reused outputs"): a result is valid until the next
  // call that writes the same buffer.
  bool reuse = false;
};

struct Config {
  std::string device = "cpu";  // "cpu", "cuda" or "cuda:N"
  uint64_t seed = 0;
  FramesConfig frames;
  Pipeline pipeline;  // ordered; op k draws with index k unless it sets its own
  PoolConfig pool;
  OutputConfig output;
  // Where the config came from (a file path, or the origin name given to
  // load_config_string); used in later error messages. Not part of ==.
  std::string origin = "<defaults>";
};

// Field-by-field equality of everything but `origin` (doubles compared exactly).
bool operator==(const Config& a, const Config& b);
inline bool operator!=(const Config& a, const Config& b) { return !(a == b); }

// The most text a config may hold (a file, or a dict's text): configs are a
// few KiB; a larger one is refused (ConfigError) before it is parsed.
inline constexpr uint64_t kMaxConfigBytes = uint64_t{16} << 20;

// Loads and validates a YAML file: a regular file only (a directory, a FIFO
// or a device such as /dev/zero is refused by its kind before any read; no
// read blocks) of at most kMaxConfigBytes. Relative pool.sources resolve against the
// current working directory first, then against the repository root inferred
// as the parent of the config file's folder (configs/x.yaml -> ./), so the
// presets work from any working directory, then against `base_dir` when it
// is not empty (the checkout: Python passes the one it lies in, the CLI the
// one it was built in, as for load_config_string). A source spelt
// data/photos (or ./data/photos, data/photos/) is the embedded photographs,
// found in find_embedded_photos' order with those folders as its roots.
Config load_config_file(const std::string& path, const std::string& base_dir = "");

// Loads and validates YAML (or JSON) text. `origin` names the text in errors
// (e.g. "<dict>"). Relative pool.sources resolve against the current working
// directory, then against `base_dir` when it is not empty (data/photos as for
// a file, with these roots; Python passes the checkout it lies in).
Config load_config_string(const std::string& text, const std::string& origin = "<string>",
                          const std::string& base_dir = "");

// The resolved config as YAML, every key spelled out (inferred pool image
// size and absolute source paths included); load_config_string(describe(c))
// gives a Config equal to c.
std::string describe(const Config& config);

// The geometry resolve_pipeline needs for observations of this config's frame
// size (pool_size 0 when the pipeline has no overlay).
FrameGeometry frame_geometry(const Config& config);

// Frame size (height, width) after the first `n_ops` ops of the pipeline
// (all of them by default): the output frame size. Reads frame_sizes
// (kernels/pipeline_spec.h).
std::pair<int64_t, int64_t> frame_size_after(const Config& config, size_t n_ops = SIZE_MAX);

const char* to_string(RefreshMode mode);
const char* to_string(OutputDtype dtype);

}  // namespace obsaug

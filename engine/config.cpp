// Loading, validating and printing obsaug::Config (see config.h). The schema
// is walked by hand, key by key, so every error can name the key's full path
// ("pool.refresh.mode", "pipeline[1].alpha") and what would be right. A
// pipeline op's keys, types and ranges are the op schema's
// (kernels/op_schema.h): this file asks it and adds the path and the line.
#include "engine/config.h"

#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <tuple>

#include "engine/locations.h"
#include "files/bounded_file.h"

namespace obsaug {

ConfigError::ConfigError(std::string origin, std::string key, const std::string& message)
    : std::invalid_argument(origin + ": " + (key.empty() ? "" : key + ": ") + message),
      origin_(std::move(origin)),
      key_(std::move(key)) {}

const char* to_string(RefreshMode mode) { return mode == RefreshMode::kSync ? "sync" : "async"; }
const char* to_string(OutputDtype dtype) {
  return dtype == OutputDtype::kFloat32 ? "float32" : "uint8";
}

namespace {

namespace fs = std::filesystem;
using Keys = std::vector<std::string>;

constexpr int64_t kMaxFrameSide = int64_t{1} << 30;  // as resolve_pipeline
constexpr int64_t kMaxStack = kMaxFrames - 1;        // s < 0x8000 in the Philox counter
constexpr int64_t kMaxPool = std::numeric_limits<int32_t>::max();
constexpr int64_t kMaxThreads = 1024;

const Keys kTopKeys = {"device", "seed", "frames", "pipeline", "pool", "output"};
const Keys kFramesKeys = {"stack", "channels", "height", "width"};
const Keys kPoolKeys = {"size", "image_size", "sources", "refresh"};
const Keys kRefreshKeys = {"threads", "max_per_second", "mode", "per_call"};
const Keys kOutputKeys = {"dtype", "scale", "bias", "reuse"};

std::string join(const Keys& keys, const char* sep = ", ") {
  std::string out;
  for (size_t i = 0; i < keys.size(); ++i) out += (i ? sep : "") + keys[i];
  return out;
}

bool contains(const Keys& keys, const std::string& key) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

size_t levenshtein(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// The known word closest to `word`, when it is close enough to be a typo.
std::optional<std::string> nearest(const std::string& word, const Keys& known) {
  std::optional<std::string> best;
  size_t best_distance = std::numeric_limits<size_t>::max();
  for (const std::string& candidate : known) {
    const size_t d = levenshtein(word, candidate);
    if (d < best_distance) best_distance = d, best = candidate;
  }
  const size_t limit = std::max<size_t>(2, std::max(word.size(), best ? best->size() : 0) / 2);
  if (best && best_distance <= limit) return best;
  return std::nullopt;
}

// File-system queries through POSIX rather than std::filesystem's operations:
// libtorch exports its own copies of those (std::filesystem::remove_all,
// status, current_path, ...), which interpose on libstdc++'s in any process
// that links torch, and some of them crash there (remove_all of a non-empty
// folder jumps to a null pointer). fs::path itself (pure string work) is safe.
bool path_exists(const fs::path& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0;
}

fs::path working_directory() {
  std::vector<char> buffer(4096);
  while (::getcwd(buffer.data(), buffer.size()) == nullptr) {
    if (errno != ERANGE) return fs::path();
    buffer.resize(buffer.size() * 2);
  }
  return fs::path(buffer.data());
}

fs::path absolute_path(const fs::path& path) {
  return (path.is_absolute() ? path : working_directory() / path).lexically_normal();
}

std::string size_text(int64_t h, int64_t w) { return std::to_string(h) + "x" + std::to_string(w); }

// The state of one load: where the text came from and where relative paths go.
class Loader {
 public:
  Loader(std::string origin, bool show_lines, std::vector<fs::path> fallback_dirs)
      : origin_(std::move(origin)),
        show_lines_(show_lines),
        fallback_dirs_(std::move(fallback_dirs)) {}

  Config load(const YAML::Node& root);

 private:
  [[noreturn]] void fail(const std::string& key, const std::string& message,
                         const YAML::Node& at = YAML::Node()) const {
    std::string text = message;
    if (show_lines_ && at.IsDefined() && at.Mark().line >= 0)
      text += " (line " + std::to_string(at.Mark().line + 1) + ")";
    throw ConfigError(origin_, key, text);
  }

  static std::string got(const YAML::Node& node) {
    if (!node.IsDefined() || node.IsNull()) return "null";
    if (node.IsSequence()) return "a list";
    if (node.IsMap()) return "a mapping";
    if (node.Tag() == "!") return "the string '" + node.Scalar() + "'";
    return "'" + node.Scalar() + "'";
  }

  // A plain (unquoted) scalar: numbers and booleans must not be quoted.
  static bool plain_scalar(const YAML::Node& node) { return node.IsScalar() && node.Tag() != "!"; }

  // Checks that `node` is a mapping (null counts as an empty one) whose keys
  // are all known and given once.
  void check_map(const std::string& path, const YAML::Node& node, const Keys& known,
                 const std::string& what) const {
    if (!node.IsDefined() || node.IsNull()) return;
    if (!node.IsMap())
      fail(path, "expected a mapping with keys " + join(known) + ", got " + got(node), node);
    Keys seen;
    for (const auto& entry : node) {
      const YAML::Node& key_node = entry.first;
      if (!key_node.IsScalar())
        fail(path, "keys must be names (" + join(known) + "), got " + got(key_node), key_node);
      const std::string key = key_node.Scalar();
      const std::string key_path = child(path, key);
      if (!contains(known, key)) {
        const auto suggestion = nearest(key, known);
        fail(key_path,
             "unknown key" + (suggestion ? "; did you mean '" + *suggestion + "'?" : ".") +
                 " Known keys " + what + ": " + join(known),
             key_node);
      }
      if (contains(seen, key)) fail(key_path, "given twice", key_node);
      seen.push_back(key);
    }
  }

  static std::string child(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }

  // The value at `key` of a checked mapping, or an undefined node; null
  // counts as absent ("use the default").
  static YAML::Node value(const YAML::Node& map, const std::string& key) {
    if (!map.IsDefined() || !map.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
    const YAML::Node found = map[key];
    if (!found || found.IsNull()) return YAML::Node(YAML::NodeType::Undefined);
    return found;
  }

  // YAML 1.1 (PyYAML, OmegaConf) reads a plain number with a leading zero as
  // octal (010 is 8), or with an 8 or 9 in it as a string, where this loader
  // (YAML 1.2) reads decimal: such a number is refused, so that a file means
  // the same through yaml.safe_load and Engine(dict) as loaded here.
  void refuse_leading_zero(const std::string& path, const YAML::Node& node) const {
    if (!plain_scalar(node)) return;
    const std::string& text = node.Scalar();
    const size_t from = !text.empty() && (text[0] == '-' || text[0] == '+') ? 1 : 0;
    if (text.size() < from + 2 || text[from] != '0' ||
        text.find_first_not_of("0123456789", from) != std::string::npos)
      return;
    const size_t first_digit = text.find_first_not_of('0', from);
    const std::string magnitude = first_digit == std::string::npos ? "0" : text.substr(first_digit);
    const std::string sign = text[0] == '-' && magnitude != "0" ? "-" : "";
    const std::string decimal = sign + magnitude;
    if (text.find_first_of("89") != std::string::npos)
      fail(path, "ambiguous: YAML 1.1 reads " + text + " as a string; write " + decimal, node);
    errno = 0;
    const unsigned long long value = std::strtoull(text.c_str() + from, nullptr, 8);
    if (errno == ERANGE)
      fail(path, "ambiguous: YAML 1.1 reads " + text + " as octal; write " + decimal, node);
    const std::string octal = (value == 0 ? "" : sign) + std::to_string(value);
    fail(path,
         "ambiguous: YAML 1.1 reads " + text + " as octal " + octal + "; write " + decimal +
             (octal == decimal ? "" : " or " + octal),
         node);
  }

  int64_t get_int(const std::string& path, const YAML::Node& node, int64_t lo, int64_t hi) const {
    refuse_leading_zero(path, node);
    const std::string text = node.IsScalar() ? node.Scalar() : "";
    // The allowed values, for messages ("" when the caller checks them).
    std::string range = "in " + std::to_string(lo) + ".." + std::to_string(hi);
    if (hi == std::numeric_limits<int64_t>::max())
      range = lo == std::numeric_limits<int64_t>::min() ? "" : ">= " + std::to_string(lo);
    char* end = nullptr;
    errno = 0;
    const long long parsed = plain_scalar(node) ? std::strtoll(text.c_str(), &end, 10) : 0;
    if (!plain_scalar(node) || text.empty() || *end != '\0')
      fail(path, "expected an integer" + (range.empty() ? "" : " " + range) + ", got " + got(node),
           node);
    if (errno == ERANGE || parsed < lo || parsed > hi)  // ERANGE: digits beyond int64
      fail(path, "must be " + (range.empty() ? "a 64-bit integer" : range) + ", got " + text, node);
    return parsed;
  }

  uint64_t get_uint64(const std::string& path, const YAML::Node& node) const {
    refuse_leading_zero(path, node);
    const std::string text = node.IsScalar() ? node.Scalar() : "";
    const std::string range = "0..18446744073709551615";
    const bool plain = plain_scalar(node) && !text.empty();
    const size_t digits_from = plain && (text[0] == '-' || text[0] == '+') ? 1 : 0;
    if (!plain || text.size() == digits_from ||
        text.find_first_not_of("0123456789", digits_from) != std::string::npos)
      fail(path, "expected an integer in " + range + ", got " + got(node), node);
    errno = 0;
    const unsigned long long parsed = std::strtoull(text.c_str() + digits_from, nullptr, 10);
    if (errno == ERANGE || (text[0] == '-' && parsed != 0))
      fail(path, "must be in " + range + ", got " + text, node);
    return parsed;
  }

  double get_double(const std::string& path, const YAML::Node& node) const {
    refuse_leading_zero(path, node);
    const std::string text = node.IsScalar() ? node.Scalar() : "";
    char* end = nullptr;
    const double parsed = plain_scalar(node) ? std::strtod(text.c_str(), &end) : 0.0;
    const bool hex = text.find_first_of("xX") != std::string::npos;
    if (!plain_scalar(node) || text.empty() || *end != '\0' || hex || !std::isfinite(parsed))
      fail(path, "expected a finite number, got " + got(node), node);
    return parsed;
  }

  bool get_bool(const std::string& path, const YAML::Node& node) const {
    const std::string text = node.IsScalar() ? node.Scalar() : "";
    if (plain_scalar(node)) {
      if (text == "true" || text == "True" || text == "TRUE") return true;
      if (text == "false" || text == "False" || text == "FALSE") return false;
    }
    fail(path, "expected true or false, got " + got(node), node);
  }

  std::string get_string(const std::string& path, const YAML::Node& node) const {
    if (!node.IsScalar()) fail(path, "expected a string, got " + got(node), node);
    return node.Scalar();
  }

  std::string get_choice(const std::string& path, const YAML::Node& node,
                         const Keys& choices) const {
    std::string text = get_string(path, node);
    if (contains(choices, text)) return text;
    std::string message = "must be one of " + join(choices) + "; got '" + text + "'";
    if (auto suggestion = nearest(text, choices))
      message += " (did you mean '" + *suggestion + "'?)";
    fail(path, message, node);
  }

  // N or [height, width], each side in lo..hi.
  std::pair<int64_t, int64_t> get_size(const std::string& path, const YAML::Node& node, int64_t lo,
                                       int64_t hi) const {
    if (node.IsSequence()) {
      if (node.size() != 2)
        fail(path,
             "expected an integer or [height, width], got a list of " + std::to_string(node.size()),
             node);
      return {get_int(path + "[0]", node[0], lo, hi), get_int(path + "[1]", node[1], lo, hi)};
    }
    if (!plain_scalar(node))
      fail(path, "expected an integer or [height, width], got " + got(node), node);
    const int64_t side = get_int(path, node, lo, hi);
    return {side, side};
  }

  // A value of `key`'s type; its range is the schema's to check (check_op).
  KeyValue get_value(const std::string& path, const YAML::Node& node, const KeySpec& key) const {
    constexpr int64_t lo = std::numeric_limits<int64_t>::min();
    constexpr int64_t hi = std::numeric_limits<int64_t>::max();
    switch (key.type) {
      case KeyType::kInt:
        return get_int(path, node, lo, hi);
      case KeyType::kFloat:
        return get_double(path, node);
      case KeyType::kBool:
        return get_bool(path, node);
      case KeyType::kEnum:
        return get_choice(path, node, key.choices);
      case KeyType::kSize: {
        const auto [h, w] = get_size(path, node, lo, hi);
        return FrameSize{h, w};
      }
    }
    return std::monostate{};
  }

  void load_frames(const YAML::Node& node, FramesConfig* frames) const;
  void load_pipeline(const YAML::Node& node, const FramesConfig& frames, Pipeline* pipeline);
  OpSpec load_op(const std::string& path, const YAML::Node& node) const;
  void load_pool(const YAML::Node& node, const Config& config, PoolConfig* pool) const;
  std::string resolve_source(const std::string& path, const YAML::Node& node) const;
  void load_output(const YAML::Node& node, OutputConfig* output) const;

  std::string origin_;
  bool show_lines_;
  std::vector<fs::path> fallback_dirs_;
  std::vector<YAML::Node> op_nodes_;  // for errors that point back at an op
};

Config Loader::load(const YAML::Node& root) {
  if (!root.IsDefined() || root.IsNull())
    fail("", "the config is empty; expected a mapping with keys " + join(kTopKeys));
  check_map("", root, kTopKeys, "at the top level");
  Config config;
  config.origin = origin_;
  if (const YAML::Node device = value(root, "device")) {
    const std::string text = get_string("device", device);
    bool ok = text == "cpu" || text == "cuda";
    if (!ok && text.rfind("cuda:", 0) == 0 && text.size() > 5 && text.size() <= 9)
      ok = text.find_first_not_of("0123456789", 5) == std::string::npos;
    if (!ok)
      fail("device", "must be cpu, cuda or cuda:N (N a GPU index); got '" + text + "'", device);
    config.device = text;
  }
  if (const YAML::Node seed = value(root, "seed")) config.seed = get_uint64("seed", seed);
  load_frames(root["frames"], &config.frames);
  load_pipeline(root["pipeline"], config.frames, &config.pipeline);
  load_pool(root["pool"], config, &config.pool);
  load_output(root["output"], &config.output);
  return config;
}

void Loader::load_frames(const YAML::Node& node, FramesConfig* frames) const {
  check_map("frames", node, kFramesKeys, "under frames");
  if (const YAML::Node v = value(node, "stack"))
    frames->stack = get_int("frames.stack", v, 1, kMaxStack);
  if (const YAML::Node v = value(node, "channels")) {
    frames->channels = get_int("frames.channels", v, std::numeric_limits<int64_t>::min(),
                               std::numeric_limits<int64_t>::max());
    if (frames->channels != 1 && frames->channels != 3)
      fail("frames.channels", "must be 1 (grayscale) or 3 (RGB), got " + v.Scalar(), v);
  }
  if (const YAML::Node v = value(node, "height"))
    frames->height = get_int("frames.height", v, 1, kMaxFrameSide);
  if (const YAML::Node v = value(node, "width"))
    frames->width = get_int("frames.width", v, 1, kMaxFrameSide);
}

OpSpec Loader::load_op(const std::string& path, const YAML::Node& node) const {
  if (!node.IsMap())
    fail(path, "expected an op mapping such as {op: shift, pad: 4}, got " + got(node), node);
  Keys given;  // each a name, once (check_map below says the same for known keys)
  for (const auto& entry : node) {
    if (!entry.first.IsScalar())
      fail(path, "keys must be names such as op or pad, got " + got(entry.first), entry.first);
    const std::string key = entry.first.Scalar();
    if (contains(given, key)) fail(child(path, key), "given twice", entry.first);
    given.push_back(key);
  }
  const YAML::Node name_node = value(node, "op");
  if (!name_node && contains(given, "op"))
    fail(path + ".op", "must be one of " + op_name_list() + "; got null", node["op"]);
  if (!name_node) {
    // Name the keys that were given, so the op is easy to find.
    fail(path,
         "missing 'op' (one of " + op_name_list() + ") in the op with keys " +
             (given.empty() ? "(none)" : join(given)),
         node);
  }
  Keys names;
  for (const OpSchema& op : op_schemas()) names.push_back(op.name);
  const OpSchema& schema = *find_op_schema(get_choice(path + ".op", name_node, names));
  Keys known = {"op"};
  for (const KeySpec& key : schema.keys) known.push_back(key.name);
  for (const auto& entry : node) {
    const std::string key = entry.first.IsScalar() ? entry.first.Scalar() : "";
    if (contains(known, key)) continue;
    for (const OpSchema& other : op_schemas()) {
      if (other.key_position(key) >= 0)
        fail(
            child(path, key),
            "does not apply to " + schema.name + "; " + schema.name + " takes " + schema.key_list(),
            entry.first);
    }
  }
  check_map(path, node, known, "for " + schema.name);

  OpSpec op(schema.kind);
  for (const KeySpec& key : schema.keys) {
    if (const YAML::Node v = value(node, key.name))
      op.set(key.name, get_value(path + "." + key.name, v, key));
  }
  if (const std::optional<KeyProblem> problem = check_op(op)) {
    if (std::holds_alternative<std::monostate>(op.value(problem->key)))
      fail(path, problem->message, node);  // a required key is missing
    fail(path + "." + problem->key, problem->message, value(node, problem->key));
  }
  return op;
}

void Loader::load_pipeline(const YAML::Node& node, const FramesConfig& frames, Pipeline* pipeline) {
  if (!node.IsDefined() || node.IsNull()) return;
  if (!node.IsSequence())
    fail("pipeline", "expected a list of ops such as [{op: shift, pad: 4}], got " + got(node),
         node);
  if (node.size() > static_cast<size_t>(kMaxOps))
    fail("pipeline",
         "holds at most " + std::to_string(kMaxOps) + " ops, got " + std::to_string(node.size()),
         node);
  for (size_t k = 0; k < node.size(); ++k) {
    pipeline->push_back(load_op("pipeline[" + std::to_string(k) + "]", node[k]));
    op_nodes_.push_back(node[k]);
  }
  const FrameSizeWalk walk = walk_frame_sizes(*pipeline, {frames.height, frames.width});
  if (walk.failed_op) {
    const size_t k = *walk.failed_op;
    const std::string& size_key = (*pipeline)[k].schema().size_key;
    const std::string op_path = "pipeline[" + std::to_string(k) + "]";
    if (size_key.empty())  // an op that keeps the size but needs a shape (rotate: square)
      fail(op_path, walk.problem, node[k]);
    fail(op_path + "." + size_key, walk.problem, value(node[k], size_key));
  }
}

std::string Loader::resolve_source(const std::string& path, const YAML::Node& node) const {
  const std::string text = get_string(path, node);
  if (text.empty()) fail(path, "is empty; expected a directory, a .txt list or a .tar shard", node);
  if (text.find('\0') != std::string::npos)
    fail(path, "contains a NUL byte, which no file path can hold", node);
  const fs::path source(text);
  // The embedded photographs (however the path is spelt: data/photos/,
  // ./data/photos) have their own lookup order.
  fs::path normal = source.lexically_normal();
  if (!normal.empty() && !normal.has_filename()) normal = normal.parent_path();  // a trailing '/'
  if (normal == fs::path(kEmbeddedPhotos)) {
    std::vector<std::string> roots{working_directory().string()};
    for (const fs::path& dir : fallback_dirs_) roots.push_back(dir.string());
    try {
      return find_embedded_photos(roots);
    } catch (const std::invalid_argument& e) {
      fail(path, e.what(), node);
    }
  }
  std::vector<fs::path> candidates;
  if (source.is_absolute()) {
    candidates.push_back(source);
  } else {
    candidates.push_back(working_directory() / source);
    for (const fs::path& dir : fallback_dirs_) candidates.push_back(dir / source);
  }
  for (const fs::path& candidate : candidates)
    if (path_exists(candidate)) return absolute_path(candidate).string();
  Keys looked;
  for (const fs::path& candidate : candidates)
    if (!contains(looked, absolute_path(candidate).string()))
      looked.push_back(absolute_path(candidate).string());
  std::string lower = text;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  std::string hint;
  if (lower.find("places365") != std::string::npos) {
    hint =
        "Places365 is not shipped with obsaug: download "
        "http://data.csail.mit.edu/places/places365/places365standard_easyformat.tar and "
        "unpack it into data/ (tar -xf places365standard_easyformat.tar -C data), which "
        "creates data/places365_standard/{train,val}/<class>/*.jpg, or point this source at "
        "your copy. Without it, configs/default.yaml uses the embedded photos "
        "(`bash scripts/fetch_photos.sh`).";
  } else if (source.filename() == "photos") {
    hint = "The embedded photos are fetched by `bash scripts/fetch_photos.sh` (into data/photos).";
  } else {
    hint =
        "A source is a folder of .jpg/.jpeg/.png images, a .txt list of image paths or a "
        ".tar shard; the embedded photos are fetched by `bash scripts/fetch_photos.sh` "
        "(into data/photos).";
  }
  fail(path, "'" + text + "' does not exist (looked for " + join(looked) + "). " + hint, node);
}

void Loader::load_pool(const YAML::Node& node, const Config& config, PoolConfig* pool) const {
  check_map("pool", node, kPoolKeys, "under pool");
  if (const YAML::Node v = value(node, "size")) pool->size = get_int("pool.size", v, 1, kMaxPool);
  const YAML::Node image_size = value(node, "image_size");
  if (image_size)
    std::tie(pool->image_height, pool->image_width) =
        get_size("pool.image_size", image_size, 1, kMaxFrameSide);

  const YAML::Node refresh = value(node, "refresh");
  check_map("pool.refresh", refresh, kRefreshKeys, "under pool.refresh");
  RefreshConfig& r = pool->refresh;
  if (const YAML::Node v = value(refresh, "threads"))
    r.threads = get_int("pool.refresh.threads", v, 0, kMaxThreads);
  if (const YAML::Node v = value(refresh, "max_per_second")) {
    r.max_per_second = get_double("pool.refresh.max_per_second", v);
    if (r.max_per_second != 0 && !(r.max_per_second >= kMinMaxPerSecond)) {
      std::ostringstream range;
      range << "must be 0 (no cap) or >= " << kMinMaxPerSecond << " images per second, got ";
      fail("pool.refresh.max_per_second", range.str() + v.Scalar(), v);
    }
  }
  if (const YAML::Node v = value(refresh, "mode"))
    r.mode = get_choice("pool.refresh.mode", v, {"async", "sync"}) == "sync" ? RefreshMode::kSync
                                                                             : RefreshMode::kAsync;
  const YAML::Node per_call = value(refresh, "per_call");
  if (per_call) r.per_call = get_int("pool.refresh.per_call", per_call, 0, kMaxPool);
  if (r.mode == RefreshMode::kSync && r.per_call < 1)
    fail("pool.refresh.per_call",
         "must be >= 1 in sync mode (images replaced per augment call), got " +
             std::to_string(r.per_call),
         per_call);
  if (r.mode == RefreshMode::kSync && r.per_call > pool->size)
    fail("pool.refresh.per_call",
         "must be at most pool.size (" + std::to_string(pool->size) + ") in sync mode, got " +
             std::to_string(r.per_call),
         per_call);

  const YAML::Node sources = value(node, "sources");
  if (sources) {
    if (!sources.IsSequence())
      fail("pool.sources", "expected a list of paths such as [data/photos], got " + got(sources),
           sources);
    for (size_t i = 0; i < sources.size(); ++i)
      pool->sources.push_back(
          resolve_source("pool.sources[" + std::to_string(i) + "]", sources[i]));
  }

  // The frame size each overlay sees: one pool serves them all.
  const std::vector<FrameSize> sizes =
      frame_sizes(config.pipeline, {config.frames.height, config.frames.width});
  std::optional<size_t> first_overlay;
  for (size_t k = 0; k < config.pipeline.size(); ++k) {
    const std::string path = "pipeline[" + std::to_string(k) + "]";
    const int64_t h = sizes[k].height;
    const int64_t w = sizes[k].width;
    if (config.pipeline[k].schema().needs.mixes_channels && config.frames.channels != 3)
      fail(path,
           config.pipeline[k].schema().name +
               " needs RGB frames (C = 3 channels per stacked frame), got frames.channels = " +
               std::to_string(config.frames.channels),
           op_nodes_[k]);
    if (config.pipeline[k].schema().needs.pool) {
      if (!first_overlay) {
        first_overlay = k;
        if (pool->sources.empty())
          fail("pool.sources",
               "the pipeline has an overlay (" + path +
                   ") but no pool sources; give folders of "
                   "photos, e.g. pool: {sources: [data/photos]} (fetched by "
                   "`bash scripts/fetch_photos.sh`)",
               node);
        if (image_size && (pool->image_height != h || pool->image_width != w))
          fail("pool.image_size",
               size_text(pool->image_height, pool->image_width) + " does not match the " +
                   size_text(h, w) + " frames the overlay " + path + " sees; use [" +
                   std::to_string(h) + ", " + std::to_string(w) +
                   "] or leave image_size out (obsaug never resizes silently)",
               image_size);
        pool->image_height = h;
        pool->image_width = w;
      } else if (pool->image_height != h || pool->image_width != w) {
        fail(path,
             "this overlay sees " + size_text(h, w) + " frames but pipeline[" +
                 std::to_string(*first_overlay) + "] sees " +
                 size_text(pool->image_height, pool->image_width) +
                 "; one pool has one image size, so every overlay must see the same size",
             op_nodes_[k]);
      }
    }
  }
}

void Loader::load_output(const YAML::Node& node, OutputConfig* output) const {
  check_map("output", node, kOutputKeys, "under output");
  if (const YAML::Node v = value(node, "dtype"))
    output->dtype = get_choice("output.dtype", v, {"uint8", "float32"}) == "float32"
                        ? OutputDtype::kFloat32
                        : OutputDtype::kUint8;
  const YAML::Node scale = value(node, "scale");
  const YAML::Node bias = value(node, "bias");
  if (scale) output->scale = get_double("output.scale", scale);
  if (bias) output->bias = get_double("output.bias", bias);
  if (const YAML::Node v = value(node, "reuse")) output->reuse = get_bool("output.reuse", v);
  if (output->dtype == OutputDtype::kUint8) {
    if (output->scale != 1.0)
      fail("output.scale",
           "applies only to float32 output (out = v * scale + bias); set "
           "output.dtype: float32 or drop scale (uint8 output needs scale 1)",
           scale);
    if (output->bias != 0.0)
      fail("output.bias",
           "applies only to float32 output (out = v * scale + bias); set "
           "output.dtype: float32 or drop bias (uint8 output needs bias 0)",
           bias);
  }
  if (const std::string problem = output_affine_problem(output->scale, output->bias);
      !problem.empty()) {
    // The scale when it is wrong on its own, else the bias (alone or with it).
    const bool scale_wrong = !output_affine_problem(output->scale, 0.0).empty();
    fail(scale_wrong ? "output.scale" : "output.bias", problem, scale_wrong ? scale : bias);
  }
}

// The documents with content in a YAML stream, by their markers ("---" /
// "..." at the start of a line; "%" directives before a "---" are not
// content, nor is an empty document). Counted by hand: yaml-cpp 0.7's LoadAll can loop
// forever on some malformed input (e.g. ",{"; fixed upstream in 0.8, found by
// tests/fuzz/fuzz_config), so the config is parsed with Load, which reads one
// document, and a second one is refused here.
size_t yaml_documents(const std::string& text) {
  size_t documents = 0;
  bool content = false;  // the current document has content
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(pos, end - pos);
    const auto marker = [&](const char* m) {
      return line.compare(0, 3, m) == 0 &&
             (line.size() == 3 || line[3] == ' ' || line[3] == '\t' || line[3] == '\r');
    };
    const size_t first = line.find_first_not_of(" \t\r");
    const bool blank = first == std::string::npos || line[first] == '#';
    if (marker("---")) {
      // A document of its own once it has content (here, after the marker,
      // or on a later line): a trailing "---" alone adds no document.
      content = false;
      const size_t rest = line.find_first_not_of(" \t\r", 3);
      if (rest != std::string::npos && line[rest] != '#') {
        ++documents;
        content = true;
      }
    } else if (marker("...")) {
      content = false;
    } else if (!content && line[0] == '%') {
      // A directive (%YAML 1.2, %TAG ...): it precedes its document's "---".
    } else if (!blank) {
      if (!content) ++documents;
      content = true;
    }
    pos = end + 1;
  }
  return documents;
}

Config load_text(const std::string& text, const std::string& origin,
                 std::vector<fs::path> fallback_dirs) {
  if (text.size() > kMaxConfigBytes) {
    throw ConfigError(origin, "",
                      "holds " + std::to_string(text.size()) + " bytes, more than the limit of " +
                          std::to_string(kMaxConfigBytes) + " for a config");
  }
  const size_t count = yaml_documents(text);
  if (count > 1)
    throw ConfigError(
        origin, "", "holds " + std::to_string(count) + " YAML documents; a config is one document");
  YAML::Node document;
  try {
    document = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(origin, "",
                      "invalid YAML at line " + std::to_string(e.mark.line + 1) + ", column " +
                          std::to_string(e.mark.column + 1) + ": " + e.msg);
  }
  const size_t first = text.find_first_not_of(" \t\r\n");
  const bool multi_line =
      first != std::string::npos && text.find('\n', first) != std::string::npos &&
      text.find_first_not_of(" \t\r\n", text.find('\n', first)) != std::string::npos;
  Loader loader(origin, multi_line, std::move(fallback_dirs));
  try {
    return loader.load(document);
  } catch (const YAML::Exception& e) {  // should not happen: every access is checked
    throw ConfigError(origin, "", std::string("YAML error: ") + e.what());
  }
}

// A string as a YAML scalar: plain when that is unambiguous, else double-quoted.
std::string yaml_string(const std::string& text) {
  const bool plain = !text.empty() && text[0] != '-' &&
                     text.find_first_not_of(
                         "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./+-") ==
                         std::string::npos;
  if (plain) return text;
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", static_cast<unsigned char>(c));
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

bool operator==(const Config& a, const Config& b) {
  const FramesConfig& fa = a.frames;
  const FramesConfig& fb = b.frames;
  const PoolConfig& pa = a.pool;
  const PoolConfig& pb = b.pool;
  return a.device == b.device && a.seed == b.seed && fa.stack == fb.stack &&
         fa.channels == fb.channels && fa.height == fb.height && fa.width == fb.width &&
         a.pipeline == b.pipeline && pa.size == pb.size && pa.image_height == pb.image_height &&
         pa.image_width == pb.image_width && pa.sources == pb.sources &&
         pa.refresh.threads == pb.refresh.threads &&
         pa.refresh.max_per_second == pb.refresh.max_per_second &&
         pa.refresh.mode == pb.refresh.mode && pa.refresh.per_call == pb.refresh.per_call &&
         a.output.dtype == b.output.dtype && a.output.scale == b.output.scale &&
         a.output.bias == b.output.bias && a.output.reuse == b.output.reuse;
}

Config load_config_file(const std::string& path, const std::string& base_dir) {
  std::string text;
  try {  // a regular file only (a FIFO or /dev/zero is refused before any read), bounded
    text = files::read_bounded(path, kMaxConfigBytes, "the config file");
  } catch (const files::FileError& e) {
    throw ConfigError(path, "",
                      e.reason() +
                          "; expected a YAML config file such as "
                          "configs/default.yaml");
  }
  // The repository root, inferred as the parent of the config's folder.
  const fs::path folder = absolute_path(path).parent_path();
  std::vector<fs::path> fallback{folder.parent_path()};
  if (!base_dir.empty()) fallback.emplace_back(base_dir);
  return load_text(text, path, std::move(fallback));
}

Config load_config_string(const std::string& text, const std::string& origin,
                          const std::string& base_dir) {
  std::vector<fs::path> fallback;
  if (!base_dir.empty()) fallback.emplace_back(base_dir);
  return load_text(text, origin, std::move(fallback));
}

std::string describe(const Config& config) {
  std::ostringstream out;
  const FramesConfig& f = config.frames;
  out << "device: " << config.device << "\n";  // validated: cpu, cuda or cuda:N
  out << "seed: " << config.seed << "\n";
  out << "frames: {stack: " << f.stack << ", channels: " << f.channels << ", height: " << f.height
      << ", width: " << f.width << "}\n";
  if (config.pipeline.empty())
    out << "pipeline: []\n";
  else
    out << "pipeline:\n";
  for (const OpSpec& op : config.pipeline) out << "  - " << format_op(op, OpStyle::kYaml) << "\n";
  const PoolConfig& p = config.pool;
  out << "pool:\n";
  out << "  size: " << p.size << "\n";
  if (p.image_height > 0 || p.image_width > 0)
    out << "  image_size: [" << p.image_height << ", " << p.image_width << "]\n";
  if (p.sources.empty())
    out << "  sources: []\n";
  else
    out << "  sources:\n";
  for (const std::string& source : p.sources) out << "    - " << yaml_string(source) << "\n";
  out << "  refresh: {threads: " << p.refresh.threads
      << ", max_per_second: " << format_number(p.refresh.max_per_second)
      << ", mode: " << to_string(p.refresh.mode) << ", per_call: " << p.refresh.per_call << "}\n";
  out << "output: {dtype: " << to_string(config.output.dtype)
      << ", scale: " << format_number(config.output.scale)
      << ", bias: " << format_number(config.output.bias)
      << ", reuse: " << (config.output.reuse ? "true" : "false") << "}\n";
  return out.str();
}

std::pair<int64_t, int64_t> frame_size_after(const Config& config, size_t n_ops) {
  const std::vector<FrameSize> sizes =
      frame_sizes(config.pipeline, {config.frames.height, config.frames.width});
  const FrameSize& size = sizes[std::min(n_ops, config.pipeline.size())];
  return {size.height, size.width};
}

FrameGeometry frame_geometry(const Config& config) {
  FrameGeometry g;
  g.height = config.frames.height;
  g.width = config.frames.width;
  g.frame_channels = config.frames.channels;
  g.channels_source = "frames.channels";
  if (has_overlay(config.pipeline)) {
    g.pool_size = config.pool.size;
    g.pool_h = config.pool.image_height;
    g.pool_w = config.pool.image_width;
  }
  return g;
}

}  // namespace obsaug

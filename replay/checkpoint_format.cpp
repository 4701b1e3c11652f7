// The replay checkpoint format (replay/checkpoint_format.h).
#include "replay/checkpoint_format.h"

#include <ATen/ops/empty.h>
#include <c10/core/ScalarType.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

#include "replay/replay_checks.h"

namespace obsaug::checkpoint {
namespace {

constexpr uint64_t kChecksumBytes = sizeof(uint64_t);
constexpr int64_t kFramePartBytes = int64_t{64} << 20;

template <typename T>
struct IsShape : std::false_type {};
template <typename V>
struct IsShape<Shape<V>> : std::true_type {};

uint64_t times(uint64_t count, uint64_t unit) {  // saturating: a hostile count never wraps
  uint64_t n = 0;
  return __builtin_mul_overflow(count, unit, &n) ? std::numeric_limits<uint64_t>::max() : n;
}

// Bytes from a file as message text: printable ASCII as it is, any other
// byte as \xNN, so a corrupt name still makes a readable (and valid UTF-8)
// error.
std::string printable(const std::string& bytes) {
  std::string out;
  for (const char c : bytes) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7f && c != '\\') {
      out += c;
    } else {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
      out += escaped;
    }
  }
  return out;
}

// --- one field ---------------------------------------------------------------

template <typename T>
void put(CheckpointWriter& w, const T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    w.value<uint8_t>(v ? 1 : 0);
  } else if constexpr (std::is_arithmetic_v<T>) {
    w.value<T>(v);
  } else if constexpr (std::is_same_v<T, at::ScalarType>) {
    w.text(c10::toString(v));
  } else {
    static_assert(IsShape<T>::value, "a checkpoint field is a number, bool, dtype or shape");
    if (v.counted) w.value<uint32_t>(static_cast<uint32_t>(v.sizes.size()));
    for (int64_t s : v.sizes) w.value<int64_t>(s);
  }
}

// Throws unless `n` more bytes are in the file, naming what they would hold.
void need(const CheckpointReader& r, uint64_t n, const std::string& what) {
  if (n > r.remaining()) {
    r.corrupt("it ends inside " + what + " (" + std::to_string(n) + " bytes needed, " +
              std::to_string(r.remaining()) + " left)");
  }
}

template <typename T>
void get(CheckpointReader& r, const std::string& what, T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    need(r, 1, what);
    v = r.value<uint8_t>() != 0;
  } else if constexpr (std::is_arithmetic_v<T>) {
    need(r, sizeof(T), what);
    v = r.value<T>();
  } else if constexpr (std::is_same_v<T, at::ScalarType>) {
    need(r, sizeof(uint32_t), what);
    const uint32_t length = r.value<uint32_t>();
    if (length > kMaxDtypeName) r.corrupt(what + " of " + std::to_string(length) + " bytes");
    need(r, length, what);
    std::string name(length, '\0');
    r.bytes(name.data(), length);
    const auto* known = std::find_if(std::begin(kActionDtypes), std::end(kActionDtypes),
                                     [&](at::ScalarType t) { return name == c10::toString(t); });
    if (known == std::end(kActionDtypes))
      r.corrupt("unknown action dtype '" + printable(name) + "'");
    v = *known;
  } else {
    static_assert(IsShape<T>::value, "a checkpoint field is a number, bool, dtype or shape");
    uint32_t count = v.max;
    if (v.counted) {
      need(r, sizeof(uint32_t), what);
      count = r.value<uint32_t>();
      if (count > v.max) r.corrupt(what + " with " + std::to_string(count) + " dims");
    }
    need(r, times(count, sizeof(int64_t)), what);
    v.sizes.resize(count);
    for (int64_t& s : v.sizes) s = r.value<int64_t>();
  }
}

// --- records -----------------------------------------------------------------

// Record fields are plain numbers, stored as they are in memory.
template <typename Record, typename Table>
uint64_t record_bytes(Table table) {
  Record record{};
  uint64_t n = 0;
  table(record, [&](const char*, const auto& v) {
    using T = std::decay_t<decltype(v)>;
    static_assert(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>,
                  "a record field is a number");
    n += sizeof(T);
  });
  return n;
}

template <typename Record, typename Table>
void write_records(CheckpointWriter& w, const Record* records, uint64_t count, Table table) {
  for (uint64_t i = 0; i < count; ++i) {
    table(records[i], [&](const char*, const auto& v) { put(w, v); });
  }
}

// The caller checked that the section fits (need): no per-field checks.
template <typename Record, typename Table>
void read_records(CheckpointReader& r, Record* records, uint64_t count, Table table) {
  for (uint64_t i = 0; i < count; ++i) {
    table(records[i], [&](const char*, auto& v) { v = r.value<std::decay_t<decltype(v)>>(); });
  }
}

const auto kSlotTable = [](auto& s, auto&& field) { slot_fields(s, field); };
const auto kEnvTable = [](auto& e, auto&& field) { env_fields(e, field); };

// --- the body's sections -----------------------------------------------------

enum class Part { kSlots, kEnvCount, kEnvs, kPriorities, kActions, kFrames };

struct Section {
  const char* name;
  Part part;
  uint64_t count;  // units
  uint64_t unit;   // bytes each
  uint64_t bytes() const { return times(count, unit); }
};

uint64_t action_row_bytes(const ReplayOptions& o) {
  uint64_t n = c10::elementSize(o.action_dtype);
  for (int64_t s : o.action_shape) n = times(n, static_cast<uint64_t>(s));
  return n;
}

uint64_t frame_bytes(const ReplayOptions& o) {
  uint64_t n = 1;
  for (int64_t s : o.frame_shape) n = times(n, static_cast<uint64_t>(s));
  return n;
}

// The body in file order; `env_count` records in the env table.
std::vector<Section> body_sections(const Header& h, uint64_t env_count) {
  const ReplayOptions& o = h.options;
  const uint64_t size = static_cast<uint64_t>(stored_frames(h));
  return {{"the slot records", Part::kSlots, size, slot_record_bytes()},
          {"the env count", Part::kEnvCount, 1, sizeof(uint32_t)},
          {"the env records", Part::kEnvs, env_count, env_record_bytes()},
          {"the priorities", Part::kPriorities, o.prioritized ? size : 0, sizeof(double)},
          {"the actions", Part::kActions, size, action_row_bytes(o)},
          {"the frames", Part::kFrames, size, frame_bytes(o)}};
}

// Throws unless every section from `first` on, and the checksum after
// them, fits in what remains of the file, naming the first that does not.
void expect_sections(const CheckpointReader& r, const std::vector<Section>& sections,
                     size_t first) {
  uint64_t end = 0;  // bytes from here to the end of the section
  for (size_t i = first; i <= sections.size(); ++i) {
    const bool checksum = i == sections.size();
    const uint64_t n = checksum ? kChecksumBytes : sections[i].bytes();
    end = n > std::numeric_limits<uint64_t>::max() - end ? std::numeric_limits<uint64_t>::max()
                                                         : end + n;
    if (end > r.remaining()) {
      r.corrupt("it ends inside " + std::string(checksum ? "the checksum" : sections[i].name) +
                " (" + std::to_string(end) + " bytes needed from here, " +
                std::to_string(r.remaining()) + " left)");
    }
  }
}

// Frames cross between the device and the file in parts of about 64 MiB.
int64_t frames_per_part(const ReplayOptions& o) {
  return std::max<int64_t>(1, kFramePartBytes / static_cast<int64_t>(frame_bytes(o)));
}

}  // namespace

uint64_t slot_record_bytes() { return record_bytes<EpisodeRing::Slot>(kSlotTable); }
uint64_t env_record_bytes() { return record_bytes<EpisodeRing::Env>(kEnvTable); }

int64_t stored_frames(const Header& h) { return std::min(h.total_frames, h.options.capacity); }

void write_checkpoint(CheckpointWriter& w, const Header& h, const Body& body) {
  w.bytes(kMagic, sizeof(kMagic));
  w.value<uint32_t>(kVersion);
  header_fields(h, [&](const char*, const auto& v) { put(w, v); });
  w.checksum_so_far();
  const int64_t size = stored_frames(h);
  for (const Section& s : body_sections(h, body.envs.size())) {
    switch (s.part) {
      case Part::kSlots:
        write_records(w, body.slots.data(), s.count, kSlotTable);
        break;
      case Part::kEnvCount:
        w.value<uint32_t>(static_cast<uint32_t>(body.envs.size()));
        break;
      case Part::kEnvs:
        write_records(w, body.envs.data(), s.count, kEnvTable);
        break;
      case Part::kPriorities:
        w.bytes(body.priorities.data(), s.bytes());
        break;
      case Part::kActions:
        w.bytes(body.actions.data_ptr(), s.bytes());
        break;
      case Part::kFrames:
        for (int64_t first = 0, part = frames_per_part(h.options); first < size; first += part) {
          const at::Tensor frames =
              body.frames.narrow(0, first, std::min(part, size - first)).to(at::kCPU).contiguous();
          w.bytes(frames.data_ptr(), frames.nbytes());
        }
        break;
    }
  }
}

Header read_header(CheckpointReader& r) {
  char magic[sizeof(kMagic)];
  need(r, sizeof(magic), "the magic");
  r.bytes(magic, sizeof(magic));
  if (std::memcmp(magic, kMagic, sizeof(kMagic)) != 0) {
    r.corrupt("it does not start with OBSAUGRB (not an obsaug replay checkpoint)");
  }
  uint32_t version = 0;
  get(r, "the format version", version);
  if (version != kVersion) {
    r.corrupt("format version " + std::to_string(version) + ", this obsaug reads version " +
              std::to_string(kVersion));
  }
  Header h;
  header_fields(h, [&](const char* name, auto&& v) {
    get(r, std::string("header field '") + name + "'", v);
  });
  need(r, kChecksumBytes, "the header checksum");
  r.check_so_far("header");
  // Every value in its range (as the running buffer keeps it) before a size
  // from the header is used; the sizes must then fit in the bytes that follow
  // before anything is allocated (read_links, read_arrays).
  const ReplayOptions& o = h.options;
  for (const auto& [name, sizes] :
       {std::pair{"frame_shape", &o.frame_shape}, std::pair{"action_shape", &o.action_shape}}) {
    for (int64_t s : *sizes) {
      if (s < 1 || s > kMaxSize) {
        r.corrupt(std::string("header field '") + name + "' holds the size " + std::to_string(s) +
                  ", outside [1, " + std::to_string(kMaxSize) + "]");
      }
    }
  }
  try {
    check_option_values(o, "");
  } catch (const std::invalid_argument& e) {
    r.corrupt(std::string("header: ") + e.what());
  }
  if (h.total_frames < 0 || h.total_frames > EpisodeRing::kMaxFrames) {
    r.corrupt("header field 'total_frames' is " + std::to_string(h.total_frames) +
              ", outside [0, 2^62 = " + std::to_string(EpisodeRing::kMaxFrames) +
              "] (the frames a buffer counts)");
  }
  if (h.sample_calls > kMaxSampleCalls) {
    r.corrupt("header field 'sample_calls' is " + std::to_string(h.sample_calls) +
              ", beyond 2^62 = " + std::to_string(kMaxSampleCalls) +
              " (the sample calls a buffer counts)");
  }
  return h;
}

Links read_links(CheckpointReader& r, const Header& h) {
  std::vector<Section> sections = body_sections(h, 0);
  Links links;
  size_t i = 0;
  for (; sections[i].part != Part::kPriorities; ++i) {
    const Section& s = sections[i];
    need(r, s.bytes(), s.name);
    switch (s.part) {
      case Part::kSlots:
        links.slots.resize(s.count);
        read_records(r, links.slots.data(), s.count, kSlotTable);
        break;
      case Part::kEnvCount:
        sections[i + 1].count = r.value<uint32_t>();  // the env records'
        if (sections[i + 1].count > static_cast<uint64_t>(EpisodeRing::kMaxEnvs)) {
          r.corrupt("the env count " + std::to_string(sections[i + 1].count) +
                    " is more than 2^20 (env ids lie in [0, 2^20))");
        }
        break;
      case Part::kEnvs:
        links.envs.resize(s.count);
        read_records(r, links.envs.data(), s.count, kEnvTable);
        break;
      default:
        break;
    }
  }
  expect_sections(r, sections, i);
  return links;
}

void read_arrays(CheckpointReader& r, const Header& h, double* priorities,
                 const at::Tensor& actions, const at::Tensor& frames) {
  const int64_t size = stored_frames(h);
  for (const Section& s : body_sections(h, 0)) {
    if (s.part < Part::kPriorities) continue;  // read_links read them
    need(r, s.bytes(), s.name);
    switch (s.part) {
      case Part::kPriorities:
        r.bytes(priorities, s.bytes());
        break;
      case Part::kActions:
        r.bytes(actions.data_ptr(), s.bytes());
        break;
      case Part::kFrames: {
        const int64_t part = frames_per_part(h.options);
        const at::Tensor host =
            at::empty({std::min(part, size), frames.size(1), frames.size(2), frames.size(3)},
                      at::TensorOptions().dtype(at::kByte));
        for (int64_t first = 0; first < size; first += part) {
          const at::Tensor chunk = host.narrow(0, 0, std::min(part, size - first));
          r.bytes(chunk.data_ptr(), chunk.nbytes());
          frames.narrow(0, first, chunk.size(0)).copy_(chunk);
        }
        break;
      }
      default:
        break;
    }
  }
  r.finish();
}

}  // namespace obsaug::checkpoint

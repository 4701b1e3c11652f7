// libFuzzer target: structure-aware fuzzing of the replay checkpoint loader.
// Byte-level fuzzing (fuzz_replay_checkpoint) never gets past the checksums;
// here the input is an edit script applied to a valid checkpoint, which is
// then resealed (both checksums recomputed, tests/replay/checkpoint_edit.h),
// so what the fuzzer meets is the validation after the checksums: the
// header's ranges, EpisodeRing::check_state, the actions and priorities.
//
// Input: byte 0 picks one of five base checkpoints (uniform and wrapped,
// prioritized, three envs with n-step 3, float16 actions, int64 actions);
// then up to 16 edits of 10 bytes each, [kind][index][8 value bytes]:
//   0 a header field (index picks it; the value raw, or from a table of
//     boundary values when value[0] has its high bit: 0, -1, 2^62, 2^62 + 1,
//     2^63 - 1, NaN, inf, ...), 1 a slot's prev or next (relative to its own
//     frame number, or raw), 2 a slot's terminated or ended flag, 3 a slot's
//     reward, 4 an env's last or open, 5 a priority, 6 an action element,
//     7 the whole ring moved by k capacities (every frame number, link and
//     env last; near the 2^62 cap when value[0] has its high bit).
// A loaded buffer must then take add_first, add and sample calls (and
// update_priorities when prioritized): refusals by std::invalid_argument
// (or std::overflow_error at the frame cap) are fine, anything else, or an
// ASan/UBSan report, is a finding. A header whose buffer would take more
// than 256 MiB (a capacity or frame edited up) is not loaded: a checkpoint's
// options allocate what the constructor allocates, which refuses a buffer
// larger than the machine (tested with the constructor), and the fuzzer's
// malloc limit is 2 GiB.
#include <ATen/ops/full.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "replay/checkpoint_format.h"
#include "replay/replay_buffer.h"
#include "tests/replay/checkpoint_edit.h"

namespace {

using obsaug::ReplayBuffer;
using obsaug::ReplayOptions;
using obsaug::testing::CheckpointEdit;

const std::string& work_dir() {
  static const std::string dir = [] {
    std::string d = "/tmp/obsaug_fuzz_fields_" + std::to_string(::getpid());
    ::mkdir(d.c_str(), 0755);
    return d;
  }();
  return dir;
}

at::Tensor frames_of(int64_t n, const ReplayOptions& o, int64_t value) {
  return at::full({n, o.frame_shape[0], o.frame_shape[1], o.frame_shape[2]}, value % 251,
                  at::TensorOptions().dtype(at::kByte));
}

CheckpointEdit base(ReplayOptions o, int64_t envs, int64_t steps, int64_t episode) {
  ReplayBuffer rb(o);
  const at::Tensor no = at::zeros({envs}, at::kBool);
  for (int64_t t = 0; t < steps; ++t) {
    if (t % episode == 0) {
      rb.add_first(frames_of(envs, o, t));
    } else {
      std::vector<int64_t> action_shape{envs};
      action_shape.insert(action_shape.end(), o.action_shape.begin(), o.action_shape.end());
      rb.add(at::full(action_shape, t % 7).to(o.action_dtype), at::full({envs}, 0.5 * t),
             frames_of(envs, o, t), at::full({envs}, t % episode == episode - 1, at::kBool), no);
    }
  }
  const std::string dir = work_dir() + "/base";
  rb.save(dir);
  return CheckpointEdit::of_dir(dir);
}

const std::vector<CheckpointEdit>& bases() {
  static const std::vector<CheckpointEdit> all = [] {
    ReplayOptions o;
    o.capacity = 8;
    o.frame_shape = {1, 2, 2};
    o.frame_stack = 2;
    o.action_shape = {2};
    std::vector<CheckpointEdit> b;
    b.push_back(base(o, 2, 11, 5));  // wrapped
    ReplayOptions p = o;
    p.prioritized = true;
    b.push_back(base(p, 1, 9, 4));
    ReplayOptions n = o;
    n.capacity = 12;
    n.n_step = 3;
    b.push_back(base(n, 3, 5, 6));
    ReplayOptions h = o;
    h.action_dtype = at::kHalf;
    b.push_back(base(h, 1, 6, 3));
    ReplayOptions l = o;
    l.action_dtype = at::kLong;
    l.action_shape = {};
    b.push_back(base(l, 2, 7, 4));
    return b;
  }();
  return all;
}

struct Reader {
  const uint8_t* data;
  size_t size;
  size_t at = 0;
  uint8_t byte() { return at < size ? data[at++] : 0; }
  uint64_t word() {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= uint64_t{byte()} << (8 * i);
    return v;
  }
};

constexpr int64_t kCap = int64_t{1} << 62;
const int64_t kBoundaryInts[] = {0,
                                 1,
                                 -1,
                                 -2,
                                 2,
                                 kCap - 1,
                                 kCap,
                                 kCap + 1,
                                 std::numeric_limits<int64_t>::max(),
                                 std::numeric_limits<int64_t>::min(),
                                 int64_t{1} << 32,
                                 (int64_t{1} << 32) + 1,
                                 64,
                                 65,
                                 1000,
                                 1001,
                                 int64_t{1} << 20};
const double kBoundaryDoubles[] = {
    0.0,      -0.0,      1.0,          -1.0,  0.5,    1.5,
    HUGE_VAL, -HUGE_VAL, std::nan(""), 1e300, 1e-300, std::numeric_limits<double>::max()};

template <typename T>
T value_of(uint64_t raw, bool boundary) {
  if constexpr (std::is_floating_point_v<T>) {
    if (boundary) return static_cast<T>(kBoundaryDoubles[(raw >> 8) % std::size(kBoundaryDoubles)]);
    T v;
    std::memcpy(&v, &raw, sizeof v);
    return v;
  } else {
    if (boundary) return static_cast<T>(kBoundaryInts[(raw >> 8) % std::size(kBoundaryInts)]);
    return static_cast<T>(raw);
  }
}

// The logical frame number of `slot` in the saved ring.
int64_t frame_of(const CheckpointEdit& e, int64_t slot) {
  const int64_t c = e.header().options.capacity, t = e.header().total_frames;
  return slot + c * ((t - 1 - slot) / c);
}

void edit_header(CheckpointEdit& e, uint8_t index, uint64_t raw) {
  const bool boundary = (raw & 0x80) != 0;
  int field = 0;
  obsaug::checkpoint::Header h;
  obsaug::checkpoint::header_fields(h, [&](const char* name, auto&& v) {
    if (field++ != index % 14) return;
    using T = std::decay_t<decltype(v)>;
    const uint64_t at = e.header_field(name);
    if constexpr (std::is_same_v<T, bool>) {
      e.set<uint8_t>(at, static_cast<uint8_t>(raw >> 8));
    } else if constexpr (std::is_arithmetic_v<T>) {
      e.set<T>(at, value_of<T>(raw, boundary));
    } else if constexpr (std::is_same_v<T, at::ScalarType>) {
      e.set<uint8_t>(at + 4 + (raw >> 8) % 4, static_cast<uint8_t>(raw >> 16));  // a name byte
    } else {
      e.set<int64_t>(at + (v.counted ? 4 : 0), value_of<int64_t>(raw, boundary));
    }
  });
}

void move_ring(CheckpointEdit& e, uint64_t raw) {
  // from the base's values (an earlier edit may have made the header's anything)
  const int64_t c = e.header().options.capacity, t = e.header().total_frames;
  int64_t shift = static_cast<int64_t>(static_cast<int8_t>(raw >> 8)) * c;
  if (raw & 0x80) shift = (kCap - t) / c * c - c * static_cast<int64_t>((raw >> 16) % 3);
  if (t + shift < 0) return;
  const auto moved = [&](int64_t v) {
    int64_t out = v;
    return v < 0 || __builtin_add_overflow(v, shift, &out) ? v : out;
  };
  e.set_header("total_frames", t + shift);
  for (int64_t s = 0; s < e.slots(); ++s) {
    for (const char* f : {"prev", "next"})
      e.set_slot(s, f, moved(e.get<int64_t>(e.slot_field(s, f))));
  }
  for (int64_t env = 0; env < e.envs(); ++env)
    e.set_env(env, "last", moved(e.get<int64_t>(e.env_field(env, "last"))));
}

void apply(CheckpointEdit& e, uint8_t kind, uint8_t index, uint64_t raw) {
  const bool boundary = (raw & 0x80) != 0;
  const int64_t slots = e.slots();
  const int64_t slot = slots > 0 ? index % slots : 0;
  switch (kind % 8) {
    case 0:
      edit_header(e, index, raw);
      break;
    case 1:
      if (slots == 0) break;
      e.set_slot<int64_t>(slot, (raw & 1) ? "next" : "prev",
                          boundary ? value_of<int64_t>(raw, true)
                                   : frame_of(e, slot) + static_cast<int8_t>(raw >> 8));
      break;
    case 2:
      if (slots == 0) break;
      e.set_slot<uint8_t>(slot, (raw & 1) ? "ended" : "terminated", static_cast<uint8_t>(raw >> 8));
      break;
    case 3:
      if (slots == 0) break;
      e.set_slot<float>(slot, "reward", value_of<float>(raw >> 32, boundary));
      break;
    case 4: {
      if (e.envs() == 0) break;
      const int64_t env = index % e.envs();
      if (raw & 1) {
        e.set_env<uint8_t>(env, "open", static_cast<uint8_t>(raw >> 8));
      } else {
        e.set_env<int64_t>(env, "last",
                           boundary
                               ? value_of<int64_t>(raw, true)
                               : e.header().total_frames - 1 - static_cast<uint8_t>(raw >> 8) % 8);
      }
      break;
    }
    case 5:
      if (slots == 0 || !e.header().options.prioritized) break;
      e.set<double>(e.section("the priorities") + 8 * slot, value_of<double>(raw, boundary));
      break;
    case 6:
      if (slots == 0 || e.action_row_bytes() == 0) break;
      e.set<uint64_t>(e.section("the actions") + slot * e.action_row_bytes() +
                          (raw & 0x7) % e.action_row_bytes() / 8 * 8,
                      raw);
      break;
    default:
      move_ring(e, raw);
  }
}

// What a loaded buffer must survive: adds and samples as a run makes them.
void exercise(ReplayBuffer& rb) {
  const ReplayOptions& o = rb.options();
  std::vector<int64_t> action_shape{1};
  action_shape.insert(action_shape.end(), o.action_shape.begin(), o.action_shape.end());
  for (int round = 0; round < 3; ++round) {
    rb.add_first(frames_of(1, o, round), std::vector<int64_t>{round});
    for (int k = 0; k < 3; ++k) {
      rb.add(at::ones(action_shape).to(o.action_dtype), at::ones({1}), frames_of(1, o, k),
             at::zeros({1}, at::kBool), at::full({1}, k == 2, at::kBool),
             std::vector<int64_t>{round});
    }
    if (rb.num_valid() > 0) {
      const obsaug::ReplayBatch b = rb.sample(3);
      if (o.prioritized) rb.update_priorities(b.indices, at::ones({3}, at::kDouble));
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Reader in{data, size};
  const std::vector<CheckpointEdit>& all = bases();
  CheckpointEdit e = all[in.byte() % all.size()];
  for (int op = 0; op < 16 && in.at < in.size; ++op) {
    const uint8_t kind = in.byte(), index = in.byte();
    apply(e, kind, index, in.word());
  }
  e.write_sealed(work_dir());
  try {  // the header as the loader reads it: skip buffers too large for the fuzzer
    obsaug::CheckpointReader r(work_dir() + "/" + obsaug::checkpoint::kFileName);
    const ReplayOptions o = obsaug::checkpoint::read_header(r).options;
    uint64_t row = 64 + c10::elementSize(o.action_dtype);
    for (int64_t s : o.action_shape) row *= static_cast<uint64_t>(s);
    row += static_cast<uint64_t>(o.frame_shape[0] * o.frame_shape[1] * o.frame_shape[2]);
    if (static_cast<uint64_t>(o.capacity) > (uint64_t{256} << 20) / row) return 0;
  } catch (const std::invalid_argument&) {
    return 0;  // refused by name
  }
  std::optional<ReplayBuffer> rb;
  try {
    rb.emplace(ReplayBuffer::load(work_dir()));
  } catch (const std::invalid_argument&) {
    return 0;  // refused by name
  }
  try {
    exercise(*rb);
  } catch (const std::invalid_argument&) {  // e.g. every priority 0
  } catch (const std::overflow_error&) {    // at the 2^62 frame cap
  }
  return 0;
}

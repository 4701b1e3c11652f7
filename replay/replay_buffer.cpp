// obsaug::ReplayBuffer (replay/replay_buffer.h; contract in docs/replay.md).
#include "replay/replay_buffer.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>
#include <c10/util/irange.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <sstream>
#include <stdexcept>

#include "kernels/augment.h"
#include "kernels/current_device.h"
#include "kernels/huge_pages.h"
#include "kernels/output_tensor.h"
#include "kernels/philox.h"
#include "kernels/plane_copy.h"
#include "kernels/tensor_text.h"
#include "replay/checkpoint_format.h"
#include "replay/proportional.h"
#include "replay/proportional_tree.h"
#include "replay/replay_checks.h"

#ifdef OBSAUG_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace obsaug {
namespace {

constexpr int kUniformAttempts = 64;
constexpr int64_t kMaxBatch = int64_t{1} << 32;  // draws per sample call (Philox b word)
// Host bytes per slot besides the action: EpisodeRing's Slot (24) and
// validity flag, and the batch-building scratch.
constexpr int64_t kHostBytesPerSlot = 32;
// Host bytes per draw of a sample besides its [S] index rows and action:
// the draw's id, slot, weight and leaf weight (up to 24), its action slot,
// reward, discount and weight rows (24), its index in the batch (8) and its
// float32 weight (4), rounded up.
constexpr uint64_t kSampleBytesPerDraw = 64;

constexpr const char* kAllZeroPriorities =
    "every valid transition has priority 0, so none can be drawn; give some a positive "
    "priority with update_priorities";

ReplayOptions checked(ReplayOptions o) {
  check_option_values(o, "ReplayBuffer.__init__: ");
  if (!(o.device.is_cpu() || o.device.is_cuda())) {
    replay_bad("__init__", "device must be cpu or cuda, got " + o.device.str());
  }
  if (o.device.is_cuda() && !at::hasCUDA()) {
    replay_bad("__init__", "device is " + o.device.str() +
                               " but this process sees no CUDA device; use device='cpu'");
  }
  o.device = with_current_index(o.device);
  return o;
}

}  // namespace

struct ReplayBuffer::Impl {
  std::mutex mutex;  // held by every public call but options() and storage()
  ReplayOptions o;
  EpisodeRing ring;
  at::Tensor frames;   // [capacity, C, H, W] uint8 on o.device
  at::Tensor actions;  // [capacity, *action_shape] on the host
  uint64_t calls = 0;  // sample() calls so far: the Philox counter
  // Prioritized: q = p^alpha per slot, and the largest p given so far. The
  // sampling weight (q, or 0 while the slot is not a valid transition) lives
  // in the leaves of a sum tree and a min tree (replay/proportional_tree.h)
  // on the buffer's device, derived state kept current by refresh_weights
  // (and rebuilt, not saved, by checkpoints).
  std::vector<double> priority;
  double max_priority = 1.0;
  int64_t leaves = 0;
  at::Tensor tree_nodes;  // [2 * leaves, 2] float64 on o.device: (sum, min) per node

  explicit Impl(ReplayOptions options)
      : o(checked(std::move(options))), ring(1, 1, 1, 0.0) {  // sized below
    // Everything is allocated up front; a buffer too large for this machine
    // is refused with its size rather than a bare bad_alloc (or the OOM killer).
    const double frame_mib = static_cast<double>(o.capacity) * frame_bytes() / (1 << 20);
    // Prioritized: 8 bytes of priority per slot, and the two trees (2 x 2
    // doubles per leaf) wherever the frames are.
    if (o.prioritized) leaves = tree::leaf_count(o.capacity);
    const double tree_mib = 32.0 * static_cast<double>(leaves) / (1 << 20);
    const double host_mib = static_cast<double>(o.capacity) *
                            (kHostBytesPerSlot + (o.prioritized ? 8 : 0) + action_bytes()) /
                            (1 << 20);
    const double on_host_mib = host_mib + (o.device.is_cpu() ? frame_mib + tree_mib : 0.0);
    const double ram_mib = static_cast<double>(physical_memory_bytes()) / (1 << 20);
    const auto too_large = [&](const std::string& why) {
      replay_bad("__init__", "capacity " + std::to_string(o.capacity) + " needs " +
                                 std::to_string(static_cast<int64_t>(frame_mib)) +
                                 " MiB of frames on " + o.device.str() + " and " +
                                 std::to_string(static_cast<int64_t>(host_mib)) +
                                 " MiB of host metadata: " + why);
    };
    if (ram_mib > 0 && on_host_mib > ram_mib) {
      too_large("more than this machine's " + std::to_string(static_cast<int64_t>(ram_mib)) +
                " MiB of memory");
    }
    try {
      ring = EpisodeRing(o.capacity, o.frame_stack, o.n_step, o.gamma);
      std::vector<int64_t> frame_sizes{o.capacity};
      frame_sizes.insert(frame_sizes.end(), o.frame_shape.begin(), o.frame_shape.end());
      // (frames stay on normal pages: a frame's bytes are contiguous, and
      // huge pages measured no faster there while doubling the set-up time)
      frames = at::zeros(frame_sizes, at::TensorOptions().dtype(at::kByte).device(o.device));
      std::vector<int64_t> action_sizes{o.capacity};
      action_sizes.insert(action_sizes.end(), o.action_shape.begin(), o.action_shape.end());
      actions = empty_read_at_random(action_sizes, at::TensorOptions().dtype(o.action_dtype));
      actions.zero_();
      if (o.prioritized) {
        assign_on_huge_pages(&priority, static_cast<size_t>(o.capacity), 0.0);
        const auto f64 = at::TensorOptions().dtype(at::kDouble).device(o.device);
        tree_nodes = empty_read_at_random({2 * leaves, 2}, f64);
        // Every weight 0: sums 0, mins +inf.
        const auto no_weight = [](const at::Tensor& nodes) {
          nodes.select(1, 0).zero_();
          nodes.select(1, 1).fill_(std::numeric_limits<double>::infinity());
        };
        if (o.device.is_cpu()) {
          // Only the kept levels (replay/proportional_tree.h): the others are
          // never read, so their pages, a third of the tree, are never touched.
          const int depth = tree::depth_of(leaves);
          for (int h = 0; h <= depth; h = tree::next_kept_height(h, depth)) {
            no_weight(tree_nodes.slice(0, leaves >> h, 2 * (leaves >> h)));
          }
        } else {
          no_weight(tree_nodes);  // whole: host_tree() copies all of it
        }
      }
    } catch (const std::bad_alloc&) {
      too_large("the allocation failed");
    } catch (const c10::Error& e) {
      too_large(std::string("the allocation failed (") + e.what_without_backtrace() + ")");
    }
  }

  // Memory for an array that every sample reads a few bytes of at random
  // (the actions, the trees): on the host, advised for huge pages before
  // its first write.
  static at::Tensor empty_read_at_random(at::IntArrayRef sizes, const at::TensorOptions& options) {
    at::Tensor t = at::empty(sizes, options);
    if (t.device().is_cpu()) advise_huge_pages(t.data_ptr(), t.nbytes());
    return t;
  }

  int64_t action_bytes() const {
    int64_t n = static_cast<int64_t>(c10::elementSize(o.action_dtype));
    for (int64_t d : o.action_shape) n *= d;
    return n;
  }

  int64_t frame_bytes() const { return o.frame_shape[0] * o.frame_shape[1] * o.frame_shape[2]; }

  // The largest weight q = p^alpha a slot may hold: every leaf at it still
  // sums to a finite total.
  double largest_weight() const {
    return std::numeric_limits<double>::max() / static_cast<double>(leaves);
  }

  // update_priorities' arguments, checked: the slots, the priorities as
  // given (float64) and their weights p^alpha.
  struct CheckedPriorities {
    at::Tensor slots;       // int64 [K] on the CPU
    at::Tensor priorities;  // float64 [K] on the CPU
    std::vector<double> weights;
  };
  CheckedPriorities checked_priorities(const at::Tensor& indices,
                                       const at::Tensor& priorities) const;

  // --- adding --------------------------------------------------------------

  // Frames [N, C, H, W] (checked) ready to be written into the next N
  // slots without another conversion: contiguous, on the buffer's device,
  // and a copy when they are a view of the storage itself (the rows written
  // first would otherwise overwrite frames not yet read). Everything here
  // that can throw runs before the ring changes.
  struct StagedFrames {
    at::Tensor frames;      // [N, C, H, W] uint8, contiguous, on o.device
    at::Tensor slot_index;  // [N] int64 on o.device (CUDA buffers), else undefined
    std::vector<int64_t> slots;
  };
  StagedFrames staged(const at::Tensor& f) const {
    StagedFrames s;
    const int64_t n = f.size(0);
    ring.check_room(n);  // the frame count stays at most 2^62
    const at::Tensor own = f.is_alias_of(frames) ? f.clone() : f;
    s.frames = own.to(o.device).contiguous();
    for (int64_t i = 0; i < n; ++i) s.slots.push_back(ring.slot_of(ring.total() + i));
    if (!o.device.is_cpu()) {
      s.slot_index =
          at::from_blob(s.slots.data(), {n}, at::TensorOptions().dtype(at::kLong)).to(o.device);
    }
    return s;
  }

  // Writes staged frames into their slots (the ones the pushes just
  // returned) and refreshes the weights of every slot a push touched.
  void commit(const StagedFrames& s, std::vector<int64_t>* touched) {
    if (o.device.is_cpu()) {
      const int64_t bytes = frame_bytes();
      uint8_t* dst = frames.data_ptr<uint8_t>();
      const uint8_t* src = s.frames.data_ptr<uint8_t>();
      for (size_t i = 0; i < s.slots.size(); ++i) {
        copy_plane_bytes(dst + s.slots[i] * bytes, src + static_cast<int64_t>(i) * bytes,
                         static_cast<size_t>(bytes));
      }
    } else {
      frames.index_copy_(0, s.slot_index, s.frames);
    }
    if (o.prioritized) refresh_weights(*touched);
  }

  // One step per env (arguments already checked): pushes, actions, frames, weights.
  void add_steps(const at::Tensor& f, const std::vector<int64_t>& ids, const at::Tensor& a,
                 const float* rewards, const bool* terminated, const bool* truncated) {
    const int64_t n = static_cast<int64_t>(ids.size());
    for (int64_t i = 0; i < n; ++i) {
      if (!std::isfinite(rewards[i])) {
        replay_bad("add", "reward must be finite, got " + std::to_string(rewards[i]) + " for env " +
                              std::to_string(ids[static_cast<size_t>(i)]));
      }
      if (!ring.can_continue(ids[static_cast<size_t>(i)])) {
        replay_bad("add",
                   "env " + std::to_string(ids[static_cast<size_t>(i)]) +
                       " has no open episode: call add_first(frame) after a reset (and after "
                       "terminated or truncated)");
      }
    }
    const StagedFrames s = staged(f);  // the last step that can throw
    std::vector<int64_t> touched;
    const int64_t row_bytes = static_cast<int64_t>(a.nbytes()) / n;
    uint8_t* action_rows = static_cast<uint8_t*>(actions.data_ptr());
    const uint8_t* new_rows = static_cast<const uint8_t*>(a.data_ptr());
    for (int64_t i = 0; i < n; ++i) {
      const int64_t slot =
          ring.push(ids[static_cast<size_t>(i)], rewards[i], terminated[i], truncated[i]);
      TORCH_INTERNAL_ASSERT_DEBUG_ONLY(slot == s.slots[static_cast<size_t>(i)]);  // as staged
      note_changes(&touched);
      set_new_priority(slot);
      touched.push_back(slot);
      std::memcpy(action_rows + slot * row_bytes, new_rows + i * row_bytes,
                  static_cast<size_t>(row_bytes));
    }
    commit(s, &touched);
  }

  // Starts an episode per env (arguments already checked).
  void add_firsts(const at::Tensor& f, const std::vector<int64_t>& ids) {
    const StagedFrames s = staged(f);  // the last step that can throw
    std::vector<int64_t> touched;
    for (size_t i = 0; i < ids.size(); ++i) {
      const int64_t slot = ring.push_first(ids[i]);
      TORCH_INTERNAL_ASSERT_DEBUG_ONLY(slot == s.slots[i]);  // staged() named the slots
      note_changes(&touched);
      set_new_priority(slot);
      touched.push_back(slot);
    }
    commit(s, &touched);
  }

  void note_changes(std::vector<int64_t>* touched) const {
    touched->insert(touched->end(), ring.changed().begin(), ring.changed().end());
  }

  tree::TreeView tree_view() const { return tree_view_of(tree_nodes); }
  // The (sum, min) pairs layout of tree::TreeView.
  tree::TreeView tree_view_of(const at::Tensor& nodes) const {
    double* p = nodes.data_ptr<double>();
    return {p, p + 1, leaves, 2};
  }

  // Sets the sampling weight of `slots` (q when valid, else 0) in the trees:
  // O(K log capacity) for K distinct slots. `validity_unchanged` (a priority
  // update: no slot became valid or invalid since the trees were last brought
  // up to date): on a CPU buffer a slot whose leaf weighs more than 0 is then
  // valid, as an invalid slot weighs 0, so its validity flag (one more random
  // read per slot) is read only for a leaf at 0.
  void refresh_weights(std::vector<int64_t> slots, bool validity_unchanged = false) {
    std::sort(slots.begin(), slots.end());
    slots.erase(std::unique(slots.begin(), slots.end()), slots.end());
    if (slots.empty()) return;
    const int64_t k = static_cast<int64_t>(slots.size());
    std::vector<double> values(slots.size());
    const bool from_leaves = validity_unchanged && o.device.is_cpu();
    const tree::TreeView view = tree_view();
    for (size_t i = 0; i < slots.size(); ++i) {
      const bool valid =
          (from_leaves && tree::sum_at(view, leaves + slots[i]) > 0.0) || ring.valid(slots[i]);
      values[i] = valid ? priority[static_cast<size_t>(slots[i])] : 0.0;
    }
    if (o.device.is_cpu()) {
      proportional_assign_host(view, slots.data(), values.data(), k);
      return;
    }
#ifdef OBSAUG_WITH_CUDA
    const c10::cuda::CUDAGuard guard(o.device);
    const auto cpu = at::TensorOptions().device(at::kCPU);
    const at::Tensor slot_device =
        at::from_blob(slots.data(), {k}, cpu.dtype(at::kLong)).to(o.device);
    const at::Tensor value_device =
        at::from_blob(values.data(), {k}, cpu.dtype(at::kDouble)).to(o.device);
    proportional_assign_cuda(view, slot_device.data_ptr<int64_t>(), value_device.data_ptr<double>(),
                             k, c10::cuda::getCurrentCUDAStream(o.device.index()).stream());
#else
    throw std::logic_error("ReplayBuffer: a CUDA buffer without CUDA support");
#endif
  }

  void set_new_priority(int64_t slot) {
    if (o.prioritized) priority[static_cast<size_t>(slot)] = std::pow(max_priority, o.alpha);
  }

  // --- sampling -------------------------------------------------------------

  void check_call_room() const {
    if (calls >= kMaxSampleCalls) {
      throw std::overflow_error("ReplayBuffer.sample: the buffer has counted " +
                                std::to_string(calls) + " sample calls, 2^62, the most it counts");
    }
  }

  // What a sample of `batch` draws allocates, against the limit of
  // memory_limit_bytes (kernels/output_tensor.h), before any of it is
  // allocated (README "Memory"): on the host, per draw, its slot and weight,
  // its rows (the [S] obs and next_obs indices, action, reward, discount),
  // and, for a CPU buffer, the obs and next_obs outputs; a CUDA buffer's
  // outputs and rows on its device.
  void check_sample_memory(int64_t batch, const StackAugment* augment) const {
    const auto sum = [](uint64_t a, uint64_t b) {  // saturating: a hostile size never wraps
      uint64_t n = 0;
      return __builtin_add_overflow(a, b, &n) ? UINT64_MAX : n;
    };
    const uint64_t S = static_cast<uint64_t>(o.frame_stack);
    const uint64_t row = kSampleBytesPerDraw + 16 * S + static_cast<uint64_t>(action_bytes());
    const uint64_t one_output = augment != nullptr
                                    ? augment->output_bytes(frames, batch, o.frame_stack)
                                    : ops::result_bytes({batch, o.frame_stack * o.frame_shape[0],
                                                         o.frame_shape[1], o.frame_shape[2]},
                                                        at::TensorOptions().dtype(at::kByte));
    const uint64_t outputs = sum(one_output, one_output);
    const uint64_t rows =
        ops::result_bytes({batch, static_cast<int64_t>(row)}, at::TensorOptions().dtype(at::kByte));
    const bool on_cpu = o.device.is_cpu();
    const uint64_t host = sum(rows, on_cpu ? outputs : 0);
    const auto check = [&](uint64_t bytes, c10::Device where, const std::string& what) {
      const uint64_t limit = ops::memory_limit_bytes(where);
      if (limit > 0 && bytes > limit) {
        replay_bad("sample", "batch size " + std::to_string(batch) + " needs " +
                                 ops::bytes_text(bytes) + " of " + what + ", more than the " +
                                 ops::bytes_text(limit) + " of " + where.str() +
                                 " memory a call may take; lower the batch size");
      }
    };
    check(host, c10::Device(c10::kCPU),
          "host memory (" + std::to_string(row) + " bytes per draw for its slot and rows" +
              (on_cpu ? ", and the obs and next_obs outputs: " + ops::bytes_text(outputs)
                      : std::string()) +
              ")");
    if (!on_cpu) check(sum(outputs, rows), o.device, "device memory (the outputs and rows)");
  }

  std::vector<int64_t> uniform_slots(int64_t batch) const {
    std::vector<int64_t> ids(static_cast<size_t>(batch));
    for (int64_t b = 0; b < batch; ++b) ids[static_cast<size_t>(b)] = b;
    return uniform_slots_for(calls, ids);
  }

  // Draw ids[i] of call `call` by the uniform rule (docs/replay.md).
  std::vector<int64_t> uniform_slots_for(uint64_t call, const std::vector<int64_t>& ids) const {
    const int64_t batch = static_cast<int64_t>(ids.size());
    std::vector<int64_t> out(static_cast<size_t>(batch));
    const uint64_t size = static_cast<uint64_t>(ring.size());  // up to 2^32
    std::vector<int64_t> valid_slots;                          // built only when rejection fails
    for (int64_t b = 0; b < batch; ++b) {
      int64_t chosen = -1;
      Philox4 r{};
      const uint32_t id = static_cast<uint32_t>(ids[static_cast<size_t>(b)]);
      for (uint32_t attempt = 0; attempt < kUniformAttempts && chosen < 0; ++attempt) {
        r = tree::replay_block(o.seed, call, id, attempt);
        const int64_t slot = static_cast<int64_t>(below_wide(r.v[0], size));
        if (ring.valid(slot)) chosen = slot;
      }
      if (chosen < 0) {
        if (valid_slots.empty()) {
          for (int64_t s = 0; s < ring.size(); ++s) {
            if (ring.valid(s)) valid_slots.push_back(s);
          }
        }
        chosen = valid_slots[below_wide(r.v[1], valid_slots.size())];
      }
      out[static_cast<size_t>(b)] = chosen;
    }
    return out;
  }

  // Slots and importance weights by proportional priority (docs/replay.md):
  // B descents of the sum tree, O(B log capacity).
  std::vector<int64_t> prioritized_slots(int64_t batch, double beta, std::vector<float>* weights) {
    std::vector<int64_t> slots(static_cast<size_t>(batch));
    std::vector<double> drawn(static_cast<size_t>(batch) + 2);  // q per draw, q_min, total
    if (o.device.is_cpu()) {
      const tree::TreeView t = tree_view();
      if (tree::sum_at(t, 1) > 0.0) proportional_draw_host(t, o.seed, calls, batch, slots.data());
      for (int64_t b = 0; b < batch; ++b) {
        drawn[static_cast<size_t>(b)] = tree::sum_at(t, t.leaves + slots[static_cast<size_t>(b)]);
      }
      drawn[static_cast<size_t>(batch)] = tree::min_at(t, 1);
      drawn[static_cast<size_t>(batch) + 1] = tree::sum_at(t, 1);
    } else {
#ifdef OBSAUG_WITH_CUDA
      const c10::cuda::CUDAGuard guard(o.device);
      const auto dev = at::TensorOptions().device(o.device);
      at::Tensor slot_device = at::empty({batch}, dev.dtype(at::kLong));
      at::Tensor drawn_device = at::empty({batch + 2}, dev.dtype(at::kDouble));
      proportional_draw_cuda(tree_view(), o.seed, calls, batch, slot_device.data_ptr<int64_t>(),
                             drawn_device.data_ptr<double>(),
                             c10::cuda::getCurrentCUDAStream(o.device.index()).stream());
      const at::Tensor slot_host = slot_device.to(at::kCPU);  // after the stream's work
      const at::Tensor drawn_host = drawn_device.to(at::kCPU);
      std::copy(slot_host.data_ptr<int64_t>(), slot_host.data_ptr<int64_t>() + batch,
                slots.begin());
      std::copy(drawn_host.data_ptr<double>(), drawn_host.data_ptr<double>() + batch + 2,
                drawn.begin());
#else
      throw std::logic_error("ReplayBuffer: a CUDA buffer without CUDA support");
#endif
    }
    const double smallest = drawn[static_cast<size_t>(batch)];
    if (!(drawn[static_cast<size_t>(batch) + 1] > 0.0)) replay_bad("sample", kAllZeroPriorities);
    weights->resize(static_cast<size_t>(batch));
    for (int64_t b = 0; b < batch; ++b) {
      (*weights)[static_cast<size_t>(b)] =
          static_cast<float>(std::pow(drawn[static_cast<size_t>(b)] / smallest, -beta));
    }
    return slots;
  }

  // The sum and min trees readable on the host: the buffer's own on the CPU,
  // a copy of a CUDA buffer's (O(capacity), for draws made elsewhere).
  struct HostTree {
    at::Tensor nodes;
    tree::TreeView view;
  };
  HostTree host_tree() const {
    HostTree h;
    h.nodes = tree_nodes.to(at::kCPU);  // the same tensor on the CPU
    h.view = tree_view_of(h.nodes);
    return h;
  }

  // Slots at `fractions` (in [0, 1) of the total weight): the tree's descent
  // at target = fraction * total; returns the smallest positive weight.
  // Raises when every weight is 0.
  double slots_at(const std::vector<double>& fractions, std::vector<int64_t>* slots) const {
    const HostTree h = host_tree();
    const double total = tree::sum_at(h.view, 1);
    if (!(total > 0.0)) replay_bad("sample", kAllZeroPriorities);
    slots->resize(fractions.size());
    for (size_t i = 0; i < fractions.size(); ++i)
      (*slots)[i] = tree::descend(tree::sums(h.view), leaves, mul_rn(fractions[i], total));
    return tree::min_at(h.view, 1);
  }

  // The batch rows of transitions `slots` (valid, checked by the caller).
  TransitionRows rows_at(const std::vector<int64_t>& slots) const {
    const int64_t batch = static_cast<int64_t>(slots.size());
    const int64_t S = o.frame_stack;
    const auto cpu = at::TensorOptions().device(at::kCPU);
    TransitionRows rows;
    rows.obs_index = at::empty({batch, S}, cpu.dtype(at::kLong));
    rows.next_index = at::empty({batch, S}, cpu.dtype(at::kLong));
    at::Tensor action_slots = at::empty({batch}, cpu.dtype(at::kLong));
    rows.reward = at::empty({batch}, cpu.dtype(at::kFloat));
    rows.discount = at::empty({batch}, cpu.dtype(at::kFloat));
    rows.weight = at::empty({batch}, cpu.dtype(at::kDouble));
    // Every row's ring entry (and priority), then its successor's entry and
    // action row, prefetched before any row reads them: in a large ring each
    // is a cache miss, and the rows' misses then overlap instead of following
    // one another.
    const EpisodeRing::Slot* entries = ring.slots().data();
    for (int64_t slot : slots) {
      __builtin_prefetch(entries + slot);
      if (o.prioritized) __builtin_prefetch(priority.data() + slot);
    }
    const char* action_rows = static_cast<const char*>(actions.data_ptr());
    const int64_t action_row = action_bytes();
    for (int64_t slot : slots) {
      const int64_t next = entries[slot].next;
      if (next >= 0) {
        __builtin_prefetch(entries + ring.slot_of(next));
        __builtin_prefetch(action_rows + ring.slot_of(next) * action_row);
      }
    }
    // (data_ptr checks the tensor on every call: taken once, not per row)
    int64_t* obs_index = rows.obs_index.data_ptr<int64_t>();
    int64_t* next_index = rows.next_index.data_ptr<int64_t>();
    int64_t* action_slot = action_slots.data_ptr<int64_t>();
    float* reward = rows.reward.data_ptr<float>();
    float* discount = rows.discount.data_ptr<float>();
    double* weight = rows.weight.data_ptr<double>();
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t slot = slots[static_cast<size_t>(b)];
      const int64_t t = ring.logical_of(slot);
      const SampledTransition tr = ring.transition(t);
      ring.stack(t, obs_index + b * S);
      ring.stack(tr.next_frame, next_index + b * S);
      action_slot[b] = tr.action_slot;
      reward[b] = static_cast<float>(tr.reward);
      discount[b] = static_cast<float>(tr.discount);
      weight[b] = o.prioritized ? priority[static_cast<size_t>(slot)] : 1.0;
    }
    rows.action = actions.index_select(0, action_slots);
    return rows;
  }

  at::Tensor gather(const at::Tensor& index_host, const StackAugment* augment, uint64_t step,
                    bool next_obs) const {
    const at::Tensor index = index_host.to(o.device);
    if (augment != nullptr) return augment->gather(frames, index, step, next_obs);
    return ops::gather_augment(frames, index, std::nullopt, {}, 0, 0, {}, /*check_indices=*/false);
  }
};

ReplayBuffer::ReplayBuffer(ReplayOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}
ReplayBuffer::~ReplayBuffer() = default;
ReplayBuffer::ReplayBuffer(ReplayBuffer&&) noexcept = default;
ReplayBuffer& ReplayBuffer::operator=(ReplayBuffer&&) noexcept = default;

void ReplayBuffer::add_first(const at::Tensor& frames,
                             const std::optional<std::vector<int64_t>>& envs) {
  const std::lock_guard<std::mutex> hold(impl_->mutex);
  Impl& d = *impl_;
  int64_t n = 0;
  const at::Tensor f = checked_frames(d.o, frames, "add_first", &n);
  const std::vector<int64_t> ids = checked_env_ids(envs, n, frames.dim() == 3, "add_first");
  d.add_firsts(f, ids);
}

void ReplayBuffer::add(const at::Tensor& action, const at::Tensor& reward, const at::Tensor& frames,
                       const at::Tensor& terminated, const at::Tensor& truncated,
                       const std::optional<std::vector<int64_t>>& envs) {
  const std::lock_guard<std::mutex> hold(impl_->mutex);
  Impl& d = *impl_;
  int64_t n = 0;
  const at::Tensor f = checked_frames(d.o, frames, "add", &n);
  const bool single = frames.dim() == 3;
  const std::vector<int64_t> ids = checked_env_ids(envs, n, single, "add");
  const at::Tensor a = checked_actions(d.o, action, n, single, "add");
  // A batch's reward is one per env ([N]); one env's may be a scalar. The
  // flags may be one bool for all.
  const at::Tensor r = checked_per_env(reward, n, at::kFloat, "reward", single, "add");
  const at::Tensor term = checked_per_env(terminated, n, at::kBool, "terminated", true, "add");
  const at::Tensor trunc = checked_per_env(truncated, n, at::kBool, "truncated", true, "add");
  d.add_steps(f, ids, a, r.data_ptr<float>(), term.data_ptr<bool>(), trunc.data_ptr<bool>());
}

void ReplayBuffer::add(const at::Tensor& action, double reward, const at::Tensor& frame,
                       bool terminated, bool truncated, int64_t env) {
  const std::lock_guard<std::mutex> hold(impl_->mutex);
  Impl& d = *impl_;
  int64_t n = 0;
  if (frame.defined() && frame.dim() != 3) {
    replay_bad("add", "this form takes one env's frame [C, H, W]; pass tensors for a batch");
  }
  const at::Tensor f = checked_frames(d.o, frame, "add", &n);
  const std::vector<int64_t> ids = checked_env_ids(std::vector<int64_t>{env}, 1, true, "add");
  const at::Tensor a = checked_actions(d.o, action, 1, true, "add");
  const float r = static_cast<float>(reward);
  d.add_steps(f, ids, a, &r, &terminated, &truncated);
}

ReplayBatch ReplayBuffer::sample(int64_t batch, const StackAugment* augment,
                                 bool share_augmentation, std::optional<double> beta) {
  const std::lock_guard<std::mutex> hold(impl_->mutex);
  Impl& d = *impl_;
  const int64_t valid = d.ring.num_valid();
  if (batch < 1) replay_bad("sample", "batch size must be >= 1, got " + std::to_string(batch));
  if (valid == 0) {  // sampling is with replacement: any batch size once one is valid
    replay_bad("sample",
               "cannot sample " + std::to_string(batch) +
                   " transitions: 0 valid transitions stored (" + std::to_string(d.ring.size()) +
                   " frames stored, and a transition needs its next frame" +
                   (d.o.n_step > 1 ? " and n_step frames of future or an episode end" : "") + ")");
  }
  if (batch > kMaxBatch) {  // the batch index is the Philox counter's 32-bit b word
    replay_bad("sample", "batch size " + std::to_string(batch) + " exceeds " +
                             std::to_string(kMaxBatch) + ", the most draws one call can make");
  }
  const double b_exp = beta.value_or(d.o.beta);
  if (!(b_exp >= 0.0 && std::isfinite(b_exp))) {
    replay_bad("sample", "beta must be finite and >= 0, got " + std::to_string(b_exp));
  }
  if (augment != nullptr &&
      (!augment->gather || !augment->reserve_steps || !augment->output_bytes)) {
    replay_bad("sample", "augment has no gather/reserve_steps/output_bytes functions");
  }
  d.check_sample_memory(batch, augment);
  d.check_call_room();
  std::vector<float> weights;
  const std::vector<int64_t> slots =
      d.o.prioritized ? d.prioritized_slots(batch, b_exp, &weights) : d.uniform_slots(batch);

  const auto cpu = at::TensorOptions().device(at::kCPU);
  const TransitionRows rows = d.rows_at(slots);
  at::Tensor indices = at::empty({batch}, cpu.dtype(at::kLong));
  std::copy(slots.begin(), slots.end(), indices.data_ptr<int64_t>());
  uint64_t step = 0;
  if (augment != nullptr) step = augment->reserve_steps(share_augmentation ? 1 : 2);
  ReplayBatch out;
  out.obs = d.gather(rows.obs_index, augment, step, /*next_obs=*/false);
  out.next_obs = d.gather(rows.next_index, augment, share_augmentation ? step : step + 1,
                          /*next_obs=*/true);
  out.action = rows.action.to(d.o.device);
  out.reward = rows.reward.to(d.o.device);
  out.discount = rows.discount.to(d.o.device);
  out.indices = indices.to(d.o.device);
  if (d.o.prioritized) {
    out.weights =
        at::from_blob(weights.data(), {batch}, cpu.dtype(at::kFloat)).clone().to(d.o.device);
  }
  ++d.calls;
  return out;
}

// Every check update_priorities makes (the same exceptions); writes nothing.
// Caller holds the mutex.
ReplayBuffer::Impl::CheckedPriorities ReplayBuffer::Impl::checked_priorities(
    const at::Tensor& indices, const at::Tensor& priorities) const {
  if (!o.prioritized)
    replay_bad("update_priorities", "the buffer was built with prioritized=False");
  if (!indices.defined() || !priorities.defined()) {
    replay_bad("update_priorities", "indices and priorities must be tensors");
  }
  if (at::isFloatingType(indices.scalar_type()) ||
      !at::isIntegralType(indices.scalar_type(), false)) {
    replay_bad_type("update_priorities",
                    "indices must be an integer tensor [K], got " + describe(indices));
  }
  if (indices.dim() != 1) {
    replay_bad("update_priorities",
               "indices must be an integer tensor [K], got " + describe(indices));
  }
  const std::string priorities_must =
      "priorities must be a real tensor [K] with K = " + std::to_string(indices.size(0)) +
      " (a float or integer dtype), got " + describe(priorities);
  if (!(at::isFloatingType(priorities.scalar_type()) ||
        at::isIntegralType(priorities.scalar_type(), /*includeBool=*/false))) {
    replay_bad_type("update_priorities", priorities_must);  // bool, complex: the wrong dtype
  }
  if (priorities.dim() != 1 || priorities.size(0) != indices.size(0)) {
    replay_bad("update_priorities", priorities_must);
  }
  const at::Tensor idx = indices.to(at::kCPU).to(at::kLong).contiguous();
  const at::Tensor pri = priorities.to(at::kCPU).to(at::kDouble).contiguous();
  const int64_t k = idx.size(0);
  const int64_t* ip = idx.data_ptr<int64_t>();
  const double* pp = pri.data_ptr<double>();
  // Each index's priority (and on a CPU buffer its leaf) is fetched here too,
  // while pow() runs below, for update_priorities, which writes them next
  // (refresh_weights reads the leaf first); check_priorities stops here.
  const bool leaves_on_host = o.device.is_cpu();
  const tree::TreeView view = tree_view();
  std::vector<double> q(static_cast<size_t>(k));  // p^alpha
  for (int64_t i = 0; i < k; ++i) {
    if (ip[i] < 0 || ip[i] >= ring.size()) {
      throw std::out_of_range("ReplayBuffer.update_priorities: index " + std::to_string(ip[i]) +
                              " is not a stored slot [0, " + std::to_string(ring.size()) + ")");
    }
    if (!std::isfinite(pp[i]) || pp[i] < 0) {
      replay_bad("update_priorities", "priorities must be finite and >= 0, got " +
                                          std::to_string(pp[i]) + " at position " +
                                          std::to_string(i));
    }
    __builtin_prefetch(priority.data() + ip[i], 1);  // the write below then hits
    if (leaves_on_host) __builtin_prefetch(&tree::sum_at(view, leaves + ip[i]), 1);
    q[static_cast<size_t>(i)] = std::pow(pp[i], o.alpha);
    if (!(q[static_cast<size_t>(i)] <= largest_weight())) {
      std::ostringstream what;
      what << "priority " << pp[i] << " at position " << i
           << " gives p^alpha = " << q[static_cast<size_t>(i)] << " (alpha " << o.alpha
           << "), above " << largest_weight() << ", the most that keeps the sum over " << leaves
           << " slots finite";
      replay_bad("update_priorities", what.str());
    }
  }
  return {idx, pri, std::move(q)};
}

void ReplayBuffer::update_priorities(const at::Tensor& indices, const at::Tensor& priorities) {
  const std::lock_guard<std::mutex> hold(impl_->mutex);
  Impl& d = *impl_;
  const Impl::CheckedPriorities checked = d.checked_priorities(indices, priorities);
  const std::vector<double>& q = checked.weights;
  const int64_t k = checked.slots.size(0);
  const int64_t* ip = checked.slots.data_ptr<int64_t>();
  const double* pp = checked.priorities.data_ptr<double>();
  std::vector<int64_t> touched(ip, ip + k);
  for (int64_t i = 0; i < k; ++i) {
    d.priority[static_cast<size_t>(ip[i])] = q[static_cast<size_t>(i)];
    d.max_priority = std::max(d.max_priority, pp[i]);
  }
  d.refresh_weights(std::move(touched), /*validity_unchanged=*/true);
}

void ReplayBuffer::check_priorities(const at::Tensor& indices, const at::Tensor& priorities) const {
  const std::lock_guard<std::mutex> hold(impl_->mutex);
  impl_->checked_priorities(indices, priorities);
}

// --- checkpoints ---------------------------------------------------------------

void ReplayBuffer::save(const std::string& dir) const {
  const std::lock_guard<std::mutex> hold(impl_->mutex);
  const Impl& d = *impl_;
  checkpoint::Header h;
  h.options = d.o;
  h.total_frames = d.ring.total();
  h.sample_calls = d.calls;
  h.max_priority = d.max_priority;
  write_atomically(dir, checkpoint::kFileName, [&](CheckpointWriter& w) {
    checkpoint::write_checkpoint(w, h,
                                 {d.ring.slots(), d.ring.envs(), d.priority, d.actions, d.frames});
  });
}

ReplayBuffer ReplayBuffer::load(const std::string& dir, std::optional<c10::Device> device) {
  // Everything the file holds is checked after its checksums and before the
  // buffer is returned: the header's values (read_header), the episode links
  // (EpisodeRing::check_state), the actions and the priorities; a refusal
  // names the field and the slot.
  CheckpointReader r(dir + "/" + checkpoint::kFileName);
  const checkpoint::Header h = checkpoint::read_header(r);
  ReplayOptions o = h.options;
  o.device = device.value_or(c10::Device(c10::kCPU));
  checkpoint::Links links = checkpoint::read_links(r, h);
  ReplayBuffer rb{o};  // refuses a buffer this machine cannot hold, naming its size
  Impl& d = *rb.impl_;
  checkpoint::read_arrays(r, h, d.priority.data(), d.actions, d.frames);
  links.slots.resize(static_cast<size_t>(o.capacity));
  try {
    d.ring.restore(h.total_frames, std::move(links.slots), std::move(links.envs));
  } catch (const std::invalid_argument& e) {
    r.corrupt(e.what());
  }
  check_loaded_actions(r, d.actions, checkpoint::stored_frames(h));
  d.calls = h.sample_calls;
  d.max_priority = h.max_priority;
  if (o.prioritized) {
    check_loaded_priorities(r, d.priority, d.max_priority, o.alpha, d.largest_weight());
    // The trees are derived state: rebuilt from the priorities (each leaf
    // at most largest_weight, so every sum is finite).
    std::vector<int64_t> all(static_cast<size_t>(o.capacity));
    for (int64_t s = 0; s < o.capacity; ++s) all[static_cast<size_t>(s)] = s;
    d.refresh_weights(std::move(all));
  }
  return rb;
}

// --- draws made elsewhere (obsaug.distributed) --------------------------------

void shard_draws(uint64_t seed, uint64_t call, int64_t first_id, int64_t batch,
                 const std::vector<double>& shard_mass, bool prioritized, int32_t* owner,
                 double* target) {
  double total = 0;
  std::vector<double> end(shard_mass.size());  // cumulative mass up to and including shard r
  for (size_t r = 0; r < shard_mass.size(); ++r) end[r] = total += shard_mass[r];
  int32_t last_nonempty = -1;
  for (size_t r = 0; r < shard_mass.size(); ++r)
    if (shard_mass[r] > 0) last_nonempty = static_cast<int32_t>(r);
  if (last_nonempty < 0) throw std::invalid_argument("shard_draws: every shard is empty");
  const uint64_t count = static_cast<uint64_t>(total);  // uniform: the number of transitions
  for (int64_t b = 0; b < batch; ++b) {
    const Philox4 r = tree::replay_block(seed, call, static_cast<uint32_t>(first_id + b), 0);
    double t = 0;
    if (prioritized) {
      t = (static_cast<double>(b) + unit(r.v[0])) / static_cast<double>(batch) * total;
    } else {  // a uniform index into the N transitions from 64 bits (r2, r3)
      const unsigned __int128 x = (static_cast<unsigned __int128>(r.v[3]) << 32) | r.v[2];
      t = static_cast<double>(static_cast<uint64_t>((x * count) >> 64));
    }
    int32_t k = 0;
    while (k < last_nonempty && !(t < end[static_cast<size_t>(k)])) ++k;
    owner[b] = k;
    target[b] = t - (end[static_cast<size_t>(k)] - shard_mass[static_cast<size_t>(k)]);
  }
}

std::vector<int64_t> ReplayBuffer::uniform_slots_for(uint64_t call,
                                                     const std::vector<int64_t>& draw_ids) const {
  const std::lock_guard<std::mutex> hold(impl_->mutex);
  if (impl_->ring.num_valid() == 0) replay_bad("uniform_slots_for", "no valid transition stored");
  for (int64_t id : draw_ids) {
    if (id < 0 || id >= kMaxBatch) {
      replay_bad("uniform_slots_for", "draw ids must lie in [0, 2^32), got " + std::to_string(id));
    }
  }
  return impl_->uniform_slots_for(call, draw_ids);
}

std::vector<int64_t> ReplayBuffer::priority_slots_for(const std::vector<double>& fractions) {
  const std::lock_guard<std::mutex> hold(impl_->mutex);
  if (!impl_->o.prioritized)
    replay_bad("priority_slots_for", "the buffer was built with prioritized=False");
  for (double f : fractions) {
    if (!(f >= 0.0 && f < 1.0)) {
      replay_bad("priority_slots_for", "fractions must lie in [0, 1), got " + std::to_string(f));
    }
  }
  std::vector<int64_t> slots;
  impl_->slots_at(fractions, &slots);
  return slots;
}

PrioritySummary ReplayBuffer::priority_summary() const {
  const std::lock_guard<std::mutex> hold(impl_->mutex);
  const Impl& d = *impl_;
  PrioritySummary out;
  if (!d.o.prioritized) {
    out.total = static_cast<double>(d.ring.num_valid());
    out.smallest = 1.0;
    return out;
  }
  const at::Tensor root = d.tree_nodes[1].to(at::kCPU);  // the roots: O(1)
  out.total = root[0].item<double>();
  out.smallest = root[1].item<double>();
  return out;
}

TransitionRows ReplayBuffer::rows_at(const std::vector<int64_t>& slots) const {
  const std::lock_guard<std::mutex> hold(impl_->mutex);
  for (int64_t s : slots) {
    if (s < 0 || s >= impl_->ring.size() || !impl_->ring.valid(s)) {
      throw std::out_of_range("ReplayBuffer.rows_at: slot " + std::to_string(s) +
                              " is not a valid transition");
    }
  }
  return impl_->rows_at(slots);
}

void ReplayBuffer::count_sample_call() {
  const std::lock_guard<std::mutex> hold(impl_->mutex);
  impl_->check_call_room();
  ++impl_->calls;
}

// The options and the storage tensor are fixed at construction: no lock.
const ReplayOptions& ReplayBuffer::options() const { return impl_->o; }
const at::Tensor& ReplayBuffer::storage() const { return impl_->frames; }

int64_t ReplayBuffer::size() const {
  const std::lock_guard<std::mutex> hold(impl_->mutex);
  return impl_->ring.size();
}
int64_t ReplayBuffer::num_valid() const {
  const std::lock_guard<std::mutex> hold(impl_->mutex);
  return impl_->ring.num_valid();
}
int64_t ReplayBuffer::total_frames() const {
  const std::lock_guard<std::mutex> hold(impl_->mutex);
  return impl_->ring.total();
}
uint64_t ReplayBuffer::sample_calls() const {
  const std::lock_guard<std::mutex> hold(impl_->mutex);
  return impl_->calls;
}

}  // namespace obsaug

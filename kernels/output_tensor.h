// Where an op's result goes: a caller's tensor (out=), checked, or a fresh one.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <initializer_list>
#include <mutex>
#include <string>
#include <utility>

namespace obsaug::ops {

// A tensor the op reads, by the name its errors use ("obs", "pool", ...).
using NamedInput = std::pair<const char*, const at::Tensor*>;

// Checks a caller's `out` against the result the call produces (`shape`, and
// `options`' dtype and device) before anything is written:
//   wrong dtype -> TypeError; wrong shape, wrong device, non-contiguous, or
//   sharing memory with one of `inputs` (null entries skipped) -> ValueError.
// `in_place_form` (may be null) names what to call instead when out would
// alias the input.
void check_out(const at::Tensor& out, at::IntArrayRef shape, const at::TensorOptions& options,
               std::initializer_list<NamedInput> inputs, const char* in_place_form);

// The most memory one call may allocate on `device` for its results and
// scratch (README "Memory"): the machine's physical memory for the CPU, the
// device's total memory for a CUDA device; 0 when the system does not say
// (then nothing is refused). A call that would need more (an output of a
// batch too large, a replay sample of too many draws) is refused with its
// size before anything is allocated, instead of a bad_alloc, the OOM killer
// or an overcommitted allocation that faults in later.
uint64_t memory_limit_bytes(c10::Device device);
// "412316860416 bytes (384.0 GiB)".
std::string bytes_text(uint64_t bytes);
// The bytes of a result of `shape` and `options`' dtype, saturating at
// UINT64_MAX (a hostile shape never wraps).
uint64_t result_bytes(at::IntArrayRef shape, const at::TensorOptions& options);
// c10::ValueError "WHAT needs N bytes (X GiB), more than the M bytes (Y GiB)
// of DEVICE memory a call may take; lower the batch size" when `bytes` is
// more than memory_limit_bytes(device).
void check_call_memory(const std::string& what, uint64_t bytes, c10::Device device);

// A fresh contiguous tensor for a result: nothing else refers to its memory.
// On the CPU, a large one (4 MiB or more) is a released earlier output when
// there is one (a process-wide OutputRecycler: at most 4 kept, 1 GiB in all),
// else new memory marked for transparent huge pages before anything touches
// it. Why: glibc serves such a block from a new mmap and unmaps it on free,
// so a plain fresh output of tens of MB is page-faulted in 4 KiB at a time
// on every call, which costs more than the op itself. A result larger than
// memory_limit_bytes is refused (c10::ValueError naming its shape and size).
at::Tensor fresh_output(at::IntArrayRef shape, const at::TensorOptions& options);

// Fresh outputs without fresh pages (fresh_output's cache). It keeps the storage of the
// last `capacity` tensors it handed out, and a weak reference to each
// tensor; take() hands a storage out again (the newest such, as a new
// tensor of the requested shape and dtype) once its tensor is gone and nothing else refers to the
// storage (no view, no Python storage object, nothing saved for backward):
// the caller released it. Else it makes a fresh_output. So a result never
// shares memory with anything that still holds an earlier one, exactly as
// with a fresh allocation; released storages stay allocated until taken
// again or pushed out by newer ones (more than `capacity` storages, or more
// than `max_bytes` in all: the oldest go). Thread-safe.
class OutputRecycler {
 public:
  explicit OutputRecycler(size_t capacity = 4, int64_t max_bytes = int64_t{1} << 30)
      : capacity_(capacity), max_bytes_(max_bytes) {}
  at::Tensor take(at::IntArrayRef shape, const at::TensorOptions& options);

 private:
  struct Kept {
    c10::weak_intrusive_ptr<c10::TensorImpl> handed_out;
    c10::Storage storage;
  };
  std::mutex mu_;
  size_t capacity_;
  int64_t max_bytes_;
  int64_t kept_bytes_ = 0;
  std::deque<Kept> kept_;  // oldest first
};

}  // namespace obsaug::ops

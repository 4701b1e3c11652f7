#include "kernels/output_tensor.h"

#include <ATen/MemoryOverlap.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>
#include <c10/util/accumulate.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <iterator>

#include "kernels/huge_pages.h"
#include "kernels/tensor_text.h"

#ifdef OBSAUG_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>
#endif

namespace obsaug::ops {
namespace {

// Outputs from this size on are recycled and get huge pages; smaller ones
// come from glibc's heap, which keeps them mapped.
constexpr int64_t kLargeOutputBytes = int64_t{4} << 20;

// New memory for a large CPU output, marked for huge pages before its first touch.
at::Tensor new_large_output(at::IntArrayRef shape, const at::TensorOptions& options) {
  at::Tensor out = at::empty(shape, options);
  advise_huge_pages(out.data_ptr(), out.nbytes());
  return out;
}

int64_t bytes_of(at::IntArrayRef shape, const at::TensorOptions& options) {
  return c10::multiply_integers(shape) *
         static_cast<int64_t>(c10::elementSize(options.dtype().toScalarType()));
}

#ifdef OBSAUG_WITH_CUDA
uint64_t cuda_memory_bytes(c10::DeviceIndex index) {
  static std::array<std::atomic<uint64_t>, 64> known{};  // per device, 0 until asked
  if (index < 0 || index >= static_cast<c10::DeviceIndex>(known.size())) return 0;
  uint64_t total = known[static_cast<size_t>(index)].load(std::memory_order_relaxed);
  if (total == 0) {
    const c10::cuda::CUDAGuard guard(index);
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
      (void)cudaGetLastError();  // no limit where the device does not say
      return 0;
    }
    total = total_bytes;
    known[static_cast<size_t>(index)].store(total, std::memory_order_relaxed);
  }
  return total;
}
#endif

}  // namespace

uint64_t memory_limit_bytes(c10::Device device) {
  if (device.is_cpu()) return physical_memory_bytes();
#ifdef OBSAUG_WITH_CUDA
  if (device.is_cuda()) return cuda_memory_bytes(device.has_index() ? device.index() : 0);
#endif
  return 0;
}

uint64_t result_bytes(at::IntArrayRef shape, const at::TensorOptions& options) {
  uint64_t n = c10::elementSize(options.dtype().toScalarType());
  for (int64_t s : shape) {
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(std::max<int64_t>(s, 0)), &n))
      return UINT64_MAX;
  }
  return n;
}

void check_call_memory(const std::string& what, uint64_t bytes, c10::Device device) {
  const uint64_t limit = memory_limit_bytes(device);
  TORCH_CHECK_VALUE(limit == 0 || bytes <= limit, what, " needs ", bytes_text(bytes),
                    ", more than the ", bytes_text(limit), " of ", device.str(),
                    " memory a call may take; lower the batch size");
}

std::string bytes_text(uint64_t bytes) {
  char gib[32];
  std::snprintf(gib, sizeof gib, "%.1f GiB", static_cast<double>(bytes) / (1u << 30));
  return std::to_string(bytes) + " bytes (" + gib + ")";
}

void check_out(const at::Tensor& out, at::IntArrayRef shape, const at::TensorOptions& options,
               std::initializer_list<NamedInput> inputs, const char* in_place_form) {
  const at::ScalarType dtype = options.dtype().toScalarType();
  const std::string want =
      dtype_name(dtype) + " " + shape_text(shape) + " on " + options.device().str();
  TORCH_CHECK_TYPE(out.scalar_type() == dtype, "out must be ", want, " (the result's dtype), got ",
                   describe(out));
  TORCH_CHECK_VALUE(out.sizes() == shape, "out must be ", want, " (the result's shape), got ",
                    describe(out));
  TORCH_CHECK_VALUE(out.device() == options.device(), "out must be ", want,
                    " (the inputs' device), got ", describe(out));
  TORCH_CHECK_VALUE(out.is_contiguous(), "out must be contiguous ", want, ", got ", describe(out),
                    " with strides ", shape_text(out.strides()),
                    "; pass a contiguous tensor (torch.empty)");
  if (out.numel() == 0) return;
  for (const NamedInput& input : inputs) {
    if (input.second == nullptr || !input.second->defined() || input.second->numel() == 0) continue;
    TORCH_CHECK_VALUE(
        at::get_overlap_status(out, *input.second) == at::MemOverlapStatus::No,
        "out shares memory with ", input.first, " (", describe(*input.second),
        "); pass a separate tensor",
        in_place_form ? std::string(", or use the in-place form ") + in_place_form : std::string());
  }
}

at::Tensor fresh_output(at::IntArrayRef shape, const at::TensorOptions& options) {
  check_call_memory(
      "the result, " + dtype_name(options.dtype().toScalarType()) + " " + shape_text(shape) + ",",
      result_bytes(shape, options), options.device());
  if (!options.device().is_cpu() || bytes_of(shape, options) < kLargeOutputBytes)
    return at::empty(shape, options);
  static OutputRecycler* const released = new OutputRecycler();  // never destroyed: no exit order
  return released->take(shape, options);
}

at::Tensor OutputRecycler::take(at::IntArrayRef shape, const at::TensorOptions& options) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t bytes = bytes_of(shape, options);
  // Newest first: the memory most recently written is the likeliest still in cache.
  for (auto it = kept_.rbegin(); it != kept_.rend(); ++it) {
    // Released: its tensor is gone and only this entry refers to the storage.
    if (it->handed_out.expired() && it->storage.use_count() == 1 &&
        static_cast<int64_t>(it->storage.nbytes()) == bytes &&
        it->storage.device() == options.device()) {
      Kept kept = std::move(*it);
      kept_.erase(std::next(it).base());
      at::Tensor out = at::empty({0}, options).set_(kept.storage, 0, shape);
      kept.handed_out = c10::weak_intrusive_ptr<c10::TensorImpl>(out.getIntrusivePtr());
      kept_.push_back(std::move(kept));
      return out;
    }
  }
  at::Tensor out =
      options.device().is_cpu() ? new_large_output(shape, options) : at::empty(shape, options);
  kept_.push_back({c10::weak_intrusive_ptr<c10::TensorImpl>(out.getIntrusivePtr()), out.storage()});
  kept_bytes_ += bytes;
  while (kept_.size() > 1 && (kept_.size() > capacity_ || kept_bytes_ > max_bytes_)) {
    kept_bytes_ -= static_cast<int64_t>(kept_.front().storage.nbytes());
    kept_.pop_front();
  }
  return out;
}

}  // namespace obsaug::ops

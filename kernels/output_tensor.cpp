#include "kernels/output_tensor.h"

#include <ATen/MemoryOverlap.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>
#include <c10/util/accumulate.h>

#include <cstdint>
#include <iterator>

#include "kernels/huge_pages.h"
#include "kernels/tensor_text.h"

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

}  // namespace

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

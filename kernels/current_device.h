// "cuda" without an index names the CUDA device current when it is read. The
// objects that keep a device (DistractorPool, Engine, ReplayBuffer) resolve
// it once, at construction, so that a later change of the current device
// does not move their allocations and launches.
#pragma once

#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/core/Device.h>

namespace obsaug {

// `device` with its CUDA index: an index-less "cuda" becomes cuda:N, N the
// current device; any other device, or "cuda" where no CUDA device is
// visible (the caller reports that), is returned as it is.
inline c10::Device with_current_index(c10::Device device) {
  if (device.is_cuda() && !device.has_index() && at::hasCUDA()) {
    return c10::Device(c10::kCUDA, at::detail::getCUDAHooks().current_device());
  }
  return device;
}

}  // namespace obsaug

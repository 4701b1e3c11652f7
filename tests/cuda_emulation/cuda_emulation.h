// A CPU emulation of the CUDA execution model, so that the kernels' own code
// (kernels/*_kernel.cuh) runs in every CI run (DESIGN.md section 8). Test-only:
// never linked into libobsaug.
//
// Include this header before a kernel header, in a host-compiled file:
//   #include "tests/cuda_emulation/cuda_emulation.h"
//   #include "kernels/augment_cuda_kernel.cuh"
//   namespace obsaug { namespace { CUDA_EMU_DYNAMIC_SHARED(dynamic_shared); } }
//   cuda_emu::launch({grid, block, dynamic_bytes, order}, kernel, args...);
//
// Model:
//  - Blocks run one after another, in an order drawn from `order`. The threads
//    of a block are fibers on the launching thread; in each barrier phase every
//    runnable fiber runs until it reaches a __syncthreads or returns, in an
//    order drawn from `order` again. kForward (0) runs blocks and threads in
//    index order, kReverse (1) in reverse order, any other value in seeded
//    random orders: a kernel whose result depends on that order (a read of
//    shared memory before the barrier that guards it) gives different results
//    under kForward and kReverse every time.
//  - `__shared__` is `thread_local` storage: one instance per kernel on the
//    launching thread, shared by the fibers of the running block and reused by
//    the next block (never reset, as on a GPU). Dynamic `extern __shared__`
//    memory is an array the including file defines with CUDA_EMU_DYNAMIC_SHARED
//    in the kernel's namespace; at every block start its first
//    `dynamic_bytes` are filled with a byte pattern that depends on `order` and
//    the block, and under AddressSanitizer the rest is poisoned.
//  - threadIdx / blockIdx / blockDim / gridDim read the running fiber.
//  - __syncthreads: a thread that returns drops out of the block. When no fiber
//    can run, either every live thread waits at the same __syncthreads (they
//    are released) or the launch fails with LaunchError naming the barriers:
//    threads at different __syncthreads, or some at one while others returned.
//  - Under ThreadSanitizer every fiber is a TSan fiber; switches inside a phase
//    carry no happens-before, a barrier does (release on arrival, acquire on
//    release), so TSan reports a race between threads of a block as on threads.
//  - __device__, __host__, __global__, __forceinline__, __align__,
//    __restrict__ (the host compiler's own), __launch_bounds__ and
//    `#pragma unroll` (build with -Wno-unknown-pragmas) compile to host code;
//    the vector types (uint4, float4, dim3, ...) are the CUDA toolkit's own
//    host-compatible vector_types.h.
// Not modelled: warps and warp-level intrinsics, memory ordering between
// blocks (they run one after another), atomics, the CUDA runtime, speed.
#pragma once

#if defined(__CUDACC__)
#error "cuda_emulation.h is for host compilers; nvcc has the real thing"
#endif

#define CUDA_EMULATION 1
// Defined before vector_types.h, whose crt/host_defines.h keeps them.
#define __shared__ thread_local
#define __launch_bounds__(...)

#include <vector_types.h>  // uint3, dim3, uint4, float4, ...: the toolkit's host definitions

#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

namespace cuda_emu {

// Dynamic shared memory a block may use without opting in (48 KiB).
constexpr size_t kMaxDynamicSharedBytes = 48 * 1024;
constexpr uint64_t kForward = 0;  // blocks and threads in index order
constexpr uint64_t kReverse = 1;  // both in reverse order

struct LaunchConfig {
  dim3 grid;
  dim3 block;
  size_t dynamic_shared_bytes = 0;
  uint64_t order = kForward;
};

// A launch the CUDA model forbids: bad configuration, or divergent barriers.
class LaunchError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
struct ThreadState {
  uint3 thread_idx;
  uint3 block_idx;
  dim3 block_dim;
  dim3 grid_dim;
};
const ThreadState& current();
void syncthreads(const char* file, int line);
void run(const LaunchConfig& config, const std::function<void()>& body);
bool register_dynamic_shared(unsigned char* (*address)(), size_t bytes);
}  // namespace detail

// Runs `kernel(args...)` on every thread of every block; throws LaunchError.
template <typename... Params, typename... Args>
void launch(const LaunchConfig& config, void (*kernel)(Params...), Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "a kernel argument is missing or extra");
  const std::tuple<std::decay_t<Params>...> arguments(std::forward<Args>(args)...);
  detail::run(config, [&] { std::apply(kernel, arguments); });
}

}  // namespace cuda_emu

#define threadIdx (::cuda_emu::detail::current().thread_idx)
#define blockIdx (::cuda_emu::detail::current().block_idx)
#define blockDim (::cuda_emu::detail::current().block_dim)
#define gridDim (::cuda_emu::detail::current().grid_dim)
#define __syncthreads() ::cuda_emu::detail::syncthreads(__FILE__, __LINE__)

// Defines the storage behind `extern __shared__ unsigned char name[]` of the
// kernels of this file; use it inside the kernels' namespace, once per name.
// The second thread_local has a dynamic initialiser, so GCC emits the
// __tls_init that its wrapper for a block-scope extern thread_local calls;
// the scheduler reads the array's address through it, so that __tls_init
// runs on the launching thread before any emulated thread starts.
#define CUDA_EMU_DYNAMIC_SHARED(name)                                                              \
  alignas(16) thread_local unsigned char name[::cuda_emu::kMaxDynamicSharedBytes];                 \
  thread_local unsigned char* const name##_emu_address = name;                                     \
  [[maybe_unused]] const bool name##_emu_registered = ::cuda_emu::detail::register_dynamic_shared( \
      []() { return name##_emu_address; }, sizeof(name))

// The CPU emulation of the CUDA execution model itself: built-in variables,
// per-block shared memory, barriers, launch checks, and that it reports what
// it must report every time: a read of shared memory before the barrier that
// guards it (results differ between orders) and divergent barriers (LaunchError).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <vector>

#include "tests/cuda_emulation/cuda_emulation.h"

#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif

namespace {

constexpr uint64_t kOrders[] = {cuda_emu::kForward, cuda_emu::kReverse, 0x5eed, 0xdecaf};

CUDA_EMU_DYNAMIC_SHARED(test_dynamic_shared);

struct Builtins {
  uint3 thread;
  uint3 block;
  dim3 block_dim;
  dim3 grid_dim;
};

__global__ void record_builtins(Builtins* out) {
  const unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const unsigned thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  __syncthreads();  // threadIdx survives the switch to other threads and back
  out[block * blockDim.x * blockDim.y * blockDim.z + thread] =
      Builtins{threadIdx, blockIdx, blockDim, gridDim};
}

// Block sums through static shared memory: each thread adds its value under a
// tree of barriers.
__global__ void __launch_bounds__(128) block_sum(const int* __restrict__ in, int* out) {
  __shared__ int partial[128];
  partial[threadIdx.x] = in[blockIdx.x * blockDim.x + threadIdx.x];
  __syncthreads();
  for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = partial[0];
}

// Reverses each block's slice through dynamic shared memory (uint4 copies).
__global__ void reverse_through_dynamic_shared(const uint4* in, uint4* out) {
  extern __shared__ __align__(16) unsigned char test_dynamic_shared[];
  uint4* tile = reinterpret_cast<uint4*>(test_dynamic_shared);
  const unsigned base = blockIdx.x * blockDim.x;
  tile[threadIdx.x] = in[base + threadIdx.x];
  __syncthreads();
  out[base + threadIdx.x] = tile[blockDim.x - 1 - threadIdx.x];
}

// Deliberately racy: reads a neighbour's element before the barrier that guards it.
__global__ void read_before_barrier(const int* in, int* out) {
  __shared__ int tile[64];
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  tile[threadIdx.x] = in[i];
  const int neighbour = tile[(threadIdx.x + 1) % blockDim.x];  // the race
  __syncthreads();
  out[i] = neighbour;
}

// The same kernel with the barrier where it belongs.
__global__ void read_after_barrier(const int* in, int* out) {
  __shared__ int tile[64];
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  tile[threadIdx.x] = in[i];
  __syncthreads();
  out[i] = tile[(threadIdx.x + 1) % blockDim.x];
}

// Deliberately divergent: the two halves of a block wait at different barriers.
__global__ void divergent_barrier(int* out) {
  if (threadIdx.x < blockDim.x / 2) {
    __syncthreads();
  } else {
    __syncthreads();
  }
  out[threadIdx.x] = 1;
}

// Deliberately divergent: odd threads return, even threads wait at a barrier.
__global__ void barrier_after_return(int* out) {
  if (threadIdx.x % 2 == 1) return;
  __syncthreads();
  out[threadIdx.x] = 1;
}

// Threads that return early with no barrier after them are fine.
__global__ void early_return(int n, int* out) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= n) return;
  out[i] = i;
}

std::vector<int> iota_values(size_t n, int first) {
  std::vector<int> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = first + static_cast<int>(i);
  return v;
}

TEST(CudaEmulation, BuiltinsArePerThreadAndPerBlock) {
  const dim3 grid(3, 2, 2);
  const dim3 block(4, 3, 2);
  for (uint64_t order : kOrders) {
    std::vector<Builtins> out(12 * 24);
    cuda_emu::launch({grid, block, 0, order}, record_builtins, out.data());
    for (unsigned b = 0; b < 12; ++b) {
      for (unsigned t = 0; t < 24; ++t) {
        const Builtins& r = out[b * 24 + t];
        ASSERT_EQ(r.thread.x + 4 * (r.thread.y + 3 * r.thread.z), t) << "order " << order;
        ASSERT_EQ(r.block.x + 3 * (r.block.y + 2 * r.block.z), b) << "order " << order;
        ASSERT_EQ(r.block_dim.x * 100 + r.block_dim.y * 10 + r.block_dim.z, 432u);
        ASSERT_EQ(r.grid_dim.x * 100 + r.grid_dim.y * 10 + r.grid_dim.z, 322u);
      }
    }
  }
}

TEST(CudaEmulation, StaticSharedMemoryIsSharedByTheThreadsOfABlock) {
  const std::vector<int> in = iota_values(5 * 128, -300);
  for (uint64_t order : kOrders) {
    std::vector<int> out(5, 0);
    cuda_emu::launch({dim3(5), dim3(128), 0, order}, block_sum, in.data(), out.data());
    for (int b = 0; b < 5; ++b) {
      int expected = 0;
      for (int t = 0; t < 128; ++t) expected += in[b * 128 + t];
      EXPECT_EQ(out[b], expected) << "block " << b << ", order " << order;
    }
  }
}

TEST(CudaEmulation, DynamicSharedMemoryHoldsTheLaunchsBytes) {
  std::vector<uint4> in(3 * 96);
  for (unsigned i = 0; i < in.size(); ++i) in[i] = uint4{i, i + 1, i + 2, i + 3};
  for (uint64_t order : kOrders) {
    std::vector<uint4> out(in.size());
    cuda_emu::launch({dim3(3), dim3(96), 96 * sizeof(uint4), order}, reverse_through_dynamic_shared,
                     in.data(), out.data());
    for (unsigned b = 0; b < 3; ++b) {
      for (unsigned t = 0; t < 96; ++t) {
        ASSERT_EQ(out[b * 96 + t].x, in[b * 96 + 95 - t].x) << "order " << order;
        ASSERT_EQ(out[b * 96 + t].w, in[b * 96 + 95 - t].w) << "order " << order;
      }
    }
  }
}

TEST(CudaEmulation, ReadBeforeTheBarrierGivesResultsThatDependOnTheOrder) {
#ifdef UNDER_TSAN
  GTEST_SKIP() << "under TSan the race is a report: ThreadSanitizerSeesTheReadBeforeTheBarrier";
#endif
  const std::vector<int> in = iota_values(4 * 64, 1000);
  std::vector<int> expected(in.size());
  for (size_t i = 0; i < in.size(); ++i) expected[i] = in[i / 64 * 64 + (i % 64 + 1) % 64];
  std::vector<std::vector<int>> racy;
  for (uint64_t order : kOrders) {
    std::vector<int> out(in.size(), 0);
    cuda_emu::launch({dim3(4), dim3(64), 0, order}, read_after_barrier, in.data(), out.data());
    EXPECT_EQ(out, expected) << "the race-free kernel, order " << order;
    cuda_emu::launch({dim3(4), dim3(64), 0, order}, read_before_barrier, in.data(), out.data());
    racy.push_back(out);
  }
  // Forward order: every thread but the last reads its neighbour's element
  // before the neighbour wrote it; reverse order: only the last thread does.
  EXPECT_NE(racy[0], expected);
  EXPECT_NE(racy[1], expected);
  EXPECT_NE(racy[0], racy[1]);
}

#ifdef UNDER_TSAN
// The threads of a block are TSan fibers with no happens-before inside a
// phase: TSan reports the read before the barrier as a data race.
TEST(CudaEmulationDeathTest, ThreadSanitizerSeesTheReadBeforeTheBarrier) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::vector<int> in = iota_values(2 * 64, 1000);
  std::vector<int> out(in.size(), 0);
  EXPECT_EXIT(
      {
        cuda_emu::launch({dim3(2), dim3(64), 0, cuda_emu::kForward}, read_before_barrier, in.data(),
                         out.data());
        std::exit(0);
      },
      [](int status) { return WIFEXITED(status) && WEXITSTATUS(status) != 0; },
      "ThreadSanitizer: data race(.|\n)*read_before_barrier");
}
#endif

// Runs launch(), which must throw a LaunchError whose message holds each of `words`.
template <typename Launch>
void expect_launch_error(Launch&& launch, std::initializer_list<const char*> words) {
  try {
    launch();
    ADD_FAILURE() << "no LaunchError, expected one about: " << *words.begin();
  } catch (const cuda_emu::LaunchError& e) {
    const std::string message = e.what();
    for (const char* w : words) EXPECT_NE(message.find(w), std::string::npos) << message;
  }
}

// Launches kernel(out) on grid x block in every order; each launch must be
// reported with a LaunchError holding each of `words`.
void expect_reported_in_every_order(dim3 grid, dim3 block, void (*kernel)(int*),
                                    std::initializer_list<const char*> words) {
  for (uint64_t order : kOrders) {
    SCOPED_TRACE("order " + std::to_string(order));
    std::vector<int> out(static_cast<size_t>(grid.x) * block.x, 0);
    expect_launch_error(
        [&] {
          cuda_emu::launch({grid, block, 0, order}, kernel, out.data());
        },
        words);
  }
}

TEST(CudaEmulation, DivergentBarriersAreReported) {
  expect_reported_in_every_order(
      dim3(2), dim3(64), divergent_barrier,
      {"divergent __syncthreads", "threads 0-31 wait at", "threads 32-63 wait at"});
}

TEST(CudaEmulation, BarrierAfterSomeThreadsReturnedIsReported) {
  expect_reported_in_every_order(
      dim3(1), dim3(8), barrier_after_return,
      {"threads 0, 2, 4, 6 wait at", "threads 1, 3, 5, 7 have returned"});
}

TEST(CudaEmulation, ThreadsMayReturnWhenNoBarrierFollows) {
  for (uint64_t order : kOrders) {
    std::vector<int> out(70, -1);
    cuda_emu::launch({dim3(2), dim3(64), 0, order}, early_return, 70, out.data());
    EXPECT_EQ(out, iota_values(70, 0)) << "order " << order;
  }
}

TEST(CudaEmulation, InvalidLaunchesAreRejected) {
  std::vector<int> out(2048, 0);
  const auto rejected = [&](const cuda_emu::LaunchConfig& config, const char* words) {
    expect_launch_error([&] { cuda_emu::launch(config, early_return, 0, out.data()); }, {words});
  };
  rejected({dim3(1), dim3(1025), 0, 0}, "must have 1 to 1024 threads");
  rejected({dim3(1), dim3(0), 0, 0}, "must have 1 to 1024 threads");
  rejected({dim3(0), dim3(32), 0, 0}, "must be non-empty");
  rejected({dim3(1), dim3(32), cuda_emu::kMaxDynamicSharedBytes + 1, 0}, "exceeds the 49152 bytes");
}

}  // namespace

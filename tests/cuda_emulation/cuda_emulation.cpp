// The scheduler behind tests/cuda_emulation/cuda_emulation.h: blocks one after
// another, the threads of a block as ucontext fibers on the launching thread,
// run phase by phase between barriers in seeded orders.
#include "tests/cuda_emulation/cuda_emulation.h"

#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define CUDA_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CUDA_EMU_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define CUDA_EMU_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CUDA_EMU_TSAN 1
#endif
#endif
#ifdef CUDA_EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
#ifdef CUDA_EMU_TSAN
#include <sanitizer/tsan_interface.h>
#endif

namespace cuda_emu::detail {
namespace {

// Per thread, below a guard page. Small: ASan clears the shadow of the whole
// target stack on every swapcontext.
constexpr size_t kStackBytes = 64 * 1024;
constexpr uint64_t kMaxThreadsPerBlock = 1024;

enum Status : int { kRunnable, kWaiting, kExited };

// One emulated thread. `state` is written by the scheduler before the fiber
// first runs in a block; the atomics are written by the fiber and read by the
// scheduler (atomics, so that TSan sees no race in the bookkeeping itself).
struct Fiber {
  ThreadState state{};
  ucontext_t context{};
  char* stack = nullptr;
  std::atomic<int> status{kRunnable};
  std::atomic<const char*> barrier_file{nullptr};
  std::atomic<int> barrier_line{0};
  bool started = false;
  void* tsan_fiber = nullptr;
  void* asan_fake_stack = nullptr;
};

// The running launch, on the launching thread.
struct Launch {
  const std::function<void()>* body = nullptr;
  std::unique_ptr<Fiber[]> fibers;
  uint64_t threads = 0;
  ucontext_t main_context{};
  std::atomic<Fiber*> running{nullptr};
  // Release on arrival at a barrier or at the end, acquire on release: the
  // happens-before a barrier gives, and the only one between fibers.
  std::atomic<uint64_t> barrier_clock{0};
  void* main_tsan_fiber = nullptr;
  const void* main_stack_bottom = nullptr;
  size_t main_stack_size = 0;
};

thread_local Launch* tls_launch = nullptr;

struct DynamicShared {
  unsigned char* (*address)();
  size_t bytes;
};
std::vector<DynamicShared>& dynamic_shared_arrays() {
  static std::vector<DynamicShared> arrays;
  return arrays;
}

[[noreturn]] void misuse(const char* what) {
  std::fprintf(stderr, "cuda_emulation: %s\n", what);
  std::abort();
}

// `main_fiber` is read before the fiber's last release: a read of the launch
// after it would race with the next launch's set-up in TSan's eyes.
void switch_to_main(Launch* launch, Fiber* fiber, void* main_fiber, bool exiting) {
#ifdef CUDA_EMU_TSAN
  __tsan_switch_to_fiber(main_fiber, __tsan_switch_to_fiber_no_sync);
#else
  (void)main_fiber;
#endif
#ifdef CUDA_EMU_ASAN
  __sanitizer_start_switch_fiber(exiting ? nullptr : &fiber->asan_fake_stack,
                                 launch->main_stack_bottom, launch->main_stack_size);
#endif
  swapcontext(&fiber->context, &launch->main_context);
#ifdef CUDA_EMU_ASAN
  __sanitizer_finish_switch_fiber(fiber->asan_fake_stack, &launch->main_stack_bottom,
                                  &launch->main_stack_size);
#endif
}

// Everything the scheduler writes happens before the TSan switch: after it,
// TSan counts the accesses as the fiber's.
void switch_to_fiber(Launch* launch, Fiber* fiber) {
  launch->running.store(fiber, std::memory_order_relaxed);
  const bool first = !fiber->started;
  fiber->started = true;
#ifdef CUDA_EMU_TSAN
  // The first switch into a fiber in a block carries the scheduler's
  // happens-before (the block's setup and every earlier block); later ones none.
  __tsan_switch_to_fiber(fiber->tsan_fiber, first ? 0 : __tsan_switch_to_fiber_no_sync);
#else
  (void)first;
#endif
#ifdef CUDA_EMU_ASAN
  void* fake_stack = nullptr;
  __sanitizer_start_switch_fiber(&fake_stack, fiber->stack, kStackBytes);
#endif
  swapcontext(&launch->main_context, &fiber->context);
#ifdef CUDA_EMU_ASAN
  __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
#endif
  launch->running.store(nullptr, std::memory_order_relaxed);
}

void fiber_entry() {
  Launch* launch = tls_launch;
  Fiber* fiber = launch->running.load(std::memory_order_relaxed);
#ifdef CUDA_EMU_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &launch->main_stack_bottom, &launch->main_stack_size);
#endif
  (*launch->body)();
  fiber->status.store(kExited, std::memory_order_relaxed);
  void* main_fiber = launch->main_tsan_fiber;
  launch->barrier_clock.fetch_add(1, std::memory_order_acq_rel);
  switch_to_main(launch, fiber, main_fiber, /*exiting=*/true);
  misuse("a returned thread was resumed");
}

uint64_t volume(const dim3& d) { return static_cast<uint64_t>(d.x) * d.y * d.z; }

uint3 unflatten(uint64_t i, const dim3& d) {
  return uint3{static_cast<unsigned>(i % d.x), static_cast<unsigned>(i / d.x % d.y),
               static_cast<unsigned>(i / d.x / d.y)};
}

void check_config(const LaunchConfig& c) {
  std::ostringstream error;
  const uint64_t threads = volume(c.block);
  if (threads == 0 || threads > kMaxThreadsPerBlock || c.block.z > 64) {
    error << "block (" << c.block.x << ", " << c.block.y << ", " << c.block.z
          << ") must have 1 to 1024 threads with z <= 64";
  } else if (volume(c.grid) == 0 || c.grid.x > 0x7fffffffu || c.grid.y > 65535 ||
             c.grid.z > 65535) {
    error << "grid (" << c.grid.x << ", " << c.grid.y << ", " << c.grid.z
          << ") must be non-empty with x < 2^31 and y, z <= 65535";
  } else if (c.dynamic_shared_bytes > kMaxDynamicSharedBytes) {
    error << "dynamic shared memory of " << c.dynamic_shared_bytes << " bytes exceeds the "
          << kMaxDynamicSharedBytes << " bytes a block gets without opting in";
  } else if (c.dynamic_shared_bytes > 0 && dynamic_shared_arrays().empty()) {
    error << "the launch asks for " << c.dynamic_shared_bytes
          << " bytes of dynamic shared memory but no CUDA_EMU_DYNAMIC_SHARED array is defined";
  } else {
    return;
  }
  throw LaunchError("invalid launch: " + error.str());
}

// "0-127, 130" for sorted thread indices.
std::string ranges(const std::vector<uint64_t>& sorted) {
  std::ostringstream out;
  for (size_t i = 0; i < sorted.size();) {
    size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) ++j;
    out << (i ? ", " : "") << sorted[i];
    if (j > i) out << "-" << sorted[j];
    i = j + 1;
  }
  return out.str();
}

// Runs one block to its end; returns an error message for a divergent barrier.
std::string run_block(Launch* launch, const LaunchConfig& config, uint64_t block,
                      std::mt19937_64& rng) {
  const uint3 block_idx = unflatten(block, config.grid);
  for (uint64_t t = 0; t < launch->threads; ++t) {
    Fiber& f = launch->fibers[t];
    f.state = ThreadState{unflatten(t, config.block), block_idx, config.block, config.grid};
    f.status.store(kRunnable, std::memory_order_relaxed);
    f.started = false;
    getcontext(&f.context);
    f.context.uc_stack.ss_sp = f.stack;
    f.context.uc_stack.ss_size = kStackBytes;
    f.context.uc_link = nullptr;
    makecontext(&f.context, fiber_entry, 0);
  }
  const unsigned char fill =
      static_cast<unsigned char>(0xA5u ^ (config.order * 0x9Eu) ^ (block * 0x3Bu));
  for (const DynamicShared& array : dynamic_shared_arrays()) {
    std::memset(array.address(), fill, config.dynamic_shared_bytes);
  }

  std::vector<uint64_t> order;
  for (;;) {
    order.clear();
    for (uint64_t t = 0; t < launch->threads; ++t) {
      if (launch->fibers[t].status.load(std::memory_order_relaxed) == kRunnable) order.push_back(t);
    }
    if (config.order == kReverse) {
      std::reverse(order.begin(), order.end());
    } else if (config.order != kForward) {
      std::shuffle(order.begin(), order.end(), rng);
    }
    for (uint64_t t : order) switch_to_fiber(launch, &launch->fibers[t]);

    std::map<std::pair<std::string, int>, std::vector<uint64_t>> barriers;
    std::vector<uint64_t> exited;
    for (uint64_t t = 0; t < launch->threads; ++t) {
      const Fiber& f = launch->fibers[t];
      if (f.status.load(std::memory_order_relaxed) == kExited) {
        exited.push_back(t);
      } else {
        barriers[{f.barrier_file.load(std::memory_order_relaxed),
                  f.barrier_line.load(std::memory_order_relaxed)}]
            .push_back(t);
      }
    }
    if (barriers.empty()) {
      launch->barrier_clock.load(std::memory_order_acquire);  // the block's writes
      return "";
    }
    if (barriers.size() > 1 || !exited.empty()) {
      std::ostringstream error;
      error << "divergent __syncthreads in block (" << block_idx.x << ", " << block_idx.y << ", "
            << block_idx.z << "): ";
      const char* separator = "";
      for (const auto& [site, threads] : barriers) {
        error << separator << "threads " << ranges(threads) << " wait at " << site.first << ":"
              << site.second;
        separator = "; ";
      }
      if (!exited.empty()) error << "; threads " << ranges(exited) << " have returned";
      error << " (every thread of a block must reach the same __syncthreads)";
      return error.str();
    }
    for (uint64_t t : barriers.begin()->second) {
      launch->fibers[t].status.store(kRunnable, std::memory_order_relaxed);
    }
  }
}

// The fibers' stacks (each below a guard page, so that an overflow faults)
// and TSan fibers of the launching thread, made once and reused by every
// launch: mapping them per launch costs more than the kernels.
class FiberStacks {
 public:
  FiberStacks() {
    page_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    bytes_ = (kStackBytes + page_) * kMaxThreadsPerBlock;
    void* memory = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (memory == MAP_FAILED) misuse("cannot map the emulated threads' stacks");
    memory_ = static_cast<char*>(memory);
    for (uint64_t t = 0; t < kMaxThreadsPerBlock; ++t) mprotect(slot(t), page_, PROT_NONE);
  }
  ~FiberStacks() {
#ifdef CUDA_EMU_TSAN
    for (void* fiber : tsan_fibers_) __tsan_destroy_fiber(fiber);
#endif
    munmap(memory_, bytes_);
  }
  char* stack(uint64_t t) { return slot(t) + page_; }
  void* tsan_fiber(uint64_t t) {
#ifdef CUDA_EMU_TSAN
    while (tsan_fibers_.size() <= t) tsan_fibers_.push_back(__tsan_create_fiber(0));
    return tsan_fibers_[t];
#else
    return nullptr;
#endif
  }
  void unpoison() {
#ifdef CUDA_EMU_ASAN
    ASAN_UNPOISON_MEMORY_REGION(memory_, bytes_);
#endif
  }

 private:
  char* slot(uint64_t t) { return memory_ + t * (kStackBytes + page_); }
  size_t page_ = 0;
  size_t bytes_ = 0;
  char* memory_ = nullptr;
  std::vector<void*> tsan_fibers_;
};

// Sets up the fibers and sanitizer state of one launch, and undoes it.
class LaunchScope {
 public:
  LaunchScope(Launch* launch, const LaunchConfig& config) {
    thread_local FiberStacks stacks;
    stacks_ = &stacks;
    launch->threads = volume(config.block);
    launch->fibers.reset(new Fiber[launch->threads]);
    for (uint64_t t = 0; t < launch->threads; ++t) {
      launch->fibers[t].stack = stacks.stack(t);
      launch->fibers[t].tsan_fiber = stacks.tsan_fiber(t);
    }
#ifdef CUDA_EMU_TSAN
    launch->main_tsan_fiber = __tsan_get_current_fiber();
#endif
#ifdef CUDA_EMU_ASAN
    for (const DynamicShared& array : dynamic_shared_arrays()) {
      ASAN_POISON_MEMORY_REGION(array.address() + config.dynamic_shared_bytes,
                                array.bytes - config.dynamic_shared_bytes);
    }
#endif
    tls_launch = launch;
  }
  ~LaunchScope() {
    tls_launch = nullptr;
#ifdef CUDA_EMU_ASAN
    for (const DynamicShared& array : dynamic_shared_arrays()) {
      ASAN_UNPOISON_MEMORY_REGION(array.address(), array.bytes);
    }
#endif
  }
  // Threads left at a divergent barrier leave poisoned frames behind.
  void abandoned() { stacks_->unpoison(); }

 private:
  FiberStacks* stacks_;
};

}  // namespace

const ThreadState& current() {
  Launch* launch = tls_launch;
  Fiber* fiber = launch ? launch->running.load(std::memory_order_relaxed) : nullptr;
  if (fiber == nullptr) misuse("threadIdx, blockIdx, blockDim or gridDim read outside a kernel");
  return fiber->state;
}

void syncthreads(const char* file, int line) {
  Launch* launch = tls_launch;
  Fiber* fiber = launch ? launch->running.load(std::memory_order_relaxed) : nullptr;
  if (fiber == nullptr) misuse("__syncthreads called outside a kernel");
  fiber->barrier_file.store(file, std::memory_order_relaxed);
  fiber->barrier_line.store(line, std::memory_order_relaxed);
  fiber->status.store(kWaiting, std::memory_order_relaxed);
  void* main_fiber = launch->main_tsan_fiber;
  launch->barrier_clock.fetch_add(1, std::memory_order_acq_rel);
  switch_to_main(launch, fiber, main_fiber, /*exiting=*/false);
  launch->barrier_clock.load(std::memory_order_acquire);
}

bool register_dynamic_shared(unsigned char* (*address)(), size_t bytes) {
  dynamic_shared_arrays().push_back({address, bytes});
  return true;
}

void run(const LaunchConfig& config, const std::function<void()>& body) {
  if (tls_launch != nullptr) throw LaunchError("invalid launch: a kernel cannot launch a kernel");
  check_config(config);
  Launch launch;
  launch.body = &body;
  std::string error;
  {
    LaunchScope scope(&launch, config);
    std::vector<uint64_t> blocks(volume(config.grid));
    for (uint64_t b = 0; b < blocks.size(); ++b) blocks[b] = b;
    std::mt19937_64 rng(config.order);
    if (config.order == kReverse) {
      std::reverse(blocks.begin(), blocks.end());
    } else if (config.order != kForward) {
      std::shuffle(blocks.begin(), blocks.end(), rng);
    }
    for (uint64_t b : blocks) {
      error = run_block(&launch, config, b, rng);
      if (!error.empty()) {
        scope.abandoned();
        break;
      }
    }
    launch.barrier_clock.load(std::memory_order_acquire);  // every thread's writes
  }
  if (!error.empty()) throw LaunchError(error);
}

}  // namespace cuda_emu::detail

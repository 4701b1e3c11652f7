// DistractorPool: fill, background refresh, uploads. The thread contract is
// documented in distractor_pool.h; the cross-thread state is
//   - per worker: two SPSC queues of staging slot indices (ready, free), and
//     staged_[k] (written by the owning worker before it pushes k to ready,
//     read by the consumer after it pops k: ordered by the queue);
//   - atomics (stop_, closed_, counters, next_serial_, failures_in_a_row_) and, under
//     mu_, the condition variable the workers sleep on (free slot, rate
//     token, back-off after failures, stop);
//   - failures_ under failures_mu_, worker_error_ under error_mu_.
#include "engine/pool/distractor_pool.h"

#include <ATen/Context.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/lockfree/spsc_queue.hpp>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "engine/pool/fill_progress.h"
#include "kernels/current_device.h"
#include "kernels/huge_pages.h"

#ifdef OBSAUG_WITH_CUDA
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#endif

namespace obsaug {

namespace {

using Clock = std::chrono::steady_clock;

// A worker's sleep after 2 N failed decodes in a row (distractor_pool.h, Faults).
constexpr std::chrono::milliseconds kFirstBackoff{10};
constexpr std::chrono::milliseconds kMaxBackoff{1000};

struct StagedImage {
  uint64_t serial = 0;
  uint32_t ref_index = 0;
  uint64_t checksum = 0;
};

// Lowers the calling thread's scheduling priority by `delta` nice levels
// (Linux: nice is per thread). Best effort; raising niceness needs no privilege.
void lower_thread_priority(int delta) {
#ifdef __linux__
  if (delta <= 0) return;
  const auto tid = static_cast<id_t>(::syscall(SYS_gettid));
  errno = 0;
  const int current = ::getpriority(PRIO_PROCESS, tid);
  if (errno == 0) (void)::setpriority(PRIO_PROCESS, tid, std::min(19, current + delta));
#endif
}

std::string join_paths(const std::vector<std::string>& paths, const char* separator = ", ") {
  std::string out;
  for (const auto& p : paths) out += (out.empty() ? "" : separator) + p;
  return out;
}

std::string hex(uint64_t value) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(value));
  return buf;
}

// `ref`'s path relative to the folder of `source`, the source that listed it:
// the directory itself, else the folder holding the list, shard or image
// file. A path outside it (an absolute .txt entry) stays whole.
std::string name_in_source(const ImageRef& ref, std::string source) {
  while (source.size() > 1 && source.back() == '/') source.pop_back();
  const auto under = [&](const std::string& folder) {
    return !folder.empty() && ref.path.size() > folder.size() + 1 &&
           ref.path.compare(0, folder.size(), folder) == 0 && ref.path[folder.size()] == '/';
  };
  if (under(source)) return ref.path.substr(source.size() + 1);
  const std::string parent = std::filesystem::path(source).parent_path().string();
  if (under(parent)) return ref.path.substr(parent.size() + 1);
  return ref.path;
}

}  // namespace

RefreshMode parse_refresh_mode(const std::string& name) {
  if (name == "async") return RefreshMode::kAsync;
  if (name == "sync") return RefreshMode::kSync;
  throw std::invalid_argument("DistractorPool mode must be \"async\" or \"sync\", got \"" + name +
                              "\"");
}

struct DistractorPool::Impl {
  struct Worker {
    explicit Worker(size_t slots) : ready(slots), free(slots) {}
    std::thread thread;
    boost::lockfree::spsc_queue<uint32_t> ready;  // worker -> consumer
    boost::lockfree::spsc_queue<uint32_t> free;   // consumer -> worker
  };

  explicit Impl(DistractorPoolOptions opts);
  ~Impl();

  void validate() const;
  void list(std::vector<ImageRef>* all, std::vector<size_t>* source_ends);
  void fill();
  void check_every_source_decodes(const std::vector<ImageRef>& all,
                                  const std::vector<size_t>& source_ends);
  void start_staging();
  void start_workers();
  void worker_main(size_t w);
  bool decode_one(ImageDecoder& decoder, uint64_t serial, uint8_t* out, StagedImage* staged);
  void record_failure(const ImageRef& ref, const char* message);
  bool wait_for_free_slot(Worker& me, uint32_t* slot);
  bool wait_for_rate_token();
  bool sleep_unless_stopped(Clock::duration duration);

  void prepare_async();
  void prepare_sync();
  void upload(uint32_t k);
  void release_staging(uint32_t k);
  void reclaim_finished_copies(bool wait_for_one);
  void wake_workers();
  void rethrow_worker_error();
  void restore(const PoolState& state);
  void set_cursor(const PoolCursor& cursor);
  // std::invalid_argument unless `cursor` is one this pool could be at.
  void check_cursor(const PoolCursor& cursor, const char* where) const;
  void close();

  uint8_t* staging_ptr(uint32_t k) { return staging_base_ + static_cast<size_t>(k) * image_bytes_; }

  DistractorPoolOptions opts_;
  std::vector<ImageRef> refs_;
  PoolListing listing_;
  AugmentSpec spec_;
  size_t image_bytes_ = 0;
  bool cuda_ = false;
  Clock::time_point started_ = Clock::now();

  at::Tensor images_;  // [P, C, Hp, Wp] on the device
  uint8_t* images_base_ = nullptr;
  at::Tensor staging_;  // [K, C, Hp, Wp] on the host (pinned for CUDA)
  uint8_t* staging_base_ = nullptr;
  std::vector<StagedImage> staged_;  // per staging slot

  // Consumer-only state.
  std::vector<SlotInfo> slots_;
  uint64_t next_stamp_ = 0;
  std::vector<uint32_t> in_flight_;  // staging slots with a copy in flight (CUDA)
  std::vector<uint32_t> sync_free_;  // sync mode: staging slots that may be written
  std::unique_ptr<ImageDecoder> sync_decoder_;
  bool released_since_wake_ = false;
#ifdef OBSAUG_WITH_CUDA
  std::vector<cudaEvent_t> copy_done_;  // per staging slot
#endif

  // Shared with the workers.
  std::vector<std::unique_ptr<Worker>> workers_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> closed_{false};  // set by close(); closed() reads it from any thread
  std::mutex mu_;                    // guards the sleeps of the workers and next_token_
  std::condition_variable cv_;
  Clock::time_point next_token_ = Clock::now();
  std::atomic<uint64_t> next_serial_{0};
  std::atomic<uint64_t> decoded_{0}, failed_{0}, uploaded_{0}, queued_{0}, calls_{0};
  std::atomic<uint64_t> written_call_sum_{0};   // sum over slots of SlotInfo::written_call
  std::atomic<uint64_t> failures_in_a_row_{0};  // async decodes since the last success
  mutable std::mutex failures_mu_;
  std::vector<DecodeFailure> failures_;          // reads and decodes, the first few
  std::vector<DecodeFailure> listing_failures_;  // set once by the listing
  std::mutex error_mu_;
  std::exception_ptr worker_error_;
  std::atomic<bool> has_worker_error_{false};

  // The process that built the pool and runs its decoder threads. A fork's
  // child (a DataLoader worker, os.fork) has none of them: there an async
  // pool would never refresh, and joining its threads would wait forever.
  const pid_t owner_pid_ = ::getpid();
  bool in_forked_child() const { return ::getpid() != owner_pid_; }
};

DistractorPool::Impl::Impl(DistractorPoolOptions opts) : opts_(std::move(opts)) {
  validate();
  opts_.device = with_current_index(opts_.device);
  std::vector<ImageRef> all;        // every rank's files
  std::vector<size_t> source_ends;  // all[source_ends[s - 1], source_ends[s]) is source s's
  list(&all, &source_ends);
  spec_.out_height = opts_.height;
  spec_.out_width = opts_.width;
  spec_.channels = opts_.channels;
  image_bytes_ = static_cast<size_t>(opts_.channels) * opts_.height * opts_.width;
  cuda_ = opts_.device.is_cuda();
  slots_.resize(static_cast<size_t>(opts_.size));

  fill();
  check_every_source_decodes(all, source_ends);
  try {  // from here on threads and CUDA events exist: close() releases them
    start_staging();
  } catch (...) {
    try {
      close();
    } catch (const std::exception& e) {  // the first error is the one to report
      std::fprintf(stderr, "obsaug: DistractorPool: error while closing: %s\n", e.what());
    }
    throw;
  }
}

// The staging slots, their CUDA events, and the sync decoder or the workers.
void DistractorPool::Impl::start_staging() {
  const int64_t staging_slots = opts_.mode == RefreshMode::kAsync
                                    ? int64_t{opts_.threads} * kStagingPerWorker
                                    : (cuda_ ? std::max<int64_t>(1, opts_.per_call) : 1);
  staging_ = at::empty({staging_slots, opts_.channels, opts_.height, opts_.width},
                       at::TensorOptions().dtype(at::kByte).pinned_memory(cuda_));
  staging_base_ = staging_.data_ptr<uint8_t>();
  staged_.resize(static_cast<size_t>(staging_slots));
#ifdef OBSAUG_WITH_CUDA
  if (cuda_) {
    c10::cuda::CUDAGuard guard(opts_.device);
    copy_done_.reserve(static_cast<size_t>(staging_slots));
    for (int64_t k = 0; k < staging_slots; ++k) {  // copy_done_ holds only created events
      cudaEvent_t event;
      C10_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
      copy_done_.push_back(event);
    }
  }
#endif
  if (opts_.mode == RefreshMode::kSync) {
    sync_decoder_ = std::make_unique<ImageDecoder>(opts_.limits);
    for (int64_t k = staging_slots - 1; k >= 0; --k) sync_free_.push_back(static_cast<uint32_t>(k));
  } else {
    start_workers();
  }
}

// Lists the sources one by one (made absolute first, so that a later chdir
// changes nothing), keeps this rank's share in refs_ and its PoolListing.
void DistractorPool::Impl::list(std::vector<ImageRef>* all, std::vector<size_t>* source_ends) {
  for (std::string& source : opts_.sources) {
    if (!source.empty()) source = std::filesystem::absolute(source).string();
  }
  ListingReport report;
  std::vector<size_t> source_of;  // per entry of *all
  for (size_t s = 0; s < opts_.sources.size(); ++s) {
    std::vector<ImageRef> refs = list_source(opts_.sources[s], &report);
    all->insert(all->end(), std::make_move_iterator(refs.begin()),
                std::make_move_iterator(refs.end()));
    source_of.resize(all->size(), s);
    source_ends->push_back(all->size());
  }
  refs_ = shard_refs(*all, opts_.rank, opts_.world_size);
  failed_ = report.failed;  // missing list entries, truncated shards: counted with the rest
  listing_failures_ = std::move(report.first_failures);
  if (refs_.size() > UINT32_MAX) {
    throw std::invalid_argument("DistractorPool: at most 2^32 - 1 images per rank, got " +
                                std::to_string(refs_.size()));
  }
  // shard_refs keeps all[rank + j * world_size] as refs_[j].
  uint64_t fingerprint = image_checksum(nullptr, 0);
  std::string entry;
  for (size_t j = 0; j < refs_.size(); ++j) {
    const ImageRef& ref = refs_[j];
    const size_t i = static_cast<size_t>(opts_.rank) + j * static_cast<size_t>(opts_.world_size);
    entry.assign(reinterpret_cast<const char*>(&fingerprint), sizeof fingerprint);
    entry += name_in_source(ref, opts_.sources[source_of[i]]);
    entry += '\0';
    entry += ref.member;
    entry += '\0';
    entry.append(reinterpret_cast<const char*>(&ref.size), sizeof ref.size);
    fingerprint = image_checksum(reinterpret_cast<const uint8_t*>(entry.data()), entry.size());
  }
  listing_ = PoolListing{refs_.size(), fingerprint};
}

// DESIGN.md section 4: a source with no usable image is an error at start-up
// naming it, also beside good sources. The fill's slots show which sources
// gave an image; each other one is tried in listing order, all ranks' files
// of it, until one decodes. These tries are checks only: they neither count
// in stats() nor call before_decode.
void DistractorPool::Impl::check_every_source_decodes(const std::vector<ImageRef>& all,
                                                      const std::vector<size_t>& source_ends) {
  std::vector<char> usable(source_ends.size(), 0);
  for (const SlotInfo& slot : slots_) {  // refs_[j] is all[rank + j * world_size]
    const size_t i = static_cast<size_t>(opts_.rank) +
                     static_cast<size_t>(slot.ref_index) * static_cast<size_t>(opts_.world_size);
    const auto s =
        std::upper_bound(source_ends.begin(), source_ends.end(), i) - source_ends.begin();
    usable[static_cast<size_t>(s)] = 1;
  }
  ImageDecoder decoder(opts_.limits);
  std::vector<uint8_t> scratch(image_bytes_);
  for (size_t s = 0; s < source_ends.size(); ++s) {
    const size_t begin = s == 0 ? 0 : source_ends[s - 1];
    std::vector<std::string> reasons;  // the first few
    for (size_t i = begin; i < source_ends[s] && !usable[s]; ++i) {
      try {
        const std::vector<uint8_t> bytes = read_image_bytes(all[i], opts_.limits.max_bytes);
        decoder.decode_augmented(bytes.data(), bytes.size(), all[i].display_name(), spec_,
                                 opts_.seed, 0, scratch.data());
        usable[s] = 1;
      } catch (const DecodeError& e) {
        if (reasons.size() < kMaxReportedFailures) reasons.push_back(e.what());
      } catch (const SourceError& e) {
        if (reasons.size() < kMaxReportedFailures) reasons.push_back(e.what());
      }
    }
    if (!usable[s]) {
      const size_t n = source_ends[s] - begin;
      throw SourceError("DistractorPool: image source " + opts_.sources[s] +
                        " holds no usable image: all " + std::to_string(n) + " of its listed " +
                        (n == 1 ? "file" : "files") + " failed to read or decode (" +
                        join_paths(reasons, "; ") + (n > reasons.size() ? "; ..." : "") +
                        "); remove it from the sources or give it a decodable JPEG or PNG");
    }
  }
}

DistractorPool::Impl::~Impl() {
  try {
    close();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "obsaug: DistractorPool: error while closing: %s\n", e.what());
  }
}

void DistractorPool::Impl::validate() const {
  std::ostringstream bad;
  if (opts_.sources.empty()) bad << "sources must name at least one path; ";
  if (opts_.size < 1) bad << "size must be >= 1, got " << opts_.size << "; ";
  if (opts_.height < 1 || opts_.width < 1) {
    bad << "image_size must be positive, got " << opts_.height << " x " << opts_.width << "; ";
  }
  if (opts_.channels != 1 && opts_.channels != 3) {
    bad << "channels must be 1 or 3, got " << opts_.channels << "; ";
  }
  // The fill decodes every image into host memory (and a CPU pool keeps
  // them there): a pool larger than the machine is refused before that.
  const double image_mib = static_cast<double>(std::max(opts_.channels, 1)) *
                           std::max(opts_.height, 1) * std::max(opts_.width, 1) / (1 << 20);
  const double pool_mib = image_mib * static_cast<double>(std::max<int64_t>(opts_.size, 1));
  const double ram_mib = static_cast<double>(physical_memory_bytes()) / (1 << 20);
  if (ram_mib > 0 && pool_mib > ram_mib) {
    bad << "size " << opts_.size << " x " << opts_.channels << "x" << opts_.height << "x"
        << opts_.width << " images needs " << static_cast<int64_t>(pool_mib)
        << " MiB of host memory, more than this machine's " << static_cast<int64_t>(ram_mib)
        << " MiB; lower size or image_size; ";
  }
  if (opts_.threads < 0) bad << "threads must be >= 0, got " << opts_.threads << "; ";
  if (opts_.worker_nice < 0) bad << "worker_nice must be >= 0, got " << opts_.worker_nice << "; ";
  if (opts_.max_per_second != 0 && !(opts_.max_per_second >= kMinMaxPerSecond)) {
    bad << "max_per_second must be 0 (no cap) or >= " << kMinMaxPerSecond << ", got "
        << opts_.max_per_second << "; ";
  }
  if (opts_.mode == RefreshMode::kSync && opts_.per_call < 1) {
    bad << "per_call must be >= 1 in sync mode, got " << opts_.per_call << "; ";
  }
  // As the config loader's pool.refresh.per_call: one call replaces at most
  // every slot once.
  if (opts_.mode == RefreshMode::kSync && opts_.per_call > opts_.size && opts_.size >= 1) {
    bad << "per_call must be at most size (" << opts_.size << ") in sync mode, got "
        << opts_.per_call << "; ";
  }
  if (opts_.world_size < 1) {
    bad << "world_size must be >= 1, got " << opts_.world_size << "; ";
  } else if (opts_.rank < 0 || opts_.rank >= opts_.world_size) {
    bad << "rank must be in [0, world_size) = [0, " << opts_.world_size << "), got " << opts_.rank
        << "; ";
  }
  if (!opts_.device.is_cpu() && !opts_.device.is_cuda()) {
    bad << "device must be cpu or cuda, got " << opts_.device.str() << "; ";
  }
#ifndef OBSAUG_WITH_CUDA
  if (opts_.device.is_cuda()) {
    bad << "device " << opts_.device.str() << " needs obsaug built with CUDA; ";
  }
#else
  if (opts_.device.is_cuda() && !at::hasCUDA()) {
    bad << "device " << opts_.device.str() << " requested but no CUDA device is available; ";
  }
#endif
  const std::string msg = bad.str();
  if (!msg.empty()) {
    throw std::invalid_argument("DistractorPool: " + msg.substr(0, msg.size() - 2));
  }
}

// Counts every failure; reports the first kMaxReportedFailures files, each
// once (a file fails again each epoch).
void DistractorPool::Impl::record_failure(const ImageRef& ref, const char* message) {
  failed_.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(failures_mu_);
  if (failures_.size() >= kMaxReportedFailures) return;
  std::string name = ref.display_name();
  const bool reported = std::any_of(failures_.begin(), failures_.end(),
                                    [&](const DecodeFailure& f) { return f.path == name; });
  if (!reported) failures_.push_back({std::move(name), message});
}

bool DistractorPool::Impl::decode_one(ImageDecoder& decoder, uint64_t serial, uint8_t* out,
                                      StagedImage* staged) {
  const uint32_t ref_index = file_for_serial(serial, refs_.size(), opts_.seed);
  const ImageRef& ref = refs_[ref_index];
  try {
    if (opts_.before_decode) opts_.before_decode(ref, serial);
    const std::vector<uint8_t> bytes = read_image_bytes(ref, opts_.limits.max_bytes);
    decoder.decode_augmented(bytes.data(), bytes.size(), ref.display_name(), spec_, opts_.seed,
                             serial, out);
  } catch (const DecodeError& e) {
    record_failure(ref, e.what());
    return false;
  } catch (const SourceError& e) {  // unreadable, gone, shrunk
    record_failure(ref, e.what());
    return false;
  }
  *staged = StagedImage{serial, ref_index, image_checksum(out, image_bytes_)};
  decoded_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

// Deterministic whatever the thread timing: pass 1 gives slot k serial k;
// each further pass gives the still-empty slots, in slot order, the next
// serials. Throws once the serials since the last success include a whole
// epoch (serials e*N .. e*N + N-1, every file once): then every file failed.
// Counting N failures would not do: N consecutive serials may straddle two
// epochs and miss the only good files of both.
void DistractorPool::Impl::fill() {
  const int64_t P = opts_.size;
  at::Tensor host = at::empty({P, opts_.channels, opts_.height, opts_.width},
                              at::TensorOptions().dtype(at::kByte).pinned_memory(cuda_));
  uint8_t* host_base = host.data_ptr<uint8_t>();
  FillProgress progress(opts_.show_progress);

  std::vector<int64_t> empty_slots(static_cast<size_t>(P));
  for (int64_t k = 0; k < P; ++k) empty_slots[static_cast<size_t>(k)] = k;
  const uint64_t n = refs_.size();
  uint64_t serial_base = 0;
  uint64_t failing_since = 0;  // the serial after the newest success
  std::atomic<int64_t> filled{0};
  while (!empty_slots.empty()) {
    const size_t m = empty_slots.size();
    std::vector<char> ok(m, 0);
    std::vector<StagedImage> staged(m);
    std::atomic<size_t> next{0};
    std::atomic<int> running{0};
    std::exception_ptr error;  // the first unexpected exception of a fill thread
    std::mutex error_mu;
    std::atomic<bool> abort{false};
    auto job = [&] {
      try {
        ImageDecoder decoder(opts_.limits);
        for (size_t i = next++; i < m && !abort.load(); i = next++) {
          uint8_t* out = host_base + static_cast<size_t>(empty_slots[i]) * image_bytes_;
          if (decode_one(decoder, serial_base + i, out, &staged[i])) {
            ok[i] = 1;
            ++filled;
          }
        }
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mu);
        if (!error) error = std::current_exception();
        abort = true;
      }
      --running;
    };
    const int n_threads =
        static_cast<int>(std::min<size_t>(static_cast<size_t>(std::max(1, opts_.threads)), m));
    std::vector<std::thread> threads;
    running = n_threads;
    try {
      for (int t = 0; t < n_threads; ++t) threads.emplace_back(job);
    } catch (...) {  // a thread did not start: stop and join those that did
      abort = true;
      for (auto& t : threads) t.join();
      throw;
    }
    while (progress.on() && running.load() > 0) {
      std::this_thread::sleep_for(progress.tick(filled.load(), P, n_threads));
    }
    for (auto& t : threads) t.join();
    if (error) std::rethrow_exception(error);

    std::vector<int64_t> still_empty;
    for (size_t i = 0; i < m; ++i) {
      const auto slot = static_cast<size_t>(empty_slots[i]);
      if (!ok[i]) {
        still_empty.push_back(empty_slots[i]);
        continue;
      }
      failing_since = serial_base + i + 1;
      slots_[slot] = SlotInfo{staged[i].serial, staged[i].ref_index, staged[i].checksum,
                              static_cast<uint64_t>(slot), 0};
    }
    serial_base += m;
    const uint64_t first_whole_epoch = (failing_since + n - 1) / n * n;
    if (serial_base >= first_whole_epoch + n) {
      std::ostringstream msg;
      msg << "DistractorPool: no usable image in " << join_paths(opts_.sources) << ": all " << n
          << " listed files failed to read or decode";
      std::lock_guard<std::mutex> lock(failures_mu_);
      for (const auto& f : failures_) msg << "; " << f.message;
      throw SourceError(msg.str());
    }
    empty_slots.swap(still_empty);
  }
  progress.done(P);
  next_serial_ = serial_base;
  next_stamp_ = static_cast<uint64_t>(P);
  images_ = cuda_ ? host.to(opts_.device) : host;  // blocking copy: the fill is complete
  images_base_ = images_.data_ptr<uint8_t>();
}

void DistractorPool::Impl::start_workers() {
  for (int w = 0; w < opts_.threads; ++w) {
    auto worker = std::make_unique<Worker>(kStagingPerWorker);
    for (int j = 0; j < kStagingPerWorker; ++j) {
      worker->free.push(static_cast<uint32_t>(w * kStagingPerWorker + j));
    }
    workers_.push_back(std::move(worker));
  }
  for (size_t w = 0; w < workers_.size(); ++w) {
    workers_[w]->thread = std::thread([this, w] { worker_main(w); });
    if (opts_.after_worker_start) opts_.after_worker_start(static_cast<int>(w));
  }
}

// False when stopped (before or during the sleep).
bool DistractorPool::Impl::sleep_unless_stopped(Clock::duration duration) {
  std::unique_lock<std::mutex> lock(mu_);
  return !cv_.wait_for(lock, duration, [&] { return stop_.load(); });
}

bool DistractorPool::Impl::wait_for_free_slot(Worker& me, uint32_t* slot) {
  while (!stop_.load()) {
    if (me.free.pop(*slot)) return true;
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return stop_.load() || me.free.read_available() > 0; });
  }
  return false;
}

// A token bucket of depth one shared by all workers: each decode reserves the
// next 1 / max_per_second interval and sleeps until it begins.
bool DistractorPool::Impl::wait_for_rate_token() {
  if (opts_.max_per_second <= 0) return !stop_.load();
  std::unique_lock<std::mutex> lock(mu_);
  const auto interval = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(1.0 / opts_.max_per_second));
  const auto start = std::max(Clock::now(), next_token_);
  next_token_ = start + interval;
  cv_.wait_until(lock, start, [&] { return stop_.load(); });
  return !stop_.load();
}

void DistractorPool::Impl::worker_main(size_t w) {
  Worker& me = *workers_[w];
  lower_thread_priority(opts_.worker_nice);
  try {
    ImageDecoder decoder(opts_.limits);
    uint32_t k = 0;
    bool holding = false;  // a free staging slot kept across failed decodes
    Clock::duration backoff = kFirstBackoff;
    const uint64_t give_up_streak = 2 * static_cast<uint64_t>(refs_.size());
    while (!stop_.load()) {
      if (!holding && !(holding = wait_for_free_slot(me, &k))) break;
      if (!wait_for_rate_token()) break;
      const uint64_t serial = next_serial_.fetch_add(1);
      if (decode_one(decoder, serial, staging_ptr(k), &staged_[k])) {
        failures_in_a_row_.store(0);  // the next failure starts the back-off afresh
        queued_.fetch_add(1);         // before the push, so queue_depth never underflows
        if (!me.ready.push(k)) throw std::logic_error("DistractorPool: ready queue overflow");
        holding = false;
      } else if (failures_in_a_row_.fetch_add(1) + 1 < give_up_streak) {
        backoff = kFirstBackoff;  // another worker's success ended the last outage
      } else {
        if (!sleep_unless_stopped(backoff)) break;
        backoff = std::min<Clock::duration>(2 * backoff, kMaxBackoff);
      }
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(error_mu_);
    if (!worker_error_) worker_error_ = std::current_exception();
    has_worker_error_ = true;
  }
}

void DistractorPool::Impl::rethrow_worker_error() {
  if (!has_worker_error_.load()) return;
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(error_mu_);
    error.swap(worker_error_);
    has_worker_error_ = false;
  }
  if (error) std::rethrow_exception(error);
}

void DistractorPool::Impl::wake_workers() {
  { std::lock_guard<std::mutex> lock(mu_); }  // a worker between its check and its wait
  cv_.notify_all();
}

void DistractorPool::Impl::release_staging(uint32_t k) {
  if (opts_.mode == RefreshMode::kSync) {
    sync_free_.push_back(k);
    return;
  }
  if (!workers_[k / kStagingPerWorker]->free.push(k)) {
    throw std::logic_error("DistractorPool: free queue overflow");
  }
  released_since_wake_ = true;
}

// CUDA: gives back the staging slots whose copy has completed; with
// `wait_for_one`, first blocks on the oldest copy (sync mode, no free slot).
void DistractorPool::Impl::reclaim_finished_copies(bool wait_for_one) {
#ifdef OBSAUG_WITH_CUDA
  if (in_flight_.empty()) return;
  if (wait_for_one) C10_CUDA_CHECK(cudaEventSynchronize(copy_done_[in_flight_.front()]));
  size_t kept = 0;
  for (const uint32_t k : in_flight_) {
    const cudaError_t status = cudaEventQuery(copy_done_[k]);
    if (status == cudaSuccess) {
      release_staging(k);
    } else if (status == cudaErrorNotReady) {
      (void)cudaGetLastError();  // not an error: clear it
      in_flight_[kept++] = k;
    } else {
      C10_CUDA_CHECK(status);
    }
  }
  in_flight_.resize(kept);
#endif
}

// Consumer thread: staging slot k -> the oldest pool slot.
void DistractorPool::Impl::upload(uint32_t k) {
  const uint64_t stamp = next_stamp_++;
  const size_t slot = static_cast<size_t>(stamp % static_cast<uint64_t>(opts_.size));
  uint8_t* dst = images_base_ + slot * image_bytes_;
  const uint8_t* src = staging_ptr(k);
  if (cuda_) {
#ifdef OBSAUG_WITH_CUDA
    const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(opts_.device.index()).stream();
    C10_CUDA_CHECK(cudaMemcpyAsync(dst, src, image_bytes_, cudaMemcpyHostToDevice, stream));
    C10_CUDA_CHECK(cudaEventRecord(copy_done_[k], stream));
    in_flight_.push_back(k);
#endif
  } else {
    std::memcpy(dst, src, image_bytes_);
  }
  const uint64_t call = calls_.load();
  SlotInfo& info = slots_[slot];
  written_call_sum_ += call - info.written_call;
  info = SlotInfo{staged_[k].serial, staged_[k].ref_index, staged_[k].checksum, stamp, call};
  uploaded_.fetch_add(1);
  if (!cuda_) release_staging(k);
}

void DistractorPool::Impl::prepare_async() {
  reclaim_finished_copies(false);
  // At most P uploads per call: more would overwrite this call's own images.
  uint64_t budget = static_cast<uint64_t>(opts_.size);
  bool progress = true;
  while (budget > 0 && progress) {  // round robin over the workers' queues
    progress = false;
    for (auto& worker : workers_) {
      uint32_t k;
      if (budget == 0 || !worker->ready.pop(k)) continue;
      queued_.fetch_sub(1);
      upload(k);
      --budget;
      progress = true;
    }
  }
  if (released_since_wake_) {
    released_since_wake_ = false;
    wake_workers();
  }
}

void DistractorPool::Impl::prepare_sync() {
  reclaim_finished_copies(false);
  // Up to per_call successes; a whole epoch of failures gives up for this call.
  const uint64_t max_attempts = static_cast<uint64_t>(opts_.per_call) + refs_.size();
  int64_t done = 0;
  for (uint64_t attempt = 0; done < opts_.per_call && attempt < max_attempts; ++attempt) {
    if (sync_free_.empty()) reclaim_finished_copies(true);
    const uint32_t k = sync_free_.back();
    sync_free_.pop_back();
    const uint64_t serial = next_serial_.fetch_add(1);
    if (decode_one(*sync_decoder_, serial, staging_ptr(k), &staged_[k])) {
      upload(k);
      ++done;
    } else {
      sync_free_.push_back(k);
    }
  }
}

void DistractorPool::Impl::check_cursor(const PoolCursor& cursor, const char* where) const {
  const uint64_t P = static_cast<uint64_t>(opts_.size);
  const auto fail = [&](const std::string& what) {
    throw std::invalid_argument(std::string("DistractorPool::") + where +
                                ": the cursor is outside its range: " + what);
  };
  for (const auto& [name, value] :
       {std::pair{"next_serial", cursor.next_serial}, std::pair{"next_stamp", cursor.next_stamp},
        std::pair{"calls", cursor.calls}}) {
    if (value > kMaxPoolCounter) {
      fail(std::string(name) + " " + std::to_string(value) +
           " is beyond 2^62 = " + std::to_string(kMaxPoolCounter) + ", the most a pool counts");
    }
  }
  if (cursor.next_stamp < P) {
    fail("next_stamp " + std::to_string(cursor.next_stamp) + " is below the pool's " +
         std::to_string(P) + " slots (the fill writes stamps 0.." + std::to_string(P - 1) +
         " first)");
  }
  if (cursor.next_stamp > cursor.next_serial) {
    fail("next_stamp " + std::to_string(cursor.next_stamp) + " is beyond next_serial " +
         std::to_string(cursor.next_serial) + " (each upload is of a serial decoded before it)");
  }
  if (cursor.calls > kMaxPoolCounter / P) {
    fail("calls " + std::to_string(cursor.calls) + " times the pool's " + std::to_string(P) +
         " slots passes 2^62 (the slots' ages are summed)");
  }
}

void DistractorPool::Impl::set_cursor(const PoolCursor& cursor) {
  next_serial_ = cursor.next_serial;
  next_stamp_ = cursor.next_stamp;
  calls_ = cursor.calls;
  for (auto& slot : slots_) slot.written_call = cursor.calls;  // ages restart at 0
  written_call_sum_ = cursor.calls * static_cast<uint64_t>(opts_.size);
}

void DistractorPool::Impl::restore(const PoolState& state) {
  if (closed_) throw std::logic_error("DistractorPool::restore after close()");
  const uint64_t P = static_cast<uint64_t>(opts_.size);
  const std::vector<uint64_t>& slot_serials = state.slot_serials;
  if (slot_serials.size() != P || state.slot_checksums.size() != P) {
    throw std::invalid_argument(
        "DistractorPool::restore: slot_serials and slot_checksums must hold one entry per slot "
        "(" +
        std::to_string(P) + "), got " + std::to_string(slot_serials.size()) + " and " +
        std::to_string(state.slot_checksums.size()));
  }
  check_cursor(state.cursor, "restore");
  for (size_t k = 0; k < slot_serials.size(); ++k) {
    if (slot_serials[k] >= state.cursor.next_serial) {
      throw std::invalid_argument("DistractorPool::restore: slot " + std::to_string(k) +
                                  " holds serial " + std::to_string(slot_serials[k]) +
                                  ", not one decoded before the cursor's next_serial " +
                                  std::to_string(state.cursor.next_serial));
    }
  }
  const std::string retry = "; restore with the sources the state was taken with";
  const std::string rank_files =
      opts_.world_size > 1
          ? " (rank " + std::to_string(opts_.rank) + " of " + std::to_string(opts_.world_size) + ")"
          : "";
  if (state.listing.files != listing_.files) {
    throw SourceError("DistractorPool::restore: the sources now list " +
                      std::to_string(listing_.files) + " files" + rank_files + ", " +
                      std::to_string(state.listing.files) + " when the state was taken" +
                      (state.listing.files == 0 ? " (a state without its listing)"
                                                : " (files added or deleted since)") +
                      "; its serials would name other files" + retry);
  }
  if (state.listing.fingerprint != listing_.fingerprint) {
    throw SourceError(
        "DistractorPool::restore: the sources list " + std::to_string(listing_.files) + " files" +
        rank_files +
        ", as many as when the state was taken, but not the same ones (listing "
        "fingerprint " +
        hex(listing_.fingerprint) + ", the state's " + hex(state.listing.fingerprint) +
        "): a file renamed, replaced or resized since, or the sources reordered" + retry);
  }
  // Decode everything first: a failure leaves the pool as it was.
  at::Tensor host = at::empty(images_.sizes(), at::TensorOptions().dtype(at::kByte));
  uint8_t* host_base = host.data_ptr<uint8_t>();
  std::vector<SlotInfo> restored(slot_serials.size());
  ImageDecoder decoder(opts_.limits);
  for (size_t k = 0; k < slot_serials.size(); ++k) {
    const uint64_t serial = slot_serials[k];
    const uint32_t ref_index = file_for_serial(serial, refs_.size(), opts_.seed);
    const ImageRef& ref = refs_[ref_index];
    uint8_t* out = host_base + k * image_bytes_;
    const std::string held = "DistractorPool::restore: slot " + std::to_string(k) +
                             " held serial " + std::to_string(serial) + " (" + ref.display_name() +
                             "), which ";
    try {
      const std::vector<uint8_t> bytes = read_image_bytes(ref, opts_.limits.max_bytes);
      decoder.decode_augmented(bytes.data(), bytes.size(), ref.display_name(), spec_, opts_.seed,
                               serial, out);
    } catch (const DecodeError& e) {
      throw SourceError(held + "no longer decodes: " + e.what() + retry);
    } catch (const SourceError& e) {  // unreadable, gone, shrunk
      throw SourceError(held + "no longer decodes: " + e.what() + retry);
    }
    const uint64_t checksum = image_checksum(out, image_bytes_);
    if (checksum != state.slot_checksums[k]) {
      throw SourceError(held + "now decodes to another image (checksum " + hex(checksum) +
                        ", the state's " + hex(state.slot_checksums[k]) +
                        "): the file changed since" + retry);
    }
    // The newest stamp below next_stamp that writes slot k (the fill's own
    // stamp k while fewer than P uploads are counted).
    const uint64_t n = state.cursor.next_stamp;
    const uint64_t stamp = n < P ? k : n - 1 - ((n - 1 - k) % P);
    restored[k] = SlotInfo{serial, ref_index, checksum, stamp, 0};
  }
  images_.copy_(host);  // blocking on CUDA: restore is not on the hot path
  slots_ = std::move(restored);
  set_cursor(state.cursor);
}

void DistractorPool::Impl::close() {
  if (closed_.exchange(true)) return;
  // In a fork's child the threads, mu_ and the CUDA events are the parent's:
  // a join would never return and a parent's worker may have held mu_ at the
  // fork. Nothing runs; ~DistractorPool leaks the pool there.
  if (in_forked_child()) return;
  stop_ = true;
  wake_workers();
  for (auto& worker : workers_) {
    if (worker->thread.joinable()) worker->thread.join();
  }
#ifdef OBSAUG_WITH_CUDA
  if (!copy_done_.empty()) {
    c10::cuda::CUDAGuard guard(opts_.device);
    for (const uint32_t k : in_flight_) C10_CUDA_CHECK(cudaEventSynchronize(copy_done_[k]));
    in_flight_.clear();
    for (auto& event : copy_done_) C10_CUDA_CHECK(cudaEventDestroy(event));
    copy_done_.clear();
  }
#endif
}

// --- the public face ----------------------------------------------------------

DistractorPool::DistractorPool(DistractorPoolOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

DistractorPool::~DistractorPool() {
  // In a fork's child the members are the parent's too: destroying cv_, which
  // the parent's decoders were waiting on at the fork, would block forever
  // (glibc waits for its waiters to leave). The child leaks the pool instead.
  if (impl_->in_forked_child()) (void)impl_.release();
}

void DistractorPool::prepare_for_augment() {
  Impl& im = *impl_;
  if (im.closed_) throw std::logic_error("DistractorPool::prepare_for_augment after close()");
  if (im.opts_.mode == RefreshMode::kAsync && im.in_forked_child()) {
    throw std::runtime_error(
        "DistractorPool: built in process " + std::to_string(im.owner_pid_) +
        " and used in process " + std::to_string(::getpid()) +
        ", a fork of it, where its background decoders do not run, so it would never refresh: "
        "build the Engine or pool in this process (e.g. in a DataLoader worker_init_fn or the "
        "env factory), or use refresh mode sync");
  }
  im.rethrow_worker_error();
  im.calls_.fetch_add(1);
#ifdef OBSAUG_WITH_CUDA
  std::optional<c10::cuda::CUDAGuard> guard;
  if (im.cuda_) guard.emplace(im.opts_.device);
#endif
  if (im.opts_.mode == RefreshMode::kSync) {
    im.prepare_sync();
  } else {
    im.prepare_async();
  }
}

void DistractorPool::close() { impl_->close(); }
bool DistractorPool::closed() const { return impl_->closed_; }
const at::Tensor& DistractorPool::images() const { return impl_->images_; }
const DistractorPoolOptions& DistractorPool::options() const { return impl_->opts_; }
const std::vector<ImageRef>& DistractorPool::refs() const { return impl_->refs_; }

DistractorPoolStats DistractorPool::stats() const {
  const Impl& im = *impl_;
  DistractorPoolStats s;
  s.decoded = im.decoded_.load();
  s.failed = im.failed_.load();
  s.uploaded = im.uploaded_.load();
  const double seconds = std::chrono::duration<double>(Clock::now() - im.started_).count();
  s.decode_rate = seconds > 0 ? static_cast<double>(s.decoded) / seconds : 0.0;
  s.calls = im.calls_.load();
  s.distinct_crops = static_cast<uint64_t>(im.opts_.size) + s.uploaded;
  s.new_crops_per_call =
      s.calls > 0 ? static_cast<double>(s.uploaded) / static_cast<double>(s.calls) : 0.0;
  const double mean_written =
      static_cast<double>(im.written_call_sum_.load()) / static_cast<double>(im.opts_.size);
  s.mean_age_calls = std::max(0.0, static_cast<double>(s.calls) - mean_written);
  s.queue_depth = im.queued_.load();
  std::lock_guard<std::mutex> lock(im.failures_mu_);
  s.first_failures = im.listing_failures_;
  s.first_failures.insert(s.first_failures.end(), im.failures_.begin(), im.failures_.end());
  return s;
}

SlotInfo DistractorPool::slot_info(int64_t slot) const {
  TORCH_CHECK(slot >= 0 && slot < impl_->opts_.size, "DistractorPool::slot_info: slot ", slot,
              " out of range [0, ", impl_->opts_.size, ")");
  return impl_->slots_[static_cast<size_t>(slot)];
}

PoolCursor DistractorPool::cursor() const {
  return PoolCursor{impl_->next_serial_.load(), impl_->next_stamp_, impl_->calls_.load()};
}

std::vector<uint64_t> DistractorPool::slot_serials() const {
  std::vector<uint64_t> serials;
  serials.reserve(impl_->slots_.size());
  for (const SlotInfo& slot : impl_->slots_) serials.push_back(slot.serial);
  return serials;
}

PoolListing DistractorPool::listing() const { return impl_->listing_; }

PoolState DistractorPool::state() const {
  PoolState state{cursor(), impl_->listing_, slot_serials(), {}};
  state.slot_checksums.reserve(impl_->slots_.size());
  for (const SlotInfo& slot : impl_->slots_) state.slot_checksums.push_back(slot.checksum);
  return state;
}

void DistractorPool::set_cursor(const PoolCursor& cursor) {
  impl_->check_cursor(cursor, "set_cursor");
  impl_->set_cursor(cursor);
}

void DistractorPool::restore(const PoolState& state) { impl_->restore(state); }

bool operator==(const PoolListing& a, const PoolListing& b) {
  return a.files == b.files && a.fingerprint == b.fingerprint;
}

uint32_t DistractorPool::ref_index_for_serial(uint64_t serial) const {
  return file_for_serial(serial, impl_->refs_.size(), impl_->opts_.seed);
}

AugmentSpec DistractorPool::augment_spec() const { return impl_->spec_; }

}  // namespace obsaug

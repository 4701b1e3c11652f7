// obsaug::Engine (engine/engine.h): the configured pipeline, the distractor
// pool and the step counter behind one object.
//
// Locking: `mu` is a reader-writer lock over the pool's content and its
// consumer-side state (cursor, staging queues).
//   - prepare_for_augment() (the refresh that writes pool slots) runs under
//     the exclusive lock, so refreshes from several augmenting threads are
//     serialised (the pool's consumer contract) and never overlap a read;
//   - the kernel runs under the shared lock: on CPU it reads the pool slots
//     while it holds the lock, so no refresh overwrites a slot mid-read; on
//     CUDA it only enqueues, and stream order does the rest (engine.h).
//   - state() / load_state() / close() take the exclusive lock.
// Without a pool (no overlay) or without refresh (refresh.threads = 0) the
// pool never changes after construction and augment takes no lock.
#include "engine/engine.h"

#include <ATen/MemoryOverlap.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>

#include <array>
#include <cstdio>
#include <list>
#include <mutex>
#include <stdexcept>
#include <utility>

#include "engine/pool/distractor_pool.h"
#include "kernels/augment.h"
#include "kernels/current_device.h"
#include "kernels/output_tensor.h"
#include "kernels/tensor_text.h"

namespace obsaug {
namespace {

DistributedRank checked(DistributedRank r) {
  if (r.world_size < 1) {
    throw std::invalid_argument("Engine: world_size must be >= 1, got " +
                                std::to_string(r.world_size));
  }
  if (r.rank < 0 || r.rank >= r.world_size) {
    throw std::invalid_argument("Engine: rank must be in [0, world_size) = [0, " +
                                std::to_string(r.world_size) + "), got rank " +
                                std::to_string(r.rank));
  }
  return r;
}

DistractorPoolOptions pool_options(const Config& config, const c10::Device& device,
                                   DistributedRank distributed, uint64_t seed) {
  const PoolConfig& p = config.pool;
  DistractorPoolOptions o;
  o.sources = p.sources;
  o.size = p.size;
  int64_t h = p.image_height;
  int64_t w = p.image_width;
  if (h <= 0 || w <= 0) {  // not inferred: the frame size the first op that reads the pool sees
    const std::vector<FrameSize> sizes =
        frame_sizes(config.pipeline, {config.frames.height, config.frames.width});
    size_t first = 0;
    while (first < config.pipeline.size() && !config.pipeline[first].schema().needs.pool) ++first;
    h = sizes[first].height;
    w = sizes[first].width;
  }
  o.height = static_cast<int>(h);
  o.width = static_cast<int>(w);
  o.channels = static_cast<int>(config.frames.channels);
  o.device = device;
  // refresh.threads = 0 means "fill once, never refresh": the pool fills
  // with one thread and starts no worker, and the engine never calls the
  // refresh in async mode.
  o.threads = static_cast<int>(p.refresh.threads);
  o.max_per_second = p.refresh.max_per_second;
  o.mode = p.refresh.mode;
  o.per_call = p.refresh.per_call;
  o.seed = seed;  // config.seed + rank (engine.h)
  o.rank = distributed.rank;
  o.world_size = distributed.world_size;
  return o;
}

// The buffers of config.output.reuse (engine.h, "Outputs"): per site, the
// most recently used first, at most kShapesPerSite.
class ReusedOutputs {
 public:
  static constexpr size_t kShapesPerSite = 4;

  // The site's buffer of this shape, dtype and device (made on first use).
  at::Tensor get(OutputSite site, at::IntArrayRef shape, const at::TensorOptions& options) {
    std::lock_guard<std::mutex> lock(mu_);
    std::list<at::Tensor>& buffers = sites_[static_cast<size_t>(site)];
    for (auto it = buffers.begin(); it != buffers.end(); ++it) {
      if (it->sizes() == shape && it->dtype() == options.dtype() &&
          it->device() == options.device()) {
        buffers.splice(buffers.begin(), buffers, it);
        return buffers.front();
      }
    }
    buffers.push_front(ops::fresh_output(shape, options));
    if (buffers.size() > kShapesPerSite) buffers.pop_back();
    return buffers.front();
  }

  void clear() {
    std::lock_guard<std::mutex> lock(mu_);
    for (std::list<at::Tensor>& buffers : sites_) buffers.clear();
  }

 private:
  std::mutex mu_;
  std::array<std::list<at::Tensor>, 4> sites_;  // indexed by OutputSite
};

}  // namespace

struct Engine::Impl {
  Config config;
  DistributedRank distributed;
  uint64_t seed = 0;  // config.seed + rank: the Philox key of the kernels and the pool
  c10::Device device{c10::kCPU};
  ops::OutputOptions float_output;  // used when config.output.dtype is float32
  std::unique_ptr<DistractorPool> pool;
  bool refreshes = false;  // the pool exists and refresh.threads > 0
  std::atomic<uint64_t> step{0};
  std::atomic<uint64_t> calls{0};
  std::atomic<uint64_t> samples{0};
  std::atomic<bool> closed{false};
  mutable std::shared_mutex mu;
  // The step the pool was last refreshed for (call()); guarded by mu.
  std::optional<uint64_t> refreshed_for;
  ReusedOutputs reused;  // used when config.output.reuse

  Impl(Config c, DistributedRank r)
      : config(std::move(c)),
        distributed(checked(r)),
        seed(config.seed + static_cast<uint64_t>(distributed.rank)),
        device(with_current_index(c10::Device(config.device))) {
    if (config.output.dtype == OutputDtype::kFloat32) {
      float_output.dtype = at::kFloat;
      float_output.scale = config.output.scale;
      float_output.bias = config.output.bias;
    }
    if (has_overlay(config.pipeline)) {
      pool = std::make_unique<DistractorPool>(pool_options(config, device, distributed, seed));
      refreshes = config.pool.refresh.threads > 0 || config.pool.refresh.mode == RefreshMode::kSync;
    }
  }

  void check_open() const {
    if (closed.load()) throw std::logic_error("engine is closed");
  }

  void check_obs(const at::Tensor& obs, const char* method) const {
    const std::string where = std::string("Engine.") + method + ": ";
    if (!obs.defined()) throw std::invalid_argument(where + "obs must be a tensor, got None");
    const std::string obs_must =
        where + "obs must be uint8 or float32 [B, S*C, H, W], got " + describe(obs);
    TORCH_CHECK_TYPE(obs.scalar_type() == at::kByte || obs.scalar_type() == at::kFloat, obs_must);
    if (obs.dim() != 4) throw std::invalid_argument(obs_must);
    check_device(obs, where);
    const FramesConfig& f = config.frames;
    // [B, H, W, S*C] where [B, S*C, H, W] belongs: said with the fix.
    const bool channels_last = obs.size(1) == f.height && obs.size(2) == f.width &&
                               obs.size(3) >= 1 && obs.size(3) % f.channels == 0;
    const std::string hint =
        channels_last ? "; it looks channels-last ([B, H, W, S*C]): pass obs.permute(0, 3, 1, 2)"
                      : "";
    if (obs.size(1) < 1 || obs.size(1) % f.channels != 0) {
      throw std::invalid_argument(
          where + "obs has " + std::to_string(obs.size(1)) +
          " channels, expected a positive multiple of frames.channels = " +
          std::to_string(f.channels) + " (e.g. " + std::to_string(f.stack * f.channels) + " for " +
          std::to_string(f.stack) + " stacked frames); got " + describe(obs) + hint);
    }
    if (obs.size(2) != f.height || obs.size(3) != f.width) {
      throw std::invalid_argument(
          where + "obs frames must be " + std::to_string(f.height) + "x" + std::to_string(f.width) +
          " (frames.height x frames.width), got " + std::to_string(obs.size(2)) + "x" +
          std::to_string(obs.size(3)) + " in " + describe(obs) + hint);
    }
  }

  // One call: `kernel(pool, step)`, counting `batch` samples. The step is
  // the explicit one, else the counter's next value; the kernel takes it
  // only once its checks have passed (ops::Step), so a rejected call takes
  // no step and leaves the pool as it was. Taking it refreshes the pool,
  // unless it is the step the pool was last refreshed for: calls in a row at
  // one step (obs and next_obs sharing parameters) see the same
  // distractors. With a refreshing pool the whole call holds the exclusive
  // lock, since the refresh writes slots the kernel reads; otherwise none.
  template <typename Kernel>
  auto call(int64_t batch, std::optional<uint64_t> explicit_step, Kernel&& kernel) {
    const auto counted = [&](auto&& result) {
      calls.fetch_add(1, std::memory_order_relaxed);
      samples.fetch_add(static_cast<uint64_t>(batch), std::memory_order_relaxed);
      return std::forward<decltype(result)>(result);
    };
    if (!refreshes) {
      const ops::Step s = explicit_step ? ops::Step(*explicit_step)
                                        : ops::Step::taken_by([this] { return step.fetch_add(1); });
      return counted(kernel(pool ? std::optional<at::Tensor>(pool->images()) : std::nullopt, s));
    }
    std::unique_lock<std::shared_mutex> lock(mu);
    check_open();
    const ops::Step s = ops::Step::taken_by([&] {
      const uint64_t value = explicit_step ? *explicit_step : step.fetch_add(1);
      if (refreshed_for != value) {
        pool->prepare_for_augment();
        refreshed_for = value;
      }
      return value;
    });
    return counted(kernel(std::optional<at::Tensor>(pool->images()), s));
  }

  // uint8 output means "the input's dtype": float32 obs (0..255, the
  // DMControl-GB convention) stays float32 (the kernel has no float -> uint8).
  ops::OutputOptions output() const {
    return config.output.dtype == OutputDtype::kFloat32 ? float_output : ops::OutputOptions{};
  }

  // output() with where the result goes: the caller's `out`, else a reused
  // buffer of `site` for a result [batch, channels, out_h, out_w] of
  // `input`'s dtype and device (config.output.reuse), else a fresh tensor.
  ops::OutputOptions output_into(const at::Tensor& out, OutputSite site, const at::Tensor& input,
                                 int64_t batch, int64_t channels) {
    ops::OutputOptions o = output();
    if (out.defined()) {
      o.out = out;
    } else if (config.output.reuse && batch > 0) {
      const FrameSize size = frame_sizes(config.pipeline, {input.size(2), input.size(3)}).back();
      o.out = reused.get(site, {batch, channels, size.height, size.width},
                         input.options().dtype(o.dtype.value_or(input.scalar_type())));
      // An earlier result passed back in is this very buffer: said here, as
      // the lifetime rule, rather than by the kernels' check of an out= the
      // caller never passed.
      if (input.numel() > 0 && at::get_overlap_status(o.out, input) != at::MemOverlapStatus::No) {
        const bool obs = site == OutputSite::kAugment;
        throw std::invalid_argument(
            std::string(obs ? "Engine.augment: obs" : "Engine.gather_augment: storage") +
            " is this engine's reused output, the buffer this call writes (output.reuse: a "
            "result is valid until the next call of the same site with its shape and dtype); "
            "pass a clone" +
            (obs ? ", or augment it in place with augment_" : ""));
      }
    }
    return o;
  }

  void check_storage(const at::Tensor& storage, const at::Tensor& indices) const {
    const std::string where = "Engine.gather_augment: ";
    if (!storage.defined() || !indices.defined()) {
      throw std::invalid_argument(where + "storage and indices must be tensors, got None");
    }
    const FramesConfig& f = config.frames;
    if (storage.dim() != 4 || storage.size(1) != f.channels || storage.size(2) != f.height ||
        storage.size(3) != f.width) {
      throw std::invalid_argument(where + "storage must be frames [N, " +
                                  std::to_string(f.channels) + ", " + std::to_string(f.height) +
                                  ", " + std::to_string(f.width) +
                                  "] (frames.channels, height, width), got " + describe(storage));
    }
    check_device(storage, where);
  }

  void check_device(const at::Tensor& t, const std::string& where) const {
    if (t.device() != device &&
        !(device.is_cuda() && !device.has_index() && t.device().is_cuda())) {
      throw std::invalid_argument(where + "tensors must be on " + device.str() +
                                  " (the config's device), got " + t.device().str());
    }
  }
};

Engine::Engine(Config config, DistributedRank distributed)
    : impl_(std::make_unique<Impl>(std::move(config), distributed)) {}

Engine Engine::from_file(const std::string& path, DistributedRank distributed) {
  return Engine(load_config_file(path), distributed);
}

Engine::~Engine() {
  try {
    close();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "obsaug: Engine: error while closing: %s\n", e.what());
  }
}

Engine::Engine(Engine&&) noexcept = default;

Engine& Engine::operator=(Engine&& other) noexcept {
  if (this != &other) {
    try {
      close();
    } catch (...) {
    }
    impl_ = std::move(other.impl_);
  }
  return *this;
}

at::Tensor Engine::augment(const at::Tensor& obs, std::optional<uint64_t> step,
                           const at::Tensor& out) {
  if (!impl_) throw std::logic_error("engine is closed");
  Impl& d = *impl_;
  d.check_open();
  d.check_obs(obs, "augment");
  const ops::OutputOptions output =
      d.output_into(out, OutputSite::kAugment, obs, obs.size(0), obs.size(1));
  return d.call(obs.size(0), step, [&](const std::optional<at::Tensor>& pool, const ops::Step& s) {
    return ops::augment(obs, pool, d.config.pipeline, d.seed, s, output, d.config.frames.channels);
  });
}

void Engine::augment_(const at::Tensor& obs, std::optional<uint64_t> step) {
  if (!impl_) throw std::logic_error("engine is closed");
  Impl& d = *impl_;
  d.check_open();
  d.check_obs(obs, "augment_");
  d.call(obs.size(0), step, [&](const std::optional<at::Tensor>& pool, const ops::Step& s) {
    ops::augment_(obs, pool, d.config.pipeline, d.seed, s, d.config.frames.channels);
    return 0;
  });
}

at::Tensor Engine::gather_augment(const at::Tensor& storage, const at::Tensor& indices,
                                  std::optional<uint64_t> step, bool check_indices,
                                  const at::Tensor& out, OutputSite site) {
  if (!impl_) throw std::logic_error("engine is closed");
  Impl& d = *impl_;
  d.check_open();
  d.check_storage(storage, indices);
  if (check_indices) ops::check_gather_indices(storage, indices);  // before the step is taken
  // (indices of another rank than 2 are left to ops::gather_augment's message)
  const ops::OutputOptions output =
      indices.dim() == 2
          ? d.output_into(out, site, storage, indices.size(0), indices.size(1) * storage.size(1))
          : d.output_into(out, site, storage, 0, 0);
  return d.call(
      indices.size(0), step, [&](const std::optional<at::Tensor>& pool, const ops::Step& s) {
        return ops::gather_augment(storage, indices, pool, d.config.pipeline, d.seed, s, output,
                                   /*check_indices=*/false);
      });
}

uint64_t Engine::gather_output_bytes(const at::Tensor& storage, int64_t batch,
                                     int64_t stack) const {
  if (!impl_) throw std::logic_error("engine is closed");
  const Impl& d = *impl_;
  const FrameSize size =
      frame_sizes(d.config.pipeline, {d.config.frames.height, d.config.frames.width}).back();
  const at::ScalarType dtype = d.output().dtype.value_or(storage.scalar_type());
  return ops::result_bytes({batch, stack * d.config.frames.channels, size.height, size.width},
                           at::TensorOptions().dtype(dtype));
}

at::Tensor Engine::gather_augment_for(const at::Tensor& storage, const at::Tensor& indices,
                                      uint64_t seed, uint64_t step, const at::Tensor& sample_ids,
                                      const at::Tensor& out, const at::Tensor& out_rows) {
  if (!impl_) throw std::logic_error("engine is closed");
  Impl& d = *impl_;
  d.check_open();
  d.check_storage(storage, indices);
  ops::check_gather_indices(storage, indices);
  ops::OutputOptions output = d.output();
  output.out = out;
  return d.call(
      indices.size(0), step, [&](const std::optional<at::Tensor>& pool, const ops::Step& s) {
        return ops::gather_augment(storage, indices, pool, d.config.pipeline, seed, s, output,
                                   /*check_indices=*/false, sample_ids, out_rows);
      });
}

uint64_t Engine::reserve_steps(uint64_t count) {
  if (!impl_) throw std::logic_error("engine is closed");
  return impl_->step.fetch_add(count);
}

uint64_t Engine::step() const { return impl_ ? impl_->step.load() : 0; }

const Config& Engine::config() const {
  if (!impl_) throw std::logic_error("engine is closed");
  return impl_->config;
}

DistributedRank Engine::distributed() const {
  if (!impl_) throw std::logic_error("engine is closed");
  return impl_->distributed;
}

uint64_t Engine::seed() const {
  if (!impl_) throw std::logic_error("engine is closed");
  return impl_->seed;
}

c10::Device Engine::device() const {
  if (!impl_) throw std::logic_error("engine is closed");
  return impl_->device;
}

EngineStats Engine::stats() const {
  EngineStats s;
  if (!impl_) return s;
  const Impl& d = *impl_;
  s.calls = d.calls.load();
  s.samples = d.samples.load();
  s.step = d.step.load();
  s.has_pool = d.pool != nullptr;
  if (d.pool) {
    const DistractorPoolStats p = d.pool->stats();
    s.pool_decoded = p.decoded;
    s.pool_failed = p.failed;
    s.pool_uploaded = p.uploaded;
    s.pool_decode_rate = p.decode_rate;
    s.pool_mean_age_calls = p.mean_age_calls;
    s.pool_queue_depth = p.queue_depth;
    s.pool_distinct_crops = p.distinct_crops;
    s.pool_new_crops_per_call = p.new_crops_per_call;
    s.pool_first_failures = p.first_failures;
  }
  return s;
}

EngineState Engine::state() const {
  if (!impl_) throw std::logic_error("engine is closed");
  const Impl& d = *impl_;
  d.check_open();
  std::unique_lock<std::shared_mutex> lock(d.mu);
  EngineState s;
  s.seed = d.seed;
  s.step = d.step.load();
  if (d.pool) {
    PoolState p = d.pool->state();
    s.pool_serial = p.cursor.next_serial;
    s.pool_stamp = p.cursor.next_stamp;
    s.pool_calls = p.cursor.calls;
    s.pool_slots = std::move(p.slot_serials);
    s.pool_files = p.listing.files;
    s.pool_listing = p.listing.fingerprint;
    s.pool_checksums = std::move(p.slot_checksums);
  }
  return s;
}

void Engine::load_state(const EngineState& state) {
  if (!impl_) throw std::logic_error("engine is closed");
  Impl& d = *impl_;
  d.check_open();
  if (state.seed != d.seed) {
    throw std::invalid_argument(
        "Engine.load_state: the state's seed " + std::to_string(state.seed) +
        " differs from the engine's seed " + std::to_string(d.seed) + " (config seed " +
        std::to_string(d.config.seed) + " + rank " + std::to_string(d.distributed.rank) +
        "); build the engine from the config and rank the state was "
        "taken with");
  }
  std::unique_lock<std::shared_mutex> lock(d.mu);
  if (d.pool) {
    const int64_t P = d.pool->options().size;
    const bool sync = d.pool->options().mode == RefreshMode::kSync;
    const PoolCursor cursor{state.pool_serial, state.pool_stamp, state.pool_calls};
    if (sync && !state.pool_slots.empty()) {
      if (static_cast<int64_t>(state.pool_slots.size()) != P) {
        throw std::invalid_argument("Engine.load_state: the state holds " +
                                    std::to_string(state.pool_slots.size()) +
                                    " pool slots, the engine's pool has " + std::to_string(P));
      }
      // The content and the cursor, refused over another listing.
      d.pool->restore(PoolState{cursor, PoolListing{state.pool_files, state.pool_listing},
                                state.pool_slots, state.pool_checksums});
    } else {
      d.pool->set_cursor(cursor);
    }
  }
  d.step.store(state.step);
  // As if the state's last step had been the last call's (exact for steps
  // taken from the counter): a call that repeats it shares its distractors.
  d.refreshed_for =
      state.step > 0 ? std::optional<uint64_t>(state.step - 1) : std::optional<uint64_t>();
}

const DistractorPool* Engine::pool() const { return impl_ ? impl_->pool.get() : nullptr; }

void Engine::close() {
  if (!impl_) return;
  Impl& d = *impl_;
  std::unique_lock<std::shared_mutex> lock(d.mu);  // waits for augment calls in flight
  if (d.closed.exchange(true)) return;
  d.reused.clear();
  if (d.pool) d.pool->close();
}

bool Engine::closed() const { return !impl_ || impl_->closed.load(); }

}  // namespace obsaug

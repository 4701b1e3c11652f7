// Streaming (non-temporal) stores for CPU outputs larger than the cache.
//
// A plain store to a line not in the cache first reads the line from memory
// (read for ownership), so an output that does not fit in the cache costs
// three transfers per line: the input read, the output line read, the
// output written back. Non-temporal stores write whole lines without reading
// them: two transfers. On the 2-core build VM (BENCHMARKS.md, "Streaming
// stores for outputs larger than the cache") this made the float32 shift at
// B = 128 and 256 about 13% faster and a replay gather without ops about a
// third faster. An output that fits in the cache is slower streamed (it goes
// to memory instead of staying for its reader, and the input and output
// then share the cache), so only outputs of at least
// stream_threshold_bytes() are streamed (streams_output; by one thread,
// an output written straight from its input from less, streams_from_input).
#pragma once

#include <algorithm>
#include <cstdint>

namespace obsaug {

// Out-of-place outputs of at least this many bytes are streamed:
// stream_threshold_for_cache of the last-level cache of one core (sysfs,
// else sysconf).
int64_t stream_threshold_bytes();

// The threshold for a last-level cache of `cache_bytes` (0: unknown): a
// quarter of it (8 MiB of 32 on the first build VM, an AMD host where
// streaming lost at 8 MB and won from 16 MB), 8 MiB when unknown, and at
// most 32 MiB: a cache reported larger than 128 MiB is a server socket's,
// which a VM sees whole (480 MiB for 2 vCPUs on the second build VM, an
// Intel host), and one core's share of it is far smaller. There, with
// 64 MB of other work between calls and a reader of the output, streaming
// won from 33 MB for a float32 output converted from uint8 and from 49 MB
// for a float32 shift, and was up to 1.4x slower below (BENCHMARKS.md,
// "The streaming threshold on a host with a 480 MiB cache").
int64_t stream_threshold_for_cache(int64_t cache_bytes);

// Whether an out-of-place output of `bytes` is streamed: at least the
// threshold.
bool streams_output(int64_t bytes);

// Whether an output written straight from its input with streaming stores
// (the float32 moves, stream_translated_plane, and the copy-only path of a
// replay sample without augmentation), without first building each plane
// in scratch, by `threads` threads is streamed: from the threshold, and
// with one thread from 3/4 of it (6 MiB on the build VM). There, with one
// thread, a float32 shift of 9x84x84 frames streamed took 0.45-0.79x the
// time at B = 32 (8.1 MB, twelve same-process runs; 0.82-1.03x with a pass
// that reads the output after it), 0.49-0.50x at B = 28, and at B = 24
// (6.1 MB, below 6 MiB) 0.78x alone but 1.07x with the read; a replay
// buffer's sample(128) (two 8.1 MB outputs) 0.67-0.78x (four runs; with a
// read of both outputs 0.92-0.94x in three, 1.27x in one). With two threads
// the float32 shift streamed lost at B = 28 and 32 (1.3-1.5x) and the runs
// disagreed at B = 48 (1.08x and 0.68x), so two threads keep the threshold
// (BENCHMARKS.md, "A lone thread streams from 6 MiB what it writes straight
// from the input").
bool streams_from_input(int64_t bytes, int64_t threads);

// For tests: streams outputs of at least `bytes` from now on; a negative
// value restores the default. Not for concurrent use with running ops.
void set_stream_threshold_bytes(int64_t bytes);

// Copies n bytes from src to dst (not overlapping): non-temporal 16-byte
// stores on the 16-byte aligned part of dst, plain stores at its ends
// (x86-64; elsewhere a memcpy). The writes are weakly ordered: the writing
// thread calls stream_fence() before any other thread may read dst.
// [ahead, ahead + ahead_bytes) is prefetched on the way, spread over the
// copy: what the caller reads next (the next plane's input), so that its
// reads overlap these writes instead of following them.
void stream_bytes(void* dst, const void* src, int64_t n, const void* ahead = nullptr,
                  int64_t ahead_bytes = 0);

// Prefetches [ahead, ahead + bytes), what a streaming store loop's caller
// reads next, spread over the loop: line() before each 64-byte line of the
// `store_bytes` it writes, finish() after the last, so that those reads
// overlap the writes instead of following them.
class LinePrefetch {
 public:
  LinePrefetch(const void* ahead, int64_t bytes, int64_t store_bytes)
      : next_(static_cast<const unsigned char*>(ahead)),
        bytes_(bytes),
        per_line_(bytes > 0 ? (bytes + store_bytes - 1) / std::max<int64_t>(store_bytes, 1) : 0) {}
  void line() {
    for (int64_t k = 0; k < per_line_ && fetched_ < bytes_; ++k, fetched_ += 64)
      __builtin_prefetch(next_ + fetched_);
  }
  void finish() {
    for (; fetched_ < bytes_; fetched_ += 64) __builtin_prefetch(next_ + fetched_);
  }

 private:
  const unsigned char* next_;
  int64_t bytes_;
  int64_t per_line_;  // lines fetched per line stored
  int64_t fetched_ = 0;
};

// Orders this thread's streaming stores before its later stores (sfence).
void stream_fence();

}  // namespace obsaug

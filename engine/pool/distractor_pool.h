// The distractor pool (DESIGN.md section 4): P decoded photographs in a
// [P, C, Hp, Wp] uint8 tensor on the engine's device, read by the overlay op
// (kernels/augment.h), and kept fresh by background decoder threads.
//
// Life cycle
//   - The constructor makes relative sources absolute (against the working
//     directory then: a later chdir changes nothing), lists them (SourceError
//     naming the path when one holds no image), shards them by (rank,
//     world_size), and fills all P slots with max(1, `threads`) temporary
//     threads (a progress line on stderr when it is a terminal). The fill is
//     deterministic: slot k holds the k-th image of the seeded file order
//     that decoded successfully. It gives up (SourceError) only once a run of
//     consecutive failures covers a whole epoch of the file order, i.e. every
//     file failed. Then every source must have given an image: one the fill
//     did not draw from is tried in listing order (all ranks' files of it)
//     until an image decodes; a source where none does is a SourceError
//     naming it (those tries are checks: not counted in stats()).
//   - async mode: `threads` workers then decode continuously into staging
//     slots (pinned host memory when the device is CUDA). Each worker owns
//     `kStagingPerWorker` staging slots and two Boost.Lockfree SPSC queues:
//     `ready` (worker -> consumer: staged slot indices) and `free` (consumer
//     -> worker: slots that may be overwritten again). threads = 0 starts no
//     worker: the pool keeps its fill and prepare_for_augment() does nothing.
//   - sync mode: no background threads; each prepare_for_augment() decodes
//     `per_call` images on the calling thread from the seeded file order, so
//     the pool's content after N calls is a pure function of (sources, seed,
//     options, N): bit-reproducible.
//   - close() / the destructor stop, wake and join the workers.
//
// The consumer ("augment thread") is whichever single thread calls
// prepare_for_augment() and then the augment ops on images(). Uploads into
// the pool happen only there: on CPU by memcpy, on CUDA by cudaMemcpyAsync on
// the current PyTorch stream, followed by an event per staging slot; a staging
// slot goes back to its worker only once its event has completed (queried at
// the next prepare_for_augment()). Hence
//   - a kernel enqueued on that stream after prepare_for_augment() sees only
//     complete images (stream order), and kernels enqueued earlier finish
//     before their slots are overwritten;
//   - no staging slot is overwritten while a copy from it is in flight.
// Augmenting on a different stream needs the caller's own synchronisation.
//
// File order: serial s (0, 1, 2, ...) decodes file perm_{s / N}(s % N) of the
// N files of this rank, where perm_e is a seeded pseudo-random permutation
// of epoch e (engine/pool/file_order.h); its random crop and flip use
// Philox(seed, serial = s) (engine/decode/decode.h). Slots are replaced
// oldest first (round robin after the fill), so a slot's age is at most
// about P / (images per call) calls.
//
// Save and restore: state() is the pool's whole state (the cursor, each
// slot's serial and image checksum, and the listing its serials refer to);
// restore() rebuilds the content from it (P decodes), so a sync-mode pool
// restored from a saved state continues bit-exactly. A serial names a file
// only through (number of files, seed), so restore() refuses a state taken
// over another listing (a file added, deleted, renamed or resized since), and
// an image that decodes to other pixels than it did (a file changed in place).
//
// Faults: a file that fails to read or decode (zero-byte, truncated, not an
// image, too large, deleted mid-run) is skipped and counted, the first
// kMaxReportedFailures files kept with their messages, each file once; so are what the listing
// skipped (.txt entries naming no file, a truncated tar shard: ListingReport).
// When 2 N decodes in a row have failed (N = this rank's files: every file,
// e.g. the folder vanished), each async worker sleeps before its next try,
// 10 ms doubling up to 1 s, until a decode succeeds again; close() wakes it.
// Any other exception in a worker ends that worker and is rethrown by the
// next prepare_for_augment().
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/decode/decode.h"
#include "engine/pool/file_order.h"
#include "engine/pool/refresh_mode.h"
#include "engine/source/image_source.h"

namespace obsaug {

// "async" or "sync"; std::invalid_argument otherwise.
RefreshMode parse_refresh_mode(const std::string& name);

struct DistractorPoolOptions {
  std::vector<std::string> sources;  // directories, .txt lists, .tar shards, image files
  int64_t size = 1024;               // P
  int height = 84;                   // Hp
  int width = 84;                    // Wp
  int channels = 3;                  // C: 3 (RGB) or 1 (grayscale)
  c10::Device device = c10::Device(c10::kCPU);
  // Fill threads (0 fills with one), and decoder workers in async mode (0:
  // none, the pool is never refreshed).
  int threads = 2;
  // Async decode rate cap over all workers: 0 (none) or at least
  // kMinMaxPerSecond (engine/pool/refresh_mode.h).
  double max_per_second = 0;
  int worker_nice = 10;  // async workers run this much nicer than the caller
                         // (Linux), so decoding yields to the augment thread
  RefreshMode mode = RefreshMode::kAsync;
  int64_t per_call = 8;  // sync: images refreshed per prepare_for_augment(), 1..size
  uint64_t seed = 0;     // file order, crops and flips
  int rank = 0;          // this process's share of the files, 0 <= rank < world_size
  int world_size = 1;
  DecodeLimits limits;        // per-file byte and pixel caps
  bool show_progress = true;  // progress line during the fill (only on a terminal)
  // Test hook, called on the decoding thread before each image is read
  // (fill, workers, sync refresh). An exception it throws is treated as if
  // the decode had thrown it.
  std::function<void(const ImageRef& ref, uint64_t serial)> before_decode;
  // Test hook, called by the constructor after it started async worker w
  // (0, 1, ...). An exception it throws fails the construction, as a failed
  // thread start would: the workers already started are stopped and joined.
  std::function<void(int worker)> after_worker_start;
};

// A skipped input: path = ImageRef::display_name() (or the list entry, the
// shard), message = the DecodeError / SourceError text. At most
// kMaxReportedFailures (engine/source/image_source.h) are kept.
using DecodeFailure = SourceFailure;

struct DistractorPoolStats {
  uint64_t decoded = 0;       // images decoded successfully (fill included)
  uint64_t failed = 0;        // images that failed to read or decode, + the listing's skips
  uint64_t uploaded = 0;      // images written into the pool after the fill
  double decode_rate = 0;     // decoded / seconds since construction began
  double mean_age_calls = 0;  // mean over slots of prepare calls since the slot was written
  uint64_t queue_depth = 0;   // staged images waiting for the next prepare_for_augment()
  uint64_t calls = 0;         // prepare_for_augment() calls so far
  // Distinct crops the pool has held: its size at the fill plus every upload
  // (each decode is a fresh random-resized crop), and the rate new ones come
  // in: uploaded / calls (0 before the first call). An overlay's calls see
  // at most size + new_crops_per_call per call of them.
  uint64_t distinct_crops = 0;
  double new_crops_per_call = 0;
  // The listing's first kMaxReportedFailures, then the reads' and decodes'.
  std::vector<DecodeFailure> first_failures;
};

// What a pool slot holds (for tests, previews and state_dict).
struct SlotInfo {
  uint64_t serial = 0;        // the image's serial number (file order position)
  uint32_t ref_index = 0;     // index into refs()
  uint64_t checksum = 0;      // image_checksum of the staged image
  uint64_t stamp = 0;         // write order: 0..P-1 for the fill, then P, P+1, ...
  uint64_t written_call = 0;  // calls() count when the slot was written
};

// Where the refresh stands, to save and restore (sync mode restores exactly
// when the pool content is restored with it). In range (what set_cursor and
// restore check, std::invalid_argument naming the field): each counter at
// most kMaxPoolCounter, next_stamp at least the pool's size (the fill's
// stamps come first) and at most next_serial (each upload a serial decoded
// before it), calls times the size at most kMaxPoolCounter.
inline constexpr uint64_t kMaxPoolCounter = uint64_t{1} << 62;
struct PoolCursor {
  uint64_t next_serial = 0;  // serial of the next image to decode
  uint64_t next_stamp = 0;   // write stamp of the next upload (slot = stamp % P)
  uint64_t calls = 0;        // prepare_for_augment() calls so far
};

// What identifies the files a pool's serials refer to: serial s names file
// file_for_serial(s, files, seed) of this rank's listing, so a state means
// the same images only over the same listing.
struct PoolListing {
  uint64_t files = 0;  // this rank's files (refs().size())
  // A hash, in listing order, of each file's name relative to the folder of
  // its source (the directory itself; the folder holding a .txt list, a
  // shard or an image file), its tar member and its size at listing time:
  // moving the data set elsewhere keeps it, adding, deleting, renaming,
  // reordering or resizing a file changes it.
  uint64_t fingerprint = 0;
};

bool operator==(const PoolListing& a, const PoolListing& b);

// The pool's whole state (DistractorPool::state(), restore()).
struct PoolState {
  PoolCursor cursor;
  PoolListing listing;
  std::vector<uint64_t> slot_serials;    // SlotInfo::serial of slots 0..P-1
  std::vector<uint64_t> slot_checksums;  // SlotInfo::checksum of slots 0..P-1
};

class DistractorPool {
 public:
  // Blocks until the pool is full. Throws SourceError for sources without an
  // image or without a single decodable one, std::invalid_argument for bad
  // options. Any thread.
  explicit DistractorPool(DistractorPoolOptions options);
  ~DistractorPool();  // = close()
  DistractorPool(const DistractorPool&) = delete;
  DistractorPool& operator=(const DistractorPool&) = delete;

  // Consumer thread: uploads what the workers staged (async) or decodes and
  // uploads per_call images (sync), then returns. Rethrows a worker's
  // unexpected exception (once). Call it before each augment that reads
  // images(), on the augment thread and, on CUDA, with the augment stream
  // current. Throws std::logic_error after close().
  void prepare_for_augment();

  // Stops, wakes and joins the workers and waits for copies in flight.
  // Idempotent. Consumer thread (not concurrently with prepare_for_augment).
  void close();
  bool closed() const;

  // The [P, C, Hp, Wp] uint8 pool on options().device. Any thread may hold
  // it; its content changes only inside prepare_for_augment().
  const at::Tensor& images() const;

  // Any thread; counters are read without stopping the workers.
  DistractorPoolStats stats() const;

  // Consumer thread.
  SlotInfo slot_info(int64_t slot) const;
  PoolCursor cursor() const;
  // Consumer thread: the serial each slot holds (slot_info(k).serial for
  // k = 0..P-1), the content half of a saved state.
  std::vector<uint64_t> slot_serials() const;
  // Any thread: this rank's listing (fixed at construction).
  PoolListing listing() const;
  // Consumer thread: cursor(), listing() and each slot's serial and checksum.
  PoolState state() const;
  // Consumer thread. Sets where the refresh continues (a cursor out of its
  // range is refused, see PoolCursor); in async mode images already staged
  // still arrive, so only sync mode is exact.
  void set_cursor(const PoolCursor& cursor);
  // Consumer thread (not concurrently with prepare_for_augment), on CUDA with
  // the augment stream current: makes the pool what it was when `state` was
  // taken (state()) by a pool of the same options and sources. Decodes on
  // the calling thread the image of each serial (its file from the seeded
  // order, its crop and flip from Philox(seed, serial)) into its slot, with
  // the SlotInfo the refresh would have written (stamp: the newest
  // s < next_stamp with s % P == slot; written_call: cursor.calls, so ages
  // restart at 0), then sets the cursor. Exact in sync mode; in async mode
  // images the workers staged before the call still arrive at the next
  // prepare_for_augment(). All or nothing: every image is decoded and checked
  // before any slot is written, so on an exception the pool is unchanged.
  // Throws std::invalid_argument unless slot_serials and slot_checksums have
  // P entries, the cursor is in its range (PoolCursor) and each slot's serial
  // is below its next_serial; SourceError when the listing differs from state.listing
  // (naming the file counts, or the fingerprints when only the names or
  // sizes differ), and naming the slot, serial and file when an image no
  // longer reads or decodes, or decodes to another checksum than the state's
  // (a file changed since); std::logic_error after close().
  void restore(const PoolState& state);

  const DistractorPoolOptions& options() const;
  const std::vector<ImageRef>& refs() const;  // this rank's files, in listing order
  // The file of serial s: refs()[ref_index_for_serial(s)].
  uint32_t ref_index_for_serial(uint64_t serial) const;
  // The AugmentSpec the decoders use (for independent re-decodes in tests
  // and previews).
  AugmentSpec augment_spec() const;

  static constexpr int kStagingPerWorker = 3;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace obsaug

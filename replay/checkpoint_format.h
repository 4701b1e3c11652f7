// The replay checkpoint file `replay.obsaug`, format version 1, described
// once: the header's fields and the per-slot and per-env records are field
// tables (name, member; the C++ type fixes the encoding), and the body's
// sections follow one list. ReplayBuffer::save writes and ReplayBuffer::load
// reads through these tables; every size comes from them.
//
// Layout (values in the host's byte order, little-endian on every supported
// machine; size = min(total_frames, capacity)):
//   "OBSAUGRB" | version u32 | header fields | checksum u64 of all before it
//   | slot records x size | env count u32 | env records x count
//   | priorities f64 x size (prioritized only) | actions x size | frames x size
//   | checksum u64 of all before it
// Encodings: integers and floats as stored, bool as one byte, a fixed shape
// as its sizes (i64), a counted shape as a u32 count then its sizes, a dtype
// as its c10 name (u32 length, bytes).
//
// Reading never trusts a size before it is checked: the header checksum is
// verified before any header size is used, and the body must fit in the
// file before anything is allocated. Errors are std::invalid_argument
// ("replay checkpoint PATH is corrupt or truncated: ...") naming the field
// or section, or std::runtime_error for I/O (replay/checkpoint_io.h).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "replay/checkpoint_io.h"
#include "replay/episode_ring.h"
#include "replay/replay_buffer.h"

namespace obsaug::checkpoint {

inline constexpr char kMagic[8] = {'O', 'B', 'S', 'A', 'U', 'G', 'R', 'B'};
inline constexpr uint32_t kVersion = 1;
inline constexpr const char* kFileName = "replay.obsaug";
inline constexpr uint32_t kMaxActionDims = 8;
inline constexpr uint32_t kMaxDtypeName = 32;
inline constexpr int64_t kMaxSize = int64_t{1} << 16;  // a frame or action dimension

// A shape stored as exactly `max` sizes (`counted` false) or as a count of
// at most `max` then the sizes. V: std::vector<int64_t>, const or not.
template <typename V>
struct Shape {
  V& sizes;
  bool counted;
  uint32_t max;
};
template <typename V>
Shape<V> fixed_shape(V& sizes, uint32_t count) {
  return {sizes, false, count};
}
template <typename V>
Shape<V> counted_shape(V& sizes, uint32_t max) {
  return {sizes, true, max};
}

// Everything the header holds: the options (all but the device, which load
// takes as an argument) and the counters.
struct Header {
  ReplayOptions options;
  int64_t total_frames = 0;
  uint64_t sample_calls = 0;
  double max_priority = 1.0;
};

// The field tables, in file order: field(name, member) for each. H, S, E
// are the record types, const when writing.
template <typename H, typename Field>
void header_fields(H& h, Field&& field) {
  auto& o = h.options;
  field("capacity", o.capacity);
  field("frame_shape", fixed_shape(o.frame_shape, 3));
  field("frame_stack", o.frame_stack);
  field("action_shape", counted_shape(o.action_shape, kMaxActionDims));
  field("action_dtype", o.action_dtype);
  field("n_step", o.n_step);
  field("gamma", o.gamma);
  field("prioritized", o.prioritized);
  field("alpha", o.alpha);
  field("beta", o.beta);
  field("seed", o.seed);
  field("total_frames", h.total_frames);
  field("sample_calls", h.sample_calls);
  field("max_priority", h.max_priority);
}

template <typename S, typename Field>
void slot_fields(S& s, Field&& field) {  // EpisodeRing::Slot
  field("prev", s.prev);
  field("next", s.next);
  field("reward", s.reward);
  field("terminated", s.terminated);
  field("ended", s.ended);
}

template <typename E, typename Field>
void env_fields(E& e, Field&& field) {  // EpisodeRing::Env
  field("last", e.last);
  field("open", e.open);
}

// Bytes of one record in the file, from its table.
uint64_t slot_record_bytes();
uint64_t env_record_bytes();

// The frames stored: min(total_frames, capacity).
int64_t stored_frames(const Header& h);

// What follows the header, as save() writes it: the ring's slot records
// (the first stored_frames() of `slots`) and env table, the priorities
// (prioritized only), then the stored rows of `actions` [capacity, ...]
// (host) and `frames` [capacity, C, H, W] (any device).
struct Body {
  const std::vector<EpisodeRing::Slot>& slots;
  const std::vector<EpisodeRing::Env>& envs;
  const std::vector<double>& priorities;
  at::Tensor actions;
  at::Tensor frames;
};

// The whole file: magic, version, header, header checksum, body; the caller
// finishes the writer (replay/checkpoint_io.h's write_atomically does).
void write_checkpoint(CheckpointWriter& w, const Header& h, const Body& body);

// Reading, in three steps, so that nothing is allocated by a size the file
// cannot back: the header (after checking the magic, the version, the
// header checksum and the header's sizes); the episode links (the slot
// records and the env table; afterwards the rest of the body is known to
// fit in the file); then, into a buffer the caller allocated from the
// header, the arrays, the final checksum and that nothing trails it.
struct Links {
  std::vector<EpisodeRing::Slot> slots;  // stored_frames() records
  std::vector<EpisodeRing::Env> envs;
};
Header read_header(CheckpointReader& r);
Links read_links(CheckpointReader& r, const Header& h);
// priorities: stored_frames() entries when prioritized; actions, frames as in Body.
void read_arrays(CheckpointReader& r, const Header& h, double* priorities,
                 const at::Tensor& actions, const at::Tensor& frames);

}  // namespace obsaug::checkpoint

// Lossless codecs for stored frames (DESIGN.md section 5b, docs/compression.md):
// one API over obsaug's own packed codec (kernels/codecs/packed.h, decodable
// per tile on a CPU thread or a CUDA block), LZ4 and zstd (their C libraries).
// Every record is kernels/codecs/record.h's: a 16-byte header (version,
// codec, mode, shape, checksum) and the codec's payload.
//
// A frame is C x H x W uint8, contiguous. Encoding takes an optional
// reference frame of the same shape (the caller chooses it: the previous
// frame of the episode, or its group's key frame): with one the record is
// delta (the frame's difference from it), without one intra. Decoding a
// delta record needs the same reference again; the record itself does not
// say which frame that was (the replay storage keeps that).
//
// Bad input, one exception type: std::invalid_argument, its message naming
// what is wrong. For a record: truncated, corrupt (the checksum), a header
// field out of range, a shape other than the decoder's, a delta record
// without a reference; decoding reads only the record's bytes, the
// reference's and writes only the output frame, whatever the record holds.
// A failed decode leaves the output frame's contents unspecified.
//
// Threads: an encoder or a decoder is used by one thread at a time (each
// keeps its own library context and scratch); any number of them run in
// parallel. The free functions are thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/codecs/packed_cpu.h"
#include "kernels/codecs/record.h"

namespace obsaug {
namespace codecs {

enum class Codec : uint8_t {
  kStored,  // the frame's bytes as they are (what every codec falls back to)
  kPacked,  // obsaug's own: per-tile bit-packed residuals, no entropy coder
  kLz4,     // LZ4's fast compressor (level = acceleration, >= 1)
  kLz4Hc,   // LZ4's high-compression compressor (level 1..12); LZ4's decoder
  kZstd,    // zstd (level 1..22)
};

// A codec and its setting. Names (parse_codec_spec, codec_spec_name):
//   stored
//   packed, packed-<T>            T = rows per tile, 1..255 (default kDefaultTileRows)
//   lz4, lz4-<a>                  a = acceleration >= 1 (default 1)
//   lz4hc, lz4hc-<L>              L = 1..12 (default 9)
//   zstd, zstd-<L>                L = 1..22 (default 3)
// and lz4 / lz4hc / zstd with the suffix "-plain": an intra frame's own
// bytes are compressed instead of their left-neighbour residuals (a delta
// frame is always its residual).
struct CodecSpec {
  Codec codec = Codec::kPacked;
  int level = 0;              // as above; 0 = the codec's default
  bool predict_intra = true;  // lz4, lz4hc, zstd: intra frames as residuals
};
constexpr int kDefaultTileRows = 4;
CodecSpec parse_codec_spec(const std::string& name);  // std::invalid_argument naming the grammar
std::string codec_spec_name(const CodecSpec& spec);   // the canonical name, levels written out
// The spec with its level made explicit (0 -> the codec's default); throws
// std::invalid_argument for a level out of the codec's range.
CodecSpec resolved(const CodecSpec& spec);

// What a record's header says; throws std::invalid_argument when the header
// is truncated or malformed (the payload is not read, the checksum not checked).
struct RecordInfo {
  RecordCodec codec;
  RecordMode mode;
  FrameShape shape;
  bool needs_reference() const { return mode == RecordMode::kDelta; }
};
RecordInfo read_record_info(const uint8_t* record, int64_t size);

// A record the encoder holds: valid until its next encode.
struct RecordBytes {
  const uint8_t* data;
  int64_t size;
};

class FrameEncoder {
 public:
  // Throws std::invalid_argument for a shape with a side outside 1..65535 or
  // over kMaxFrameBytes, or a level out of range.
  FrameEncoder(const CodecSpec& spec, FrameShape shape, CodecIsa isa = widest_codec_isa());
  ~FrameEncoder();
  FrameEncoder(const FrameEncoder&) = delete;
  FrameEncoder& operator=(const FrameEncoder&) = delete;

  // The record of `frame` (shape().bytes() bytes), delta against `reference`
  // when it is not null. A frame the codec would not shrink is stored
  // (codec kStored: the header plus the frame). Frame and reference are only read.
  RecordBytes encode(const uint8_t* frame, const uint8_t* reference);
  // No record of this encoder is longer.
  int64_t max_record_bytes() const;

  const CodecSpec& spec() const { return spec_; }
  FrameShape shape() const { return shape_; }

 private:
  struct Libraries;  // LZ4 and zstd state, behind the header
  RecordBytes finish(int64_t size);
  RecordBytes store(const uint8_t* frame);

  CodecSpec spec_;
  FrameShape shape_;
  CodecIsa isa_;
  std::vector<uint8_t> record_;
  std::vector<uint8_t> residual_;
  PackedScratch packed_;
  std::unique_ptr<Libraries> libraries_;
};

// Why a record did not decode: kOk, or the status, the packed tile it failed
// in (-1: none) and the library's words (lz4, zstd; else null).
struct DecodeOutcome {
  RecordStatus status = RecordStatus::kOk;
  int64_t tile = -1;
  const char* detail = nullptr;
};

class FrameDecoder {
 public:
  // Decodes records of frames of `shape` whatever their codec.
  explicit FrameDecoder(FrameShape shape, CodecIsa isa = widest_codec_isa());
  ~FrameDecoder();
  FrameDecoder(const FrameDecoder&) = delete;
  FrameDecoder& operator=(const FrameDecoder&) = delete;

  // Decodes the `size`-byte record into `out` (shape().bytes() bytes),
  // reading `reference` when the record is delta (it may be null for an
  // intra or stored record). `out` overlaps neither the record nor the
  // reference. Throws std::invalid_argument (see the top of this file).
  void decode(const uint8_t* record, int64_t size, const uint8_t* reference, uint8_t* out);
  // decode without the throw: what went wrong, for a caller that names the
  // slot itself (record_error_message words the outcome as decode does).
  DecodeOutcome try_decode(const uint8_t* record, int64_t size, const uint8_t* reference,
                           uint8_t* out);

  FrameShape shape() const { return shape_; }

 private:
  struct Libraries;
  FrameShape shape_;
  CodecIsa isa_;
  std::vector<uint8_t> scratch_;
  std::unique_ptr<Libraries> libraries_;
};

// The message of a record that does not decode (`tile` >= 0: the packed
// tile it failed in), as FrameDecoder throws it; the CUDA launcher's caller
// turns the kernel's per-frame status into the same words.
std::string record_error_message(RecordStatus status, int64_t record_size, FrameShape expect,
                                 int64_t tile);

// Residual codes of record.h over a whole frame, in place or not: `codes`
// from `frame` (delta against `reference`, or intra), and back.
void residual_codes(FrameShape shape, const uint8_t* frame, const uint8_t* reference,
                    uint8_t* codes);
void undo_residual_codes(FrameShape shape, const uint8_t* reference, uint8_t* frame_in_out);

}  // namespace codecs
}  // namespace obsaug

// The record of one stored frame, common to every codec of kernels/codecs/
// (docs/compression.md), and the byte arithmetic the codecs share. Host and
// device code: the CPU decode, the CUDA kernel (packed_cuda_kernel.cuh) and
// its CPU emulation all read records through this header.
//
// A frame is C x H x W uint8, planes then rows then columns (the replay
// buffer's [C, H, W] layout). Its record, little-endian:
//
//   offset size  field
//   0      1     version        kRecordVersion (1)
//   1      1     codec          RecordCodec: 0 stored, 1 packed, 2 lz4, 3 zstd
//   2      1     mode           RecordMode: 0 plain, 1 intra, 2 delta (below)
//   3      1     tile_rows      packed: rows per tile, 1..255; every other codec 0
//   4      2     channels       C >= 1
//   6      2     height         H >= 1
//   8      2     width          W >= 1
//   10     1     offset_bytes   packed: 2 or 4 (the tile table's entries); others 0
//   11     1     reserved       0
//   12     4     checksum       record_checksum() of the whole record
//   16     ...   payload        stored: the C*H*W frame bytes, nothing else;
//                               lz4: one LZ4 block; zstd: one zstd frame; each
//                               decodes to exactly C*H*W bytes;
//                               packed: kernels/codecs/packed.h
//
// The bytes a codec compresses (lz4, zstd) or bit-packs (packed), element i
// of the frame at row position x (0 <= x < W):
//   plain  the frame's byte itself (lz4 and zstd only; stored is plain);
//   intra  zigzag(frame[i] - p), p the left neighbour frame[i - 1]; at x = 0
//          the pixel above, frame[i - W], except in a tile's first row, where
//          p = 0 (packed: tiles of tile_rows rows, packed.h; lz4 and zstd: a
//          plane is one tile), so that tiles decode alone;
//   delta  zigzag(frame[i] - reference[i]), the reference a frame of the same
//          shape the caller names at encode and passes again at decode (the
//          record does not say which frame it was: the replay storage does).
// Differences are modulo 256 read as int8; zigzag maps 0, -1, 1, -2, ... to
// 0, 1, 2, 3, ... so that small differences have small codes.
//
// The checksum makes a record that was corrupted after encoding (memory, a
// file) fail to decode rather than give a wrong frame; the bounds checks of
// every decoder make any record, corrupt or crafted, safe to read (no byte
// outside the record, the reference or the frame is touched).
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/hd.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "kernels/codecs reads records as little-endian words"
#endif

namespace obsaug {
namespace codecs {

constexpr uint8_t kRecordVersion = 1;
constexpr int64_t kRecordHeaderBytes = 16;
constexpr int64_t kChecksumOffset = 12;
// The largest frame a record holds (bytes): tile ends and sizes fit in 32 bits.
constexpr int64_t kMaxFrameBytes = int64_t{1} << 30;

enum class RecordCodec : uint8_t { kStored = 0, kPacked = 1, kLz4 = 2, kZstd = 3 };
enum class RecordMode : uint8_t { kPlain = 0, kIntra = 1, kDelta = 2 };

struct FrameShape {
  int32_t channels = 0;
  int32_t height = 0;
  int32_t width = 0;
  OBSAUG_HD int64_t bytes() const {
    return static_cast<int64_t>(channels) * height * static_cast<int64_t>(width);
  }
  OBSAUG_HD bool operator==(const FrameShape& o) const {
    return channels == o.channels && height == o.height && width == o.width;
  }
};

// Why a record does not decode. One list for the CPU, the CUDA kernel (which
// reports it per frame) and the messages (record_status_text in
// frame_codec.cpp).
enum class RecordStatus : int32_t {
  kOk = 0,
  kTooShort,     // fewer bytes than the header
  kVersion,      // a version this build does not read
  kCodec,        // an unknown codec byte (or, on the device, lz4/zstd)
  kMode,         // an unknown mode, or one the codec does not have
  kShape,        // the record's C x H x W differs from the caller's frame
  kHeaderField,  // tile_rows, offset_bytes or reserved out of range for the codec
  kChecksum,     // the checksum does not match the bytes
  kNoReference,  // a delta record decoded without a reference
  kPayloadSize,  // stored: payload != C*H*W; packed: the tile table does not fit
  kTableEnd,     // packed: the last tile does not end where the record does
  kTileModes,    // packed: a tile mode bit set past the last tile
  kTileSpan,     // packed: a tile starts after it ends, or ends past the data
  kTileShort,    // packed: a tile's bitmap, widths or values run past its span
  kTileLong,     // packed: bytes left in a tile's span after its values
  kTileBitmap,   // packed: a bitmap bit set past the tile's last block
  kTilePadding,  // packed: a non-zero code past a row's end, or padding bits not 0
  kTileMask,     // packed: a sparse block's mask empty or marking codes past its row
  kLibrary,      // lz4 or zstd refused the payload
  kDecodedSize,  // lz4 or zstd decoded to another size than C*H*W
  kCount
};

namespace {  // internal linkage: per-ISA translation units keep their own copies

OBSAUG_HD uint32_t load_u16(const uint8_t* p) { return p[0] | (uint32_t{p[1]} << 8); }
OBSAUG_HD uint32_t load_u32(const uint8_t* p) {
  return p[0] | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 24);
}
OBSAUG_HD void store_u16(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}
OBSAUG_HD void store_u32(uint8_t* p, uint32_t v) {
  for (int k = 0; k < 4; ++k) p[k] = static_cast<uint8_t>(v >> (8 * k));
}

struct RecordHeader {
  uint8_t version;
  RecordCodec codec;
  RecordMode mode;
  uint8_t tile_rows;
  FrameShape shape;
  uint8_t offset_bytes;
  uint8_t reserved;
  uint32_t checksum;
};

OBSAUG_HD RecordHeader read_header(const uint8_t* record) {
  RecordHeader h;
  h.version = record[0];
  h.codec = static_cast<RecordCodec>(record[1]);
  h.mode = static_cast<RecordMode>(record[2]);
  h.tile_rows = record[3];
  h.shape.channels = static_cast<int32_t>(load_u16(record + 4));
  h.shape.height = static_cast<int32_t>(load_u16(record + 6));
  h.shape.width = static_cast<int32_t>(load_u16(record + 8));
  h.offset_bytes = record[10];
  h.reserved = record[11];
  h.checksum = load_u32(record + kChecksumOffset);
  return h;
}

OBSAUG_HD void write_header(uint8_t* record, const RecordHeader& h) {
  record[0] = h.version;
  record[1] = static_cast<uint8_t>(h.codec);
  record[2] = static_cast<uint8_t>(h.mode);
  record[3] = h.tile_rows;
  store_u16(record + 4, static_cast<uint32_t>(h.shape.channels));
  store_u16(record + 6, static_cast<uint32_t>(h.shape.height));
  store_u16(record + 8, static_cast<uint32_t>(h.shape.width));
  record[10] = h.offset_bytes;
  record[11] = h.reserved;
  store_u32(record + kChecksumOffset, h.checksum);
}

// The header's own rules, for a record of `size` >= kRecordHeaderBytes bytes
// read as a frame of `expect`: everything but the checksum and the payload.
OBSAUG_HD RecordStatus check_header(const RecordHeader& h, FrameShape expect) {
  if (h.version != kRecordVersion) return RecordStatus::kVersion;
  if (static_cast<uint8_t>(h.codec) > static_cast<uint8_t>(RecordCodec::kZstd))
    return RecordStatus::kCodec;
  const uint8_t mode = static_cast<uint8_t>(h.mode);
  if (mode > static_cast<uint8_t>(RecordMode::kDelta)) return RecordStatus::kMode;
  if (h.codec == RecordCodec::kStored && h.mode != RecordMode::kPlain) return RecordStatus::kMode;
  if (h.codec == RecordCodec::kPacked && h.mode == RecordMode::kPlain) return RecordStatus::kMode;
  if (!(h.shape == expect)) return RecordStatus::kShape;
  const bool packed = h.codec == RecordCodec::kPacked;
  if (packed ? (h.tile_rows == 0 || (h.offset_bytes != 2 && h.offset_bytes != 4))
             : (h.tile_rows != 0 || h.offset_bytes != 0))
    return RecordStatus::kHeaderField;
  if (h.reserved != 0) return RecordStatus::kHeaderField;
  return RecordStatus::kOk;
}

// The checksum: sum over the record's 32-bit little-endian words w_i (the
// last one zero-padded, the checksum field's word i = 3 left out) of
// w_i * (2i + 1) modulo 2^32, xor the size times 0x9E3779B1. The weights are
// odd, so any change confined to one word (every single-bit flip) changes
// it; the size term catches a truncation that drops only zero bytes. The
// terms are independent: a CUDA block sums them over its threads
// (checksum_terms with first = thread, step = threads) and adds the parts.
OBSAUG_HD uint32_t checksum_terms(const uint8_t* record, uint64_t size, uint64_t first,
                                  uint64_t step) {
  const uint64_t full = size / 4;
  uint32_t sum = 0;
  uint64_t i = first;
  for (; i < 4 && i < full; i += step) {
    if (i != 3) sum += load_u32(record + 4 * i) * static_cast<uint32_t>(2 * i + 1);
  }
  for (; i < full; i += step) {  // the header's words are behind: no branch, vectorizable
    uint32_t w;
    memcpy(&w, record + 4 * i, 4);
    sum += w * static_cast<uint32_t>(2 * i + 1);
  }
  if (size % 4 != 0 && full >= first && (full - first) % step == 0) {
    uint32_t w = 0;
    for (uint64_t k = 0; k < size % 4; ++k) w |= uint32_t{record[4 * full + k]} << (8 * k);
    sum += w * static_cast<uint32_t>(2 * full + 1);
  }
  return sum;
}
OBSAUG_HD uint32_t finish_checksum(uint32_t terms, uint64_t size) {
  return terms ^ (static_cast<uint32_t>(size) * 0x9E3779B1u);
}

// One residual code: the zigzag of the difference `diff` (a - b modulo 256,
// read as int8), and back.
OBSAUG_HD uint8_t zigzag_byte(uint8_t diff) {
  return static_cast<uint8_t>((diff << 1) ^ ((diff & 0x80) ? 0xFF : 0));
}
OBSAUG_HD uint8_t unzigzag_byte(uint8_t code) {
  return static_cast<uint8_t>((code >> 1) ^ (0u - (code & 1u)));
}

// Byte lanes of a 64-bit word (SWAR): eight pixels at a time without carries
// between them, the same on the host and the device.
constexpr uint64_t kLaneOnes = 0x0101010101010101ull;
constexpr uint64_t kLaneLow7 = 0x7F7F7F7F7F7F7F7Full;
constexpr uint64_t kLaneHigh = 0x8080808080808080ull;

OBSAUG_HD uint64_t add_lanes(uint64_t a, uint64_t b) {  // a + b per byte, modulo 256
  return ((a & kLaneLow7) + (b & kLaneLow7)) ^ ((a ^ b) & kLaneHigh);
}
OBSAUG_HD uint64_t sub_lanes(uint64_t a, uint64_t b) {  // a - b per byte, modulo 256
  return ((a | kLaneHigh) - (b & kLaneLow7)) ^ ((a ^ ~b) & kLaneHigh);
}
OBSAUG_HD uint64_t zigzag_lanes(uint64_t d) {  // per byte: (d << 1) ^ (d >> 7, arithmetic)
  return ((d << 1) & ~kLaneOnes) ^ (((d >> 7) & kLaneOnes) * 0xFF);
}
OBSAUG_HD uint64_t unzigzag_lanes(uint64_t z) {  // per byte: (z >> 1) ^ -(z & 1)
  return ((z >> 1) & kLaneLow7) ^ ((z & kLaneOnes) * 0xFF);
}
// Running sums per byte (lane k holds d_0 + ... + d_k modulo 256), plus
// `carry` in every lane: the left predictor's decode of eight pixels whose
// left neighbour is `carry`.
OBSAUG_HD uint64_t prefix_lanes(uint64_t d, uint8_t carry) {
  d = add_lanes(d, d << 8);
  d = add_lanes(d, d << 16);
  d = add_lanes(d, d << 32);
  return add_lanes(d, kLaneOnes * carry);
}
// Lane k = the byte before lane k (lane 0 = `left`): the left predictor.
OBSAUG_HD uint64_t left_lanes(uint64_t px, uint8_t left) { return (px << 8) | left; }

// n <= 8 bytes as the low lanes of a word (the others zero), and back.
OBSAUG_HD uint64_t load_lanes(const uint8_t* p, int n) {
  uint64_t v = 0;
  if (n == 8) {
    memcpy(&v, p, 8);
  } else {
    for (int k = 0; k < n; ++k) v |= uint64_t{p[k]} << (8 * k);
  }
  return v;
}
OBSAUG_HD void store_lanes(uint8_t* p, uint64_t v, int n) {
  if (n == 8) {
    memcpy(p, &v, 8);
  } else {
    for (int k = 0; k < n; ++k) p[k] = static_cast<uint8_t>(v >> (8 * k));
  }
}

}  // namespace
}  // namespace codecs
}  // namespace obsaug

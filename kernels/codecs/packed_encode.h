// The packed codec's encoder (host only): the format is kernels/codecs/packed.h.
// A template over the bit extraction (Pack: PortablePack below, or BMI2's pext
// in packed_bmi2.cpp), instantiated once per instruction set; internal
// linkage, so each instantiating translation unit keeps its own copy.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/codecs/packed.h"
#include "kernels/codecs/record.h"

namespace obsaug {
namespace codecs {

// Scratch of one encoder: one tile's codes and block fields (delta and
// intra), the tile ends and modes.
struct PackedScratch {
  std::vector<uint64_t> codes[2];
  std::vector<uint8_t> fields[2];
  std::vector<uint32_t> ends;
  std::vector<uint8_t> modes;
};

namespace {

// The portable bit extraction: the 8 codes (byte lanes, each below 2^w) as
// one 8w-bit integer; and a sparse block's listed codes (the lanes `mask`
// marks) moved to the low lanes.
struct PortablePack {
  static uint64_t extract(uint64_t codes, int w) {
    if (w == 8) return codes;
    uint64_t bits = 0;
    for (int i = 0; i < kBlockCodes; ++i) bits |= ((codes >> (8 * i)) & 0xFF) << (i * w);
    return bits;
  }
  static uint64_t gather(uint64_t codes, uint32_t mask) {
    uint64_t listed = 0;
    int k = 0;
    for (int lane = 0; lane < kBlockCodes; ++lane)
      if ((mask >> lane) & 1) listed |= ((codes >> (8 * lane)) & 0xFF) << (8 * k++);
    return listed;
  }
};

// The bit length of the largest byte lane of `codes` (0 when all are 0).
inline int lanes_width(uint64_t codes) {
  uint64_t o = codes | (codes >> 32);
  o |= o >> 16;
  o |= o >> 8;
  const uint32_t b = static_cast<uint32_t>(o & 0xFF);
  return b == 0 ? 0 : 32 - __builtin_clz(b);
}

// Bytes a packed record of `shape` may need while it is written, at most
// (the encoder gives up, and the caller stores the frame, once the tiles
// pass the frame's own size).
inline int64_t packed_bound(FrameShape shape, int tile_rows) {
  const int64_t tiles =
      shape.channels * static_cast<int64_t>((shape.height + tile_rows - 1) / tile_rows);
  const int64_t rows = std::min<int64_t>(tile_rows, shape.height);
  const int64_t blocks = rows * ((shape.width + kBlockCodes - 1) / kBlockCodes);
  const int64_t tile_max = (blocks + 7) / 8 + (blocks + 1) / 2 + kBlockCodes * blocks;
  return kRecordHeaderBytes + 4 * tiles + (tiles + 7) / 8 + shape.bytes() + tile_max + 8;
}

// One tile's codes: per block its 8 codes (byte lanes) and its field
// (kUnmarked, or packed.h's nibble: bit 3 sparse, bits 0..2 w - 1).
constexpr uint8_t kUnmarked = 0xFF;
struct TileCodes {
  int64_t blocks = 0;
  int64_t marked = 0;       // blocks with a non-zero code
  int64_t sparse = 0;       // of which listed as sparse (one mask byte each)
  int64_t value_bytes = 0;  // their values' bytes
  int64_t bytes() const {   // the tile's span
    return marked == 0 ? 0 : (blocks + 7) / 8 + (marked + 1) / 2 + sparse + value_bytes;
  }
};

// The lanes of `codes` that are not 0, as a mask.
inline uint32_t nonzero_lanes(uint64_t codes) {
  // each lane's high bit set when the lane is not 0; the eight gathered by a multiply
  const uint64_t high = (codes | ((codes & kLaneLow7) + kLaneLow7)) & kLaneHigh;
  return static_cast<uint32_t>(((high >> 7) * 0x0102040810204080ull) >> 56);
}

// The codes of the tile of `rows` rows at element `first`: delta against
// `reference` when it is not null, else intra (packed.h, record.h); each
// marked block dense or sparse, whichever is shorter.
inline TileCodes tile_codes(int32_t width, const uint8_t* __restrict frame,
                            const uint8_t* __restrict reference, int64_t first, int32_t rows,
                            uint64_t* __restrict codes, uint8_t* __restrict fields) {
  const int32_t blocks_per_row = (width + kBlockCodes - 1) / kBlockCodes;
  const int last_codes = width % kBlockCodes == 0 ? kBlockCodes : width % kBlockCodes;
  const uint64_t last_mask = last_codes == 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * last_codes)) - 1;
  TileCodes out;
  for (int32_t r = 0; r < rows; ++r) {
    const uint8_t* row = frame + first + static_cast<int64_t>(r) * width;
    const uint8_t* row_ref =
        reference ? reference + first + static_cast<int64_t>(r) * width : nullptr;
    uint8_t left = r > 0 ? row[-width] : 0;  // intra: x = 0 is predicted from above
    for (int32_t j = 0; j < blocks_per_row; ++j, ++out.blocks) {
      const bool last = j + 1 == blocks_per_row;
      const int n = last ? last_codes : kBlockCodes;
      const int64_t x = static_cast<int64_t>(j) * kBlockCodes;
      const uint64_t px = load_lanes(row + x, n);
      const uint64_t predicted = row_ref ? load_lanes(row_ref + x, n) : left_lanes(px, left);
      left = static_cast<uint8_t>(px >> (8 * (n - 1)));
      const uint64_t c = zigzag_lanes(sub_lanes(px, predicted) & (last ? last_mask : ~uint64_t{0}));
      codes[out.blocks] = c;
      const int w = lanes_width(c);
      if (w == 0) {
        fields[out.blocks] = kUnmarked;
        continue;
      }
      const int listed = __builtin_popcount(nonzero_lanes(c));
      const bool sparse = 1 + listed < w;
      fields[out.blocks] = static_cast<uint8_t>((sparse ? 8 : 0) | (w - 1));
      ++out.marked;
      out.sparse += sparse;
      out.value_bytes += sparse ? listed : w;
    }
  }
  return out;
}

// Writes a tile with marked blocks (bitmap, fields, masks, values) at
// `out`, which has tile.bytes() + 8 bytes of room; returns the end.
template <typename Pack>
uint8_t* write_tile(const TileCodes& tile, const uint64_t* __restrict codes,
                    const uint8_t* __restrict fields, uint8_t* __restrict out) {
  const int64_t bitmap_bytes = (tile.blocks + 7) / 8;
  const int64_t field_bytes = (tile.marked + 1) / 2;
  uint8_t* const bitmap = out;
  uint8_t* const field_stream = out + bitmap_bytes;
  uint8_t* masks = field_stream + field_bytes;
  std::memset(bitmap, 0, static_cast<size_t>(bitmap_bytes + field_bytes));
  uint8_t* v = masks + tile.sparse;
  int64_t k = 0;  // the field's index
  for (int64_t b = 0; b < tile.blocks; ++b) {
    const uint8_t f = fields[b];
    if (f == kUnmarked) continue;
    bitmap[b >> 3] |= static_cast<uint8_t>(1u << (b & 7));
    field_stream[k >> 1] |= static_cast<uint8_t>(f << ((k & 1) * 4));
    ++k;
    const int w = (f & 7) + 1;
    uint64_t bits;
    if (f & 8) {
      const uint32_t mask = nonzero_lanes(codes[b]);
      *masks++ = static_cast<uint8_t>(mask);
      bits = Pack::gather(codes[b], mask);
      std::memcpy(v, &bits, 8);  // the room holds 8 bytes past the last value
      v += __builtin_popcount(mask);
    } else {
      bits = Pack::extract(codes[b], w);
      std::memcpy(v, &bits, 8);
      v += w;
    }
  }
  return v;
}

// A delta tile whose span passes this share of its raw bytes (1/kTryIntraShare)
// is also coded intra, and the smaller kept: unchanged or slightly changed
// tiles (most of a static scene) cost no second pass.
constexpr int64_t kTryIntraShare = 16;

// Writes the packed record of `frame` (delta against `reference` when it is
// not null, intra otherwise) into `dst`, which holds packed_bound bytes, and
// returns its size; returns 0 as soon as its tiles need more bytes than the
// frame itself (the caller stores it instead). The checksum is left 0.
template <typename Pack>
int64_t encode_packed_record(FrameShape shape, const uint8_t* __restrict frame,
                             const uint8_t* __restrict reference, int tile_rows,
                             PackedScratch& scratch, uint8_t* __restrict dst) {
  const int32_t width = shape.width;
  const int32_t blocks_per_row = (width + kBlockCodes - 1) / kBlockCodes;
  const int32_t tiles_per_plane = (shape.height + tile_rows - 1) / tile_rows;
  const int64_t tiles = static_cast<int64_t>(shape.channels) * tiles_per_plane;
  const int64_t mode_bytes = reference ? (tiles + 7) / 8 : 0;
  const int64_t max_blocks =
      static_cast<int64_t>(std::min(tile_rows, shape.height)) * blocks_per_row;
  for (int k = 0; k < 2; ++k) {
    scratch.codes[k].resize(static_cast<size_t>(max_blocks));
    scratch.fields[k].resize(static_cast<size_t>(max_blocks));
  }
  scratch.ends.resize(static_cast<size_t>(tiles));
  scratch.modes.assign(static_cast<size_t>(mode_bytes), 0);
  uint8_t* const data = dst + kRecordHeaderBytes + 4 * tiles + mode_bytes;  // room for 4-byte ends
  uint8_t* out = data;
  const int64_t budget = shape.bytes();
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t plane = t / tiles_per_plane;
    const int32_t y0 = static_cast<int32_t>(t % tiles_per_plane) * tile_rows;
    const int32_t rows = std::min(tile_rows, shape.height - y0);
    const int64_t first = (plane * shape.height + y0) * static_cast<int64_t>(width);
    int pick = 0;
    TileCodes tile = tile_codes(width, frame, reference, first, rows, scratch.codes[0].data(),
                                scratch.fields[0].data());
    if (reference && tile.bytes() * kTryIntraShare > static_cast<int64_t>(rows) * width) {
      const TileCodes intra = tile_codes(width, frame, nullptr, first, rows,
                                         scratch.codes[1].data(), scratch.fields[1].data());
      if (intra.bytes() < tile.bytes()) {
        tile = intra;
        pick = 1;
        scratch.modes[static_cast<size_t>(t >> 3)] |= static_cast<uint8_t>(1u << (t & 7));
      }
    }
    if (tile.marked != 0) {
      if ((out - data) + tile.bytes() > budget) return 0;
      out = write_tile<Pack>(tile, scratch.codes[pick].data(), scratch.fields[pick].data(), out);
    }
    scratch.ends[static_cast<size_t>(t)] = static_cast<uint32_t>(out - data);
  }
  const int64_t data_size = out - data;
  const int offset_bytes = data_size <= 0xFFFF ? 2 : 4;
  uint8_t* const table = dst + kRecordHeaderBytes;
  for (int64_t t = 0; t < tiles; ++t) {
    if (offset_bytes == 2) {
      store_u16(table + 2 * t, scratch.ends[static_cast<size_t>(t)]);
    } else {
      store_u32(table + 4 * t, scratch.ends[static_cast<size_t>(t)]);
    }
  }
  uint8_t* const modes = table + offset_bytes * tiles;
  if (mode_bytes > 0) std::memcpy(modes, scratch.modes.data(), static_cast<size_t>(mode_bytes));
  if (offset_bytes == 2) std::memmove(modes + mode_bytes, data, static_cast<size_t>(data_size));
  RecordHeader h{};
  h.version = kRecordVersion;
  h.codec = RecordCodec::kPacked;
  h.mode = reference ? RecordMode::kDelta : RecordMode::kIntra;
  h.tile_rows = static_cast<uint8_t>(tile_rows);
  h.shape = shape;
  h.offset_bytes = static_cast<uint8_t>(offset_bytes);
  write_header(dst, h);
  return kRecordHeaderBytes + offset_bytes * tiles + mode_bytes + data_size;
}

}  // namespace
}  // namespace codecs
}  // namespace obsaug

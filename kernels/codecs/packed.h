// The packed codec: obsaug's own lossless frame format, built to be decoded
// inside the replay buffer's gather at memory speed on a CPU and by a CUDA
// block, with no serial entropy decoder. This header is its decode, shared
// by the CPU (packed_cpu.cpp, packed_bmi2.cpp) and the CUDA kernel
// (packed_cuda_kernel.cuh, run by the CPU emulation in the tests); the
// encoder is packed_encode.h.
//
// The record's header is kernels/codecs/record.h's, with codec 1 (packed),
// mode intra or delta (the codes below are record.h's residual codes: the
// left-neighbour prediction, or the difference from the caller's reference),
// tile_rows T (1..255) and offset_bytes (2 or 4). Its payload:
//
//   tile table  one entry per tile, offset_bytes each, little-endian: ends[t],
//               the end of tile t's bytes in the data area; tile t's bytes are
//               [ends[t-1], ends[t]) (ends[-1] = 0), and the last end is the
//               data area's size. So any tile decodes without the others.
//   tile modes  delta records only: ceil(tiles / 8) bytes, bit t (LSB first)
//               set when tile t holds intra codes rather than delta ones (the
//               encoder takes, per tile, whichever is smaller: a moving
//               camera or a new scene makes some tiles cheaper on their own);
//               bits past the last tile are 0.
//   data area   the tiles' bytes, in tile order.
//
// Tiles: each plane c is cut into ceil(H / T) tiles of T rows (the last may
// have fewer); tile t is plane t / ceil(H / T), rows from (t % ceil(H / T)) * T.
// Each row is cut into blocks of 8 codes (the last block of a row holds
// W % 8 when W is not a multiple of 8, the rest of its 8 codes being 0).
// A tile's bytes, when it has any (an empty tile is all codes 0):
//   bitmap   ceil(n / 8) bytes for its n = rows x ceil(W / 8) blocks in row
//            order, bit j (LSB first) set when block j has a non-zero code;
//            bits past n are 0.
//   fields   for each block with a bit set, in order, a nibble (the low one
//            of a byte first): w - 1 in bits 0..2, w = 1..8 the bit length of
//            its largest code, and bit 3 set when the block is sparse;
//            ceil(m / 2) bytes for m such blocks, an odd m's last nibble 0.
//   masks    for each sparse block, in order, a byte: bit j set when its code
//            j is listed (not 0; no bit past a row's end).
//   values   for each block with a bit set, in order: a dense block's 8 codes
//            as one 8w-bit little-endian integer (w bytes, code j at bits
//            [j w, j w + w)); a sparse block's n listed codes (n = the mask's
//            bits), a byte each. The encoder lists a block's non-zero codes
//            when that is shorter (1 + n < w): an edge or a sprite in an
//            otherwise unchanged block. (Listing them at w bits would save 3%
//            of DMControl's bytes and 1% of Atari's, and cost a multiply on
//            every vector step's offsets.)
// Nothing else: the span holds exactly bitmap + fields + masks + values.
//
// Decoding a block is a bit deposit (BMI2 pdep on x86, a shift loop
// elsewhere and on the device; a sparse block's codes are then spread to
// their lanes, a second deposit), an unzigzag and an add, eight pixels in
// one 64-bit word; a tile is decoded by one thread, the tiles of a frame by
// as many threads as there are tiles.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/codecs/record.h"
#include "kernels/hd.h"

namespace obsaug {
namespace codecs {

constexpr int kBlockCodes = 8;  // codes per block: one 64-bit word of byte lanes

// Where the parts of a packed record are, from its header (packed_layout).
struct PackedLayout {
  const uint8_t* table;
  const uint8_t* modes;  // delta records: the tile modes; intra records: null
  const uint8_t* data;
  uint32_t data_size;
  int32_t height;
  int32_t width;
  int32_t tile_rows;
  int32_t tiles_per_plane;
  int32_t tiles;
  int32_t blocks_per_row;
  int32_t offset_bytes;
  bool delta;
};

namespace {  // internal linkage: per-ISA translation units keep their own copies

OBSAUG_HD int popcount_byte(uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __popc(b);
#else
  return __builtin_popcount(b);
#endif
}

OBSAUG_HD uint32_t tile_end(const PackedLayout& l, int64_t t) {
  return l.offset_bytes == 2 ? load_u16(l.table + 2 * t) : load_u32(l.table + 4 * t);
}

// The layout of a packed record of `size` bytes whose header `h` passed
// check_header: the table fits and its last entry is the data area's end.
// Each tile's own span is checked when it is decoded.
OBSAUG_HD RecordStatus packed_layout(const uint8_t* record, uint64_t size, const RecordHeader& h,
                                     PackedLayout* l) {
  l->height = h.shape.height;
  l->width = h.shape.width;
  l->tile_rows = h.tile_rows;
  l->tiles_per_plane = (h.shape.height + h.tile_rows - 1) / h.tile_rows;
  l->tiles = h.shape.channels * l->tiles_per_plane;
  l->blocks_per_row = (h.shape.width + kBlockCodes - 1) / kBlockCodes;
  l->offset_bytes = h.offset_bytes;
  l->delta = h.mode == RecordMode::kDelta;
  const uint64_t table_bytes = static_cast<uint64_t>(l->tiles) * h.offset_bytes;
  const uint64_t mode_bytes = l->delta ? (static_cast<uint64_t>(l->tiles) + 7) / 8 : 0;
  if (size - kRecordHeaderBytes < table_bytes + mode_bytes) return RecordStatus::kPayloadSize;
  l->table = record + kRecordHeaderBytes;
  l->modes = l->delta ? l->table + table_bytes : nullptr;
  if (l->delta && l->tiles % 8 != 0 && (l->modes[mode_bytes - 1] >> (l->tiles % 8)) != 0)
    return RecordStatus::kTileModes;
  l->data = l->table + table_bytes + mode_bytes;
  const uint64_t data_size = size - kRecordHeaderBytes - table_bytes - mode_bytes;
  if (data_size > 0xFFFFFFFFull || tile_end(*l, l->tiles - 1) != data_size)
    return RecordStatus::kTableEnd;
  l->data_size = static_cast<uint32_t>(data_size);
  return RecordStatus::kOk;
}

// The portable bit deposit: the 8 codes (byte lanes) of a w-bit packed
// integer, w = 1..8; and the spread of a sparse block's listed codes (the
// low lanes of `listed`) to the lanes its mask marks.
struct PortableUnpack {
  OBSAUG_HD static uint64_t deposit(uint64_t bits, int w) {
    if (w == 8) return bits;
    const uint64_t mask = (uint64_t{1} << w) - 1;
    uint64_t codes = 0;
    for (int i = 0; i < kBlockCodes; ++i) codes |= ((bits >> (i * w)) & mask) << (8 * i);
    return codes;
  }
  OBSAUG_HD static uint64_t spread(uint64_t listed, uint32_t mask) {
    uint64_t codes = 0;
    for (int lane = 0; lane < kBlockCodes; ++lane) {
      if ((mask >> lane) & 1) {
        codes |= (listed & 0xFF) << (8 * lane);
        listed >>= 8;
      }
    }
    return codes;
  }
};

// The w value bytes at v as an integer: one 8-byte load where 8 bytes are
// left before `stop`, byte by byte at a span's end.
OBSAUG_HD uint64_t load_value_bits(const uint8_t* v, const uint8_t* stop, int w) {
  if (stop - v >= 8) {
    uint64_t bits;
    memcpy(&bits, v, 8);
    return w == 8 ? bits : bits & ((uint64_t{1} << (8 * w)) - 1);
  }
  return load_lanes(v, w);
}

// Field k of a tile's fields (a nibble: bit 3 sparse, bits 0..2 w - 1).
OBSAUG_HD int read_field(const uint8_t* fields, int64_t k) {
  return (fields[k >> 1] >> ((k & 1) * 4)) & 0xF;
}

// One marked block of `n` codes (8, or fewer at a row's end) whose field is
// `field`: its codes from the values at `v` (and, sparse, its mask from
// `masks`), both cursors moved past it; the checks every decoder makes, in
// this order: the mask (not 0, nothing past n), the values within the span
// (`stop`), a dense block's codes past n 0. (A sparse block's w is the bit
// length of its largest code, as a dense one's; its codes are not checked
// against it.)
template <typename Unpack>
OBSAUG_HD RecordStatus read_block(int field, int n, const uint8_t*& v, const uint8_t* stop,
                                  const uint8_t*& masks, uint64_t* codes) {
  const int w = (field & 7) + 1;
  if ((field & 8) == 0) {
    if (stop - v < w) return RecordStatus::kTileShort;
    *codes = Unpack::deposit(load_value_bits(v, stop, w), w);
    v += w;
    return n < kBlockCodes && (*codes >> (8 * n)) != 0 ? RecordStatus::kTilePadding
                                                       : RecordStatus::kOk;
  }
  const uint32_t mask = *masks++;
  if (mask == 0 || (mask >> n) != 0) return RecordStatus::kTileMask;
  const int listed = popcount_byte(mask);
  if (stop - v < listed) return RecordStatus::kTileShort;
  *codes = Unpack::spread(load_value_bits(v, stop, listed), mask);
  v += listed;
  return RecordStatus::kOk;
}

// Rows [y0, y0 + rows) of the frame's plane, at element `first`.
struct TileRows {
  int64_t first;
  int32_t rows;
};
OBSAUG_HD TileRows tile_rows_of(const PackedLayout& l, int64_t t) {
  const int64_t plane = t / l.tiles_per_plane;
  const int32_t y0 = static_cast<int32_t>(t % l.tiles_per_plane) * l.tile_rows;
  const int32_t rows = l.height - y0 < l.tile_rows ? l.height - y0 : l.tile_rows;
  return {(plane * l.height + y0) * static_cast<int64_t>(l.width), rows};
}

// Whether tile t's codes are delta ones (else intra).
OBSAUG_HD bool tile_is_delta(const PackedLayout& l, int64_t t) {
  return l.delta && ((l.modes[t >> 3] >> (t & 7)) & 1) == 0;
}

// A tile's parts, after its prologue's checks (tile_plan).
struct TilePlan {
  TileRows rows;
  bool delta;             // the tile's codes are delta ones
  const uint8_t* bitmap;  // null: an empty tile (every code 0)
  const uint8_t* fields;
  const uint8_t* masks;
  const uint8_t* values;
  const uint8_t* stop;  // the span's end
};

// Tile t's span and parts: the span lies in the data area, the bitmap, the
// fields and the masks fit in it, the bitmap's and fields' padding is 0.
// What the values need is checked as they are read.
OBSAUG_HD RecordStatus tile_plan(const PackedLayout& l, int64_t t, TilePlan* plan) {
  const uint32_t begin = t == 0 ? 0 : tile_end(l, t - 1);
  const uint32_t end = tile_end(l, t);
  if (begin > end || end > l.data_size) return RecordStatus::kTileSpan;
  plan->rows = tile_rows_of(l, t);
  plan->delta = tile_is_delta(l, t);
  plan->bitmap = nullptr;
  plan->stop = l.data + end;
  if (begin == end) return RecordStatus::kOk;
  const uint8_t* const span = l.data + begin;
  const int64_t size = end - begin;
  const int64_t blocks = static_cast<int64_t>(plan->rows.rows) * l.blocks_per_row;
  const int64_t bitmap_bytes = (blocks + 7) / 8;
  if (size < bitmap_bytes) return RecordStatus::kTileShort;
  int64_t marked = 0;
  for (int64_t k = 0; k < bitmap_bytes; ++k) marked += popcount_byte(span[k]);
  if (blocks % 8 != 0 && (span[bitmap_bytes - 1] >> (blocks % 8)) != 0)
    return RecordStatus::kTileBitmap;
  const int64_t field_bytes = (marked + 1) / 2;
  if (size - bitmap_bytes < field_bytes) return RecordStatus::kTileShort;
  const uint8_t* const fields = span + bitmap_bytes;
  if (marked % 2 != 0 && (fields[field_bytes - 1] >> 4) != 0) return RecordStatus::kTilePadding;
  int64_t sparse = 0;
  for (int64_t k = 0; k < field_bytes; ++k) sparse += popcount_byte(fields[k] & 0x88);
  if (size - bitmap_bytes - field_bytes < sparse) return RecordStatus::kTileShort;
  plan->bitmap = span;
  plan->fields = fields;
  plan->masks = fields + field_bytes;
  plan->values = plan->masks + sparse;
  return RecordStatus::kOk;
}

// An empty tile: every code 0, so the reference's rows (delta) or zeros (intra).
OBSAUG_HD void fill_empty_tile(const PackedLayout& l, const TilePlan& plan,
                               const uint8_t* __restrict__ reference, uint8_t* __restrict__ out) {
  const TileRows& tile = plan.rows;
  const size_t bytes = static_cast<size_t>(tile.rows) * static_cast<size_t>(l.width);
  if (plan.delta) {
    memcpy(out + tile.first, reference + tile.first, bytes);
  } else {
    memset(out + tile.first, 0, bytes);
  }
}

// tile_plan, and the whole decode of an empty tile: the tile is done when
// the status is not kOk or plan->bitmap is null.
OBSAUG_HD RecordStatus start_tile(const PackedLayout& l, int64_t t,
                                  const uint8_t* __restrict__ reference, uint8_t* __restrict__ out,
                                  TilePlan* plan) {
  const RecordStatus s = tile_plan(l, t, plan);
  if (s == RecordStatus::kOk && plan->bitmap == nullptr) fill_empty_tile(l, *plan, reference, out);
  return s;
}

// Decodes tile t of the packed record laid out by `l` into the frame `out`
// ([C, H, W] contiguous), reading `reference` (same layout) when the record
// is delta. Reads only the tile's span, the reference's rows of the tile and
// writes only the output's; on an error the tile's rows are left partly
// written. Unpack: PortableUnpack (here and on the device). The host's
// faster loop (packed_cpu.cpp) gives the same frame and the same status.
template <typename Unpack>
OBSAUG_HD RecordStatus decode_packed_tile(const PackedLayout& l, int64_t t,
                                          const uint8_t* __restrict__ reference,
                                          uint8_t* __restrict__ out) {
  TilePlan plan;
  const RecordStatus s = start_tile(l, t, reference, out, &plan);
  if (s != RecordStatus::kOk || plan.bitmap == nullptr) return s;
  const int32_t w_row = l.width;
  const int last_codes = w_row % kBlockCodes == 0 ? kBlockCodes : w_row % kBlockCodes;
  const uint8_t* v = plan.values;
  const uint8_t* masks = plan.masks;
  int64_t block = 0;
  int64_t field = 0;
  for (int32_t r = 0; r < plan.rows.rows; ++r) {
    const int64_t row = plan.rows.first + static_cast<int64_t>(r) * w_row;
    uint8_t left = r > 0 ? out[row - w_row] : 0;  // intra: x = 0 is predicted from above
    for (int32_t j = 0; j < l.blocks_per_row; ++j, ++block) {
      const int n = j + 1 == l.blocks_per_row ? last_codes : kBlockCodes;
      uint64_t codes = 0;
      if ((plan.bitmap[block >> 3] >> (block & 7)) & 1) {
        const RecordStatus b =
            read_block<Unpack>(read_field(plan.fields, field++), n, v, plan.stop, masks, &codes);
        if (b != RecordStatus::kOk) return b;
      }
      const uint64_t d = unzigzag_lanes(codes);
      const int64_t x = row + static_cast<int64_t>(j) * kBlockCodes;
      uint64_t px;
      if (plan.delta) {
        px = add_lanes(load_lanes(reference + x, n), d);
      } else {
        px = prefix_lanes(d, left);
        left = static_cast<uint8_t>(px >> (8 * (n - 1)));
      }
      store_lanes(out + x, px, n);
    }
  }
  return v == plan.stop ? RecordStatus::kOk : RecordStatus::kTileLong;
}

}  // namespace
}  // namespace codecs
}  // namespace obsaug

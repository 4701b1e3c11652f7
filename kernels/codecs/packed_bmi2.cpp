// The packed codec's BMI2 loops (kernels/codecs/packed_x86.h): the encoder
// with pext (packed_encode.h's template, inlined under target + flatten), and
// the decoder's own tile loop, pdep a block, AVX2 a row, checked against
// packed.h's decode_packed_tile by the tests, frame for frame and status for
// status.
#include "kernels/codecs/packed_x86.h"

#if OBSAUG_CODECS_X86

namespace obsaug {
namespace codecs {
namespace {

struct Bmi2Pack {
  __attribute__((target("bmi2"))) static uint64_t extract(uint64_t codes, int w) {
    return _pext_u64(codes, kLaneOnes * ((1u << w) - 1));
  }
};

// decode_packed_tile's frame and status, faster: per row, the codes of the
// marked blocks are deposited with pdep into `codes` (blocks_per_row * 8
// bytes, the others 0), visiting only the bitmap's set bits; the row is then
// added to the reference or summed with 32- and 16-byte vectors. Bitmap and
// widths are read 8 bytes at a time where the data area has them (bits
// past the field masked off), value bytes where the tile's span has 8 left.
// The checks are decode_packed_tile's, in the same order.
OBSAUG_BMI2_TARGET RecordStatus decode_tile_fast(const PackedLayout& l, int64_t t,
                                                 const uint8_t* __restrict reference,
                                                 uint8_t* __restrict out,
                                                 uint8_t* __restrict codes) {
  TilePlan plan;
  const RecordStatus s = tile_plan(l, t, &plan);
  if (s != RecordStatus::kOk) return s;
  if (plan.bitmap == nullptr) {
    fill_empty_tile(l, plan, reference, out);
    return RecordStatus::kOk;
  }
  const int32_t width = l.width;
  const int32_t blocks_per_row = l.blocks_per_row;
  const int padding_lanes = blocks_per_row * kBlockCodes - width;
  const uint8_t* v = plan.values;
  const uint8_t* const stop = plan.stop;
  const uint8_t* const data_end = l.data + l.data_size;
  const int64_t bitmap_size = data_end - plan.bitmap;
  const int64_t widths_size = data_end - plan.widths;
  uint64_t block = 0;
  uint64_t width_pos = 0;
  for (int32_t r = 0; r < plan.rows.rows; ++r) {
    std::memset(codes, 0, static_cast<size_t>(blocks_per_row) * kBlockCodes);
    for (int32_t j0 = 0; j0 < blocks_per_row; j0 += 19) {  // 19 widths: 57 bits
      const int count = blocks_per_row - j0 < 19 ? blocks_per_row - j0 : 19;
      uint64_t marked = bits_at(plan.bitmap, bitmap_size, block + j0, count);
      const int fields = static_cast<int>(_mm_popcnt_u64(marked));
      uint64_t widths = bits_at(plan.widths, widths_size, width_pos, 3 * fields);
      width_pos += 3 * static_cast<uint64_t>(fields);
      if (stop - v >= 8 * (fields + 1)) {  // every value's 8-byte load lies in the span
        while (marked != 0) {
          const int64_t j = j0 + static_cast<int64_t>(_tzcnt_u64(marked));
          marked = _blsr_u64(marked);
          const int w = static_cast<int>(widths & 7) + 1;
          widths >>= 3;
          uint64_t bits;
          std::memcpy(&bits, v, 8);
          const uint64_t c =
              _pdep_u64(_bzhi_u64(bits, static_cast<unsigned>(8 * w)), kDepositMask[w]);
          std::memcpy(codes + j * kBlockCodes, &c, 8);
          v += w;
        }
        continue;
      }
      const RecordStatus checked = deposit_blocks_checked(marked, widths, j0, v, stop, codes);
      if (checked != RecordStatus::kOk) return checked;
    }
    if (last_block_padded(codes, blocks_per_row, padding_lanes)) return RecordStatus::kTilePadding;
    block += static_cast<uint64_t>(blocks_per_row);
    const int64_t row = plan.rows.first + static_cast<int64_t>(r) * width;
    if (plan.delta) {
      finish_delta_row(codes, reference + row, out + row, width);
    } else {
      finish_intra_row(codes, out + row, width, r > 0 ? out[row - width] : 0);
    }
  }
  return v == stop ? RecordStatus::kOk : RecordStatus::kTileLong;
}

}  // namespace

__attribute__((target("bmi,bmi2,popcnt"), flatten)) int64_t encode_packed_bmi2(
    FrameShape shape, const uint8_t* frame, const uint8_t* reference, int tile_rows,
    PackedScratch& scratch, uint8_t* dst) {
  return encode_packed_record<Bmi2Pack>(shape, frame, reference, tile_rows, scratch, dst);
}

OBSAUG_BMI2_TARGET TileStatus decode_packed_bmi2(const PackedLayout& layout,
                                                 const uint8_t* reference, uint8_t* out,
                                                 uint8_t* codes) {
  for (int64_t t = 0; t < layout.tiles; ++t) {
    const RecordStatus s = decode_tile_fast(layout, t, reference, out, codes);
    if (s != RecordStatus::kOk) return {s, t};
  }
  return {RecordStatus::kOk, -1};
}

}  // namespace codecs
}  // namespace obsaug

#endif

// The packed codec's BMI2 loops (kernels/codecs/packed_x86.h): the encoder
// with pext (packed_encode.h's template, inlined under target + flatten), and
// the decoder's rows, pdep a block, AVX2 a row (packed_x86.h's tile loop),
// checked against packed.h's decode_packed_tile by the tests, frame for
// frame and status for status.
#include "kernels/codecs/packed_x86.h"

#if OBSAUG_CODECS_X86

namespace obsaug {
namespace codecs {
namespace {

struct Bmi2Pack {
  OBSAUG_BMI2_TARGET static uint64_t extract(uint64_t codes, int w) {
    return _pext_u64(codes, kDepositMask[w]);
  }
  OBSAUG_BMI2_TARGET static uint64_t gather(uint64_t codes, uint32_t mask) {
    return _pext_u64(codes, lane_mask(mask));
  }
};

// A row's codes, pdep a block: visiting only the bitmap's set bits, 14 at a
// time (56 bits of fields); a dense block's value bytes read 8 at a time
// where the span has them, anything else through packed.h's read_block.
struct Bmi2Loop {
  OBSAUG_BMI2_TARGET static RecordStatus deposit_row(TileCursor& c, int32_t blocks_per_row,
                                                     uint8_t* __restrict codes) {
    std::memset(codes, 0, static_cast<size_t>(blocks_per_row) * kBlockCodes);
    for (int32_t j0 = 0; j0 < blocks_per_row; j0 += 14) {
      const int count = blocks_per_row - j0 < 14 ? blocks_per_row - j0 : 14;
      uint64_t marked = bits_at(c.bitmap, c.bitmap_size, c.block + j0, count);
      const int listed = static_cast<int>(_mm_popcnt_u64(marked));
      uint64_t fields = bits_at(c.fields, c.fields_size, 4 * c.field, 4 * listed);
      c.field += static_cast<uint64_t>(listed);
      if (c.stop - c.v < 8 * (listed + 1)) {
        const RecordStatus s = read_blocks_checked(c, marked, fields, j0, blocks_per_row, codes);
        if (s != RecordStatus::kOk) return s;
        continue;
      }
      while (marked != 0) {  // every value's 8-byte load lies in the span
        const int64_t j = j0 + static_cast<int64_t>(_tzcnt_u64(marked));
        marked = _blsr_u64(marked);
        const int field = static_cast<int>(fields & 0xF);
        fields >>= 4;
        uint64_t code;
        if (field & 8) {
          const int n = j + 1 == blocks_per_row ? c.last_codes : kBlockCodes;
          const RecordStatus s = read_block<Bmi2Unpack>(field, n, c.v, c.stop, c.masks, &code);
          if (s != RecordStatus::kOk) return s;
        } else {  // dense: the last block's padding is checked after the row
          const int w = field + 1;
          uint64_t bits;
          std::memcpy(&bits, c.v, 8);
          code = _pdep_u64(_bzhi_u64(bits, static_cast<unsigned>(8 * w)), kDepositMask[w]);
          c.v += w;
        }
        std::memcpy(codes + j * kBlockCodes, &code, 8);
      }
    }
    return RecordStatus::kOk;
  }
  OBSAUG_BMI2_TARGET static void finish_delta(const uint8_t* codes, const uint8_t* reference,
                                              uint8_t* out, int32_t width) {
    finish_delta_row(codes, reference, out, width);
  }
  OBSAUG_BMI2_TARGET static void finish_intra(const uint8_t* codes, uint8_t* out, int32_t width,
                                              uint8_t above) {
    finish_intra_row(codes, out, width, above);
  }
};

}  // namespace

__attribute__((target("bmi,bmi2,popcnt,avx2"), flatten)) int64_t encode_packed_bmi2(
    FrameShape shape, const uint8_t* frame, const uint8_t* reference, int tile_rows,
    PackedScratch& scratch, uint8_t* dst) {
  return encode_packed_record<Bmi2Pack>(shape, frame, reference, tile_rows, scratch, dst);
}

__attribute__((target("bmi,bmi2,popcnt,avx2"), flatten)) TileStatus decode_packed_bmi2(
    const PackedLayout& layout, const uint8_t* reference, uint8_t* out, uint8_t* codes) {
  return decode_tiles<Bmi2Loop>(layout, reference, out, codes);
}

}  // namespace codecs
}  // namespace obsaug

#endif

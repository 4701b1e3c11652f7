// The packed codec's AVX-512 decode (kernels/codecs/packed_x86.h): eight
// blocks a step. Per step of 8 block positions of a row with k marked ones:
// their fields (pdep into bytes), the value offsets by a byte-wise prefix
// sum (a multiply), one masked load of their value bytes, a byte permute
// (VBMI) that puts block i's bytes in qword i, a multishift that takes code j
// of qword i at bit j * w_i, a mask to w_i bits; sparse blocks' listed codes
// (bytes) are compressed into one run and expanded to the lanes their masks
// mark (VBMI2); an expand moves the k qwords to their marked positions. The
// row is then added to the reference, or summed, 64 bytes at a time. The
// checks and statuses are decode_packed_tile's: a step whose blocks could
// fail one goes block by block through read_blocks_checked.
#include "kernels/codecs/packed_x86.h"

#if OBSAUG_CODECS_X86

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which it then
// reports as maybe used uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace obsaug {
namespace codecs {
namespace {

#define OBSAUG_AVX512_TARGET \
  __attribute__((target("bmi,bmi2,popcnt,avx2,avx512f,avx512bw,avx512vbmi,avx512vbmi2")))

constexpr uint64_t shift_control(int w) {  // byte j = j * w: code j's first bit
  uint64_t c = 0;
  for (int j = 0; j < kBlockCodes; ++j) c |= static_cast<uint64_t>(j * w) << (8 * j);
  return c;
}
// Indexed by width - 1.
alignas(64) constexpr uint64_t kShiftControl[8] = {
    shift_control(1), shift_control(2), shift_control(3), shift_control(4),
    shift_control(5), shift_control(6), shift_control(7), shift_control(8)};
alignas(64) constexpr uint64_t kCodeMask[8] = {kLaneOnes * 0x01, kLaneOnes * 0x03, kLaneOnes * 0x07,
                                               kLaneOnes * 0x0F, kLaneOnes * 0x1F, kLaneOnes * 0x3F,
                                               kLaneOnes * 0x7F, kLaneOnes * 0xFF};

// out = reference + unzigzag(codes), 64 bytes a step, the last one masked.
OBSAUG_AVX512_TARGET inline void finish_delta_row_avx512(const uint8_t* __restrict codes,
                                                         const uint8_t* __restrict reference,
                                                         uint8_t* __restrict out, int32_t width) {
  const __m512i low7 = _mm512_set1_epi8(0x7F);
  const __m512i one = _mm512_set1_epi8(1);
  for (int32_t x = 0; x < width; x += 64) {
    const __mmask64 m = width - x >= 64 ? ~__mmask64{0} : _bzhi_u64(~uint64_t{0}, width - x);
    const __m512i c = _mm512_maskz_loadu_epi8(m, codes + x);
    const __m512i r = _mm512_maskz_loadu_epi8(m, reference + x);
    const __m512i half = _mm512_and_si512(_mm512_srli_epi16(c, 1), low7);
    const __m512i negative = _mm512_sub_epi8(_mm512_setzero_si512(), _mm512_and_si512(c, one));
    _mm512_mask_storeu_epi8(out + x, m, _mm512_add_epi8(r, _mm512_xor_si512(half, negative)));
  }
}

// Running sums of unzigzag(codes) along the row from `above` (the
// prediction of x = 0), 64 bytes a step: sums within each 16-byte lane (four
// shifted adds), the lanes' totals carried across the vector (three lane
// shifts), then the carry of the steps before.
OBSAUG_AVX512_TARGET inline void finish_intra_row_avx512(const uint8_t* __restrict codes,
                                                         uint8_t* __restrict out, int32_t width,
                                                         uint8_t above) {
  const __m512i low7 = _mm512_set1_epi8(0x7F);
  const __m512i one = _mm512_set1_epi8(1);
  const __m512i zero = _mm512_setzero_si512();
  const __m512i last_of_lane = _mm512_set1_epi8(15);
  const __m512i last_byte = _mm512_set1_epi8(63);
  __m512i carry = _mm512_set1_epi8(static_cast<char>(above));
  for (int32_t x = 0; x < width; x += 64) {
    const __mmask64 m = width - x >= 64 ? ~__mmask64{0} : _bzhi_u64(~uint64_t{0}, width - x);
    const __m512i c = _mm512_maskz_loadu_epi8(m, codes + x);
    __m512i d = _mm512_xor_si512(_mm512_and_si512(_mm512_srli_epi16(c, 1), low7),
                                 _mm512_sub_epi8(zero, _mm512_and_si512(c, one)));
    d = _mm512_add_epi8(d, _mm512_bslli_epi128(d, 1));
    d = _mm512_add_epi8(d, _mm512_bslli_epi128(d, 2));
    d = _mm512_add_epi8(d, _mm512_bslli_epi128(d, 4));
    d = _mm512_add_epi8(d, _mm512_bslli_epi128(d, 8));
    __m512i before = _mm512_alignr_epi64(_mm512_shuffle_epi8(d, last_of_lane), zero, 6);
    before = _mm512_add_epi8(before, _mm512_alignr_epi64(before, zero, 6));
    before = _mm512_add_epi8(before, _mm512_alignr_epi64(before, zero, 4));
    const __m512i sums = _mm512_add_epi8(_mm512_add_epi8(d, before), carry);
    _mm512_mask_storeu_epi8(out + x, m, sums);
    carry = _mm512_permutexvar_epi8(last_byte, sums);
  }
}

// Per byte lane of x: the number of its set bits.
inline uint64_t lane_popcounts(uint64_t x) {
  x = x - ((x >> 1) & 0x5555555555555555ull);
  x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
  return (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0Full;
}

// Per byte lane of x: 0x80 where it is 0, else 0.
inline uint64_t zero_lanes(uint64_t x) { return (x - kLaneOnes) & ~x & kLaneHigh; }

// Qword i: the codes of block i, whose value bytes start at v plus byte
// i - 1 of `sums` (the running sum of the blocks' sizes; `total` bytes in
// all), w - 1 in byte i of `w_less_one`: a masked load (no byte past
// v + total), a byte permute that puts each block's bytes in its qword, a
// multishift (code j at bit j w) and a mask to w bits.
OBSAUG_AVX512_TARGET inline __m512i deposit_lanes(const uint8_t* v, int64_t total, uint64_t sums,
                                                  uint64_t w_less_one) {
  const __m512i lane_of_byte =
      _mm512_set_epi64(kLaneOnes * 7, kLaneOnes * 6, kLaneOnes * 5, kLaneOnes * 4, kLaneOnes * 3,
                       kLaneOnes * 2, kLaneOnes, 0);
  const __m512i data =
      _mm512_maskz_loadu_epi8(_bzhi_u64(~uint64_t{0}, static_cast<unsigned>(total)), v);
  const __m512i offsets = _mm512_set1_epi64(static_cast<long long>(sums << 8));
  const __m512i index = _mm512_add_epi8(_mm512_permutexvar_epi8(lane_of_byte, offsets),
                                        _mm512_set1_epi64(0x0706050403020100ll));
  const __m512i values = _mm512_permutexvar_epi8(index, data);
  const __m512i w_index =
      _mm512_cvtepu8_epi64(_mm_cvtsi64_si128(static_cast<long long>(w_less_one)));
  const __m512i control = _mm512_permutexvar_epi64(w_index, _mm512_load_si512(kShiftControl));
  return _mm512_and_si512(_mm512_multishift_epi64_epi8(control, values),
                          _mm512_permutexvar_epi64(w_index, _mm512_load_si512(kCodeMask)));
}

struct Avx512Loop {
  OBSAUG_AVX512_TARGET static RecordStatus deposit_row(TileCursor& c, int32_t blocks_per_row,
                                                       uint8_t* __restrict codes) {
    const __m128i low_bits = _mm_setr_epi8(0, 1, 3, 7, 15, 31, 63, 127, -1, 0, 0, 0, 0, 0, 0, 0);
    for (int32_t j0 = 0; j0 < blocks_per_row; j0 += 8) {
      uint8_t* const step = codes + static_cast<int64_t>(j0) * kBlockCodes;
      const int count = blocks_per_row - j0 < 8 ? blocks_per_row - j0 : 8;
      const uint64_t marked = bits_at(c.bitmap, c.bitmap_size, c.block + j0, count);
      _mm512_storeu_si512(step, _mm512_setzero_si512());
      if (marked == 0) continue;
      const int k = static_cast<int>(_mm_popcnt_u64(marked));
      const uint64_t fields = bits_at(c.fields, c.fields_size, 4 * c.field, 4 * k);
      const uint64_t field_lanes = _pdep_u64(fields, kLaneOnes * 0xF);  // lane i: field i
      if ((fields & 0x88888888u) == 0) {  // dense blocks only: lane i's value bytes are w_i
        const uint64_t sums = (field_lanes + kLaneOnes) * kLaneOnes;  // lane i: w_0 + .. + w_i
        const int64_t total = static_cast<int64_t>((sums >> (8 * (k - 1))) & 0xFF);
        if (total > c.stop - c.v) {
          const RecordStatus s = read_blocks_checked(c, marked, fields, j0, blocks_per_row, codes);
          if (s != RecordStatus::kOk) return s;
        } else {
          _mm512_storeu_si512(
              step, _mm512_maskz_expand_epi64(static_cast<__mmask8>(marked),
                                              deposit_lanes(c.v, total, sums, field_lanes)));
          c.v += total;
        }
        c.field += static_cast<uint64_t>(k);
        continue;
      }
      const uint64_t w_less_one = field_lanes & (kLaneOnes * 7);
      const uint64_t sparse = ((field_lanes >> 3) & kLaneOnes) * 0xFF;  // 0xFF in sparse lanes
      const int sparse_count = static_cast<int>(_mm_popcnt_u64(sparse) / 8);
      // lane i: block i's mask (dense: every code) and its bits (sparse: n, its value bytes)
      const uint64_t masks =
          ~sparse | _pdep_u64(bits_at(c.masks, c.data_end - c.masks, 0, 8 * sparse_count), sparse);
      const uint64_t listed = lane_popcounts(masks);
      const uint64_t sums = (((w_less_one + kLaneOnes) & ~sparse) | (listed & sparse)) * kLaneOnes;
      const int64_t total = static_cast<int64_t>((sums >> (8 * (k - 1))) & 0xFF);
      const bool last_here = j0 + count == blocks_per_row && ((marked >> (count - 1)) & 1);
      const uint32_t last_mask = static_cast<uint32_t>(masks >> (8 * (k - 1))) & 0xFF;
      if (zero_lanes(masks) != 0 || total > c.stop - c.v ||
          (last_here && ((sparse >> (8 * (k - 1))) & 1) && (last_mask >> c.last_codes) != 0)) {
        const RecordStatus s = read_blocks_checked(c, marked, fields, j0, blocks_per_row, codes);
        if (s != RecordStatus::kOk) return s;
        c.field += static_cast<uint64_t>(k);
        continue;
      }
      // sparse lanes as w = 8 (their listed codes are bytes); then the n listed
      // codes of each block in one run, and each to the lanes its mask marks
      const __m512i deposited =
          deposit_lanes(c.v, total, sums, w_less_one | (sparse & (kLaneOnes * 7)));
      const uint64_t low = static_cast<uint64_t>(_mm_cvtsi128_si64(
          _mm_shuffle_epi8(low_bits, _mm_cvtsi64_si128(static_cast<long long>(listed)))));
      _mm512_storeu_si512(
          step, _mm512_maskz_expand_epi64(
                    static_cast<__mmask8>(marked),
                    _mm512_maskz_expand_epi8(masks, _mm512_maskz_compress_epi8(low, deposited))));
      c.v += total;
      c.masks += sparse_count;
      c.field += static_cast<uint64_t>(k);
    }
    return RecordStatus::kOk;
  }
  OBSAUG_AVX512_TARGET static void finish_delta(const uint8_t* codes, const uint8_t* reference,
                                                uint8_t* out, int32_t width) {
    finish_delta_row_avx512(codes, reference, out, width);
  }
  OBSAUG_AVX512_TARGET static void finish_intra(const uint8_t* codes, uint8_t* out, int32_t width,
                                                uint8_t above) {
    finish_intra_row_avx512(codes, out, width, above);
  }
};

}  // namespace

__attribute__((target("bmi,bmi2,popcnt,avx2,avx512f,avx512bw,avx512vbmi,avx512vbmi2"), flatten))
TileStatus
decode_packed_avx512(const PackedLayout& layout, const uint8_t* reference, uint8_t* out,
                     uint8_t* codes) {
  return decode_tiles<Avx512Loop>(layout, reference, out, codes);
}

}  // namespace codecs
}  // namespace obsaug

#pragma GCC diagnostic pop

#endif

// The packed codec's x86 loops (kernels/codecs/packed_bmi2.cpp,
// packed_avx512.cpp): their entry points, and the row helpers they share.
// Host only, x86-64 only. Every helper carries its instruction set in a
// target attribute (no file is compiled with other flags) and has internal
// linkage, so the library's other code stays baseline x86-64.
#pragma once

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define OBSAUG_CODECS_X86 1
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/codecs/packed.h"
#include "kernels/codecs/packed_cpu.h"
#include "kernels/codecs/packed_encode.h"

namespace obsaug {
namespace codecs {

// packed_bmi2.cpp: BMI2 (pdep, pext) with AVX2 rows. `codes`: blocks_per_row * 8 bytes.
int64_t encode_packed_bmi2(FrameShape shape, const uint8_t* frame, const uint8_t* reference,
                           int tile_rows, PackedScratch& scratch, uint8_t* dst);
TileStatus decode_packed_bmi2(const PackedLayout& layout, const uint8_t* reference, uint8_t* out,
                              uint8_t* codes);
// packed_avx512.cpp: eight blocks a step (AVX-512 VBMI's byte permute and
// multishift, VBMI2's byte compress and expand). `codes`:
// ceil(blocks_per_row / 8) * 64 bytes.
TileStatus decode_packed_avx512(const PackedLayout& layout, const uint8_t* reference, uint8_t* out,
                                uint8_t* codes);

#define OBSAUG_BMI2_TARGET __attribute__((target("bmi,bmi2,popcnt,avx2")))

namespace {

// Per byte: reference + unzigzag(code), 32 bytes.
OBSAUG_BMI2_TARGET inline __m256i add_unzigzag(__m256i reference, __m256i codes) {
  const __m256i half = _mm256_and_si256(_mm256_srli_epi16(codes, 1), _mm256_set1_epi8(0x7F));
  const __m256i negative =
      _mm256_sub_epi8(_mm256_setzero_si256(), _mm256_and_si256(codes, _mm256_set1_epi8(1)));
  return _mm256_add_epi8(reference, _mm256_xor_si256(half, negative));
}

// A row of delta codes onto its reference row: out = reference + unzigzag(codes).
OBSAUG_BMI2_TARGET inline void finish_delta_row(const uint8_t* __restrict codes,
                                                const uint8_t* __restrict reference,
                                                uint8_t* __restrict out, int32_t width) {
  if (width >= 32) {
    int32_t x = 0;
    for (; x + 32 <= width; x += 32) {
      const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + x));
      const __m256i r = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(reference + x));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + x), add_unzigzag(r, c));
    }
    if (x < width) {  // the last 32 bytes again: the result is a function of its inputs
      x = width - 32;
      const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + x));
      const __m256i r = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(reference + x));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + x), add_unzigzag(r, c));
    }
    return;
  }
  for (int32_t x = 0; x < width; x += kBlockCodes) {
    const int n = width - x < kBlockCodes ? width - x : kBlockCodes;
    uint64_t c;
    std::memcpy(&c, codes + x, 8);
    store_lanes(out + x, add_lanes(load_lanes(reference + x, n), unzigzag_lanes(c)), n);
  }
}

// A row of intra codes: running sums of unzigzag(codes) from `above` (the
// prediction of x = 0), 16 bytes a step.
OBSAUG_BMI2_TARGET inline void finish_intra_row(const uint8_t* __restrict codes,
                                                uint8_t* __restrict out, int32_t width,
                                                uint8_t above) {
  __m128i carry = _mm_set1_epi8(static_cast<char>(above));  // the last pixel, in every byte
  int32_t x = 0;
  for (; x + 16 <= width; x += 16) {
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + x));
    const __m128i half = _mm_and_si128(_mm_srli_epi16(c, 1), _mm_set1_epi8(0x7F));
    __m128i d =
        _mm_xor_si128(half, _mm_sub_epi8(_mm_setzero_si128(), _mm_and_si128(c, _mm_set1_epi8(1))));
    d = _mm_add_epi8(d, _mm_slli_si128(d, 1));
    d = _mm_add_epi8(d, _mm_slli_si128(d, 2));
    d = _mm_add_epi8(d, _mm_slli_si128(d, 4));
    d = _mm_add_epi8(d, _mm_slli_si128(d, 8));
    d = _mm_add_epi8(d, carry);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + x), d);
    carry = _mm_shuffle_epi8(d, _mm_set1_epi8(15));
  }
  uint8_t left = static_cast<uint8_t>(_mm_cvtsi128_si32(carry));
  for (; x < width; x += kBlockCodes) {
    const int n = width - x < kBlockCodes ? width - x : kBlockCodes;
    uint64_t c;
    std::memcpy(&c, codes + x, 8);
    const uint64_t px = prefix_lanes(unzigzag_lanes(c), left);
    store_lanes(out + x, px, n);
    left = static_cast<uint8_t>(px >> (8 * (n - 1)));
  }
}

// pdep masks: the low w bits of every byte lane.
constexpr uint64_t kDepositMask[9] = {0,
                                      kLaneOnes * 0x01,
                                      kLaneOnes * 0x03,
                                      kLaneOnes * 0x07,
                                      kLaneOnes * 0x0F,
                                      kLaneOnes * 0x1F,
                                      kLaneOnes * 0x3F,
                                      kLaneOnes * 0x7F,
                                      kLaneOnes * 0xFF};

// `count` <= 57 bits of `bytes` (of which `size` are readable) from bit `pos`.
OBSAUG_BMI2_TARGET inline uint64_t bits_at(const uint8_t* bytes, int64_t size, uint64_t pos,
                                           int count) {
  const uint64_t byte = pos >> 3;
  uint64_t word = 0;
  if (static_cast<int64_t>(byte) + 8 <= size) {
    std::memcpy(&word, bytes + byte, 8);
  } else {
    for (int64_t k = static_cast<int64_t>(byte); k < size && k < static_cast<int64_t>(byte) + 8;
         ++k)
      word |= uint64_t{bytes[k]} << (8 * (k - static_cast<int64_t>(byte)));
  }
  return _bzhi_u64(word >> (pos & 7), static_cast<unsigned>(count));
}

// Every byte lane whose bit `mask` sets, 0xFF.
OBSAUG_BMI2_TARGET inline uint64_t lane_mask(uint32_t mask) {
  return _pdep_u64(mask, kLaneOnes) * 0xFF;
}

// packed.h's deposit and spread with BMI2.
struct Bmi2Unpack {
  OBSAUG_BMI2_TARGET static uint64_t deposit(uint64_t bits, int w) {
    return _pdep_u64(bits, kDepositMask[w]);
  }
  OBSAUG_BMI2_TARGET static uint64_t spread(uint64_t listed, uint32_t mask) {
    return _pdep_u64(listed, lane_mask(mask));
  }
};

// Where an x86 decoder is in a tile: the next bits of its bitmap and fields
// (read 8 bytes at a time where the data area has them), its masks and values.
struct TileCursor {
  const uint8_t* bitmap;
  const uint8_t* fields;
  int64_t bitmap_size;  // bytes readable from bitmap / fields (to the data area's end)
  int64_t fields_size;
  const uint8_t* masks;     // the next mask
  const uint8_t* v;         // the next value byte
  const uint8_t* stop;      // the span's end
  const uint8_t* data_end;  // the data area's (how far 8-byte reads may go)
  int last_codes;           // codes in a row's last block
  uint64_t block = 0;       // the row's first block in the tile
  uint64_t field = 0;       // the next field
};

// The codes of the blocks `marked` (bits from block j0 of the row, in order;
// `fields` their nibbles) into `codes` (8 bytes a block), each through
// packed.h's read_block: its checks, at the same block as decode_packed_tile.
OBSAUG_BMI2_TARGET inline RecordStatus read_blocks_checked(TileCursor& c, uint64_t marked,
                                                           uint64_t fields, int64_t j0,
                                                           int32_t blocks_per_row,
                                                           uint8_t* __restrict codes) {
  while (marked != 0) {
    const int64_t j = j0 + static_cast<int64_t>(_tzcnt_u64(marked));
    marked = _blsr_u64(marked);
    const int n = j + 1 == blocks_per_row ? c.last_codes : kBlockCodes;
    uint64_t code;
    const RecordStatus s =
        read_block<Bmi2Unpack>(static_cast<int>(fields & 0xF), n, c.v, c.stop, c.masks, &code);
    if (s != RecordStatus::kOk) return s;
    fields >>= 4;
    std::memcpy(codes + j * kBlockCodes, &code, 8);
  }
  return RecordStatus::kOk;
}

// decode_packed_tile's check of a row's last block, on its deposited codes.
OBSAUG_BMI2_TARGET inline bool last_block_padded(const uint8_t* codes, int32_t blocks_per_row,
                                                 int padding_lanes) {
  if (padding_lanes == 0) return false;
  uint64_t last;
  std::memcpy(&last, codes + static_cast<int64_t>(blocks_per_row - 1) * kBlockCodes, 8);
  return (last >> (8 * (kBlockCodes - padding_lanes))) != 0;
}

// The x86 decoders' tile (decode_packed_tile's frame and status): per row,
// Loop::deposit_row puts the codes of the row's marked blocks into `codes`
// (8 bytes a block, the others 0; kTileShort where a value runs past the
// span, at the block decode_packed_tile stops at), then Loop::finish_delta /
// finish_intra turn the row's codes into pixels. Inlined, with the loop's
// own functions, into each ISA's entry point (target + flatten).
template <typename Loop>
inline RecordStatus decode_tile_rows(const PackedLayout& l, int64_t t,
                                     const uint8_t* __restrict reference, uint8_t* __restrict out,
                                     uint8_t* __restrict codes) {
  TilePlan plan;
  const RecordStatus s = start_tile(l, t, reference, out, &plan);
  if (s != RecordStatus::kOk || plan.bitmap == nullptr) return s;
  const uint8_t* const data_end = l.data + l.data_size;
  const int padding_lanes = l.blocks_per_row * kBlockCodes - l.width;
  TileCursor c{plan.bitmap,
               plan.fields,
               data_end - plan.bitmap,
               data_end - plan.fields,
               plan.masks,
               plan.values,
               plan.stop,
               data_end,
               kBlockCodes - padding_lanes};
  for (int32_t r = 0; r < plan.rows.rows; ++r) {
    const RecordStatus d = Loop::deposit_row(c, l.blocks_per_row, codes);
    if (d != RecordStatus::kOk) return d;
    if (last_block_padded(codes, l.blocks_per_row, padding_lanes))
      return RecordStatus::kTilePadding;
    c.block += static_cast<uint64_t>(l.blocks_per_row);
    const int64_t row = plan.rows.first + static_cast<int64_t>(r) * l.width;
    if (plan.delta) {
      Loop::finish_delta(codes, reference + row, out + row, l.width);
    } else {
      Loop::finish_intra(codes, out + row, l.width, r > 0 ? out[row - l.width] : 0);
    }
  }
  return c.v == c.stop ? RecordStatus::kOk : RecordStatus::kTileLong;
}

template <typename Loop>
inline TileStatus decode_tiles(const PackedLayout& layout, const uint8_t* reference, uint8_t* out,
                               uint8_t* codes) {
  for (int64_t t = 0; t < layout.tiles; ++t) {
    const RecordStatus s = decode_tile_rows<Loop>(layout, t, reference, out, codes);
    if (s != RecordStatus::kOk) return {s, t};
  }
  return {RecordStatus::kOk, -1};
}

}  // namespace
}  // namespace codecs
}  // namespace obsaug

#else
#define OBSAUG_CODECS_X86 0
#endif

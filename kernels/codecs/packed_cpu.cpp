// The packed codec on the host (kernels/codecs/packed_cpu.h): the portable
// loops (packed.h's decode_packed_tile and packed_encode.h's encoder, as the
// CUDA kernel runs them), and the choice of the x86 loops
// (kernels/codecs/packed_x86.h: packed_bmi2.cpp, packed_avx512.cpp).
#include "kernels/codecs/packed_cpu.h"

#include <stdexcept>
#include <string>

#include "kernels/codecs/packed_x86.h"

namespace obsaug {
namespace codecs {
namespace {

bool cpu_has(CodecIsa isa) {
#if OBSAUG_CODECS_X86
  static const bool bmi2 = __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2") &&
                           __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt");
  static const bool avx512 =
      bmi2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512vbmi2");
  switch (isa) {
    case CodecIsa::kPortable:
      return true;
    case CodecIsa::kBmi2:
      return bmi2;
    case CodecIsa::kAvx512:
      return avx512;
  }
  return false;
#else
  return isa == CodecIsa::kPortable;
#endif
}

void check_isa(CodecIsa isa) {
  if (!cpu_has(isa))
    throw std::invalid_argument(std::string("the packed codec's ") + codec_isa_name(isa) +
                                " loops were asked for, but this CPU (or build) has not the "
                                "instructions; the widest it has are " +
                                codec_isa_name(widest_codec_isa()));
}

}  // namespace

CodecIsa widest_codec_isa() {
  if (cpu_has(CodecIsa::kAvx512)) return CodecIsa::kAvx512;
  if (cpu_has(CodecIsa::kBmi2)) return CodecIsa::kBmi2;
  return CodecIsa::kPortable;
}

const char* codec_isa_name(CodecIsa isa) {
  switch (isa) {
    case CodecIsa::kPortable:
      return "portable";
    case CodecIsa::kBmi2:
      return "bmi2";
    case CodecIsa::kAvx512:
      return "avx512";
  }
  return "unknown";
}

std::vector<CodecIsa> available_codec_isas() {
  std::vector<CodecIsa> out;
  for (CodecIsa isa : {CodecIsa::kPortable, CodecIsa::kBmi2, CodecIsa::kAvx512})
    if (cpu_has(isa)) out.push_back(isa);
  return out;
}

int64_t encode_packed(CodecIsa isa, FrameShape shape, const uint8_t* frame,
                      const uint8_t* reference, int tile_rows, PackedScratch& scratch,
                      uint8_t* dst) {
  check_isa(isa);
#if OBSAUG_CODECS_X86
  if (isa != CodecIsa::kPortable)
    return encode_packed_bmi2(shape, frame, reference, tile_rows, scratch, dst);
#endif
  return encode_packed_record<PortablePack>(shape, frame, reference, tile_rows, scratch, dst);
}

TileStatus decode_packed(CodecIsa isa, const PackedLayout& layout, const uint8_t* reference,
                         uint8_t* out, std::vector<uint8_t>& scratch) {
  check_isa(isa);
  // A row's codes, in steps of 8 blocks (64 bytes) for the AVX-512 loop.
  scratch.resize(static_cast<size_t>((layout.blocks_per_row + 7) / 8) * 64);
#if OBSAUG_CODECS_X86
  if (isa == CodecIsa::kAvx512) return decode_packed_avx512(layout, reference, out, scratch.data());
  if (isa == CodecIsa::kBmi2) return decode_packed_bmi2(layout, reference, out, scratch.data());
#endif
  for (int64_t t = 0; t < layout.tiles; ++t) {
    const RecordStatus s = decode_packed_tile<PortableUnpack>(layout, t, reference, out);
    if (s != RecordStatus::kOk) return {s, t};
  }
  return {RecordStatus::kOk, -1};
}

}  // namespace codecs
}  // namespace obsaug

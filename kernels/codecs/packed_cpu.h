// The packed codec on the host: encode and whole-frame decode, with the bit
// deposit and extraction of BMI2 (pdep, pext) where the CPU has it, the
// portable shift loops of packed.h / packed_encode.h elsewhere. Internal to
// kernels/codecs (frame_codec.cpp calls it); any thread, no state.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/codecs/packed.h"
#include "kernels/codecs/packed_encode.h"
#include "kernels/codecs/record.h"

namespace obsaug {
namespace codecs {

// The instruction sets of the packed codec's host loops. All give the same
// records, frames and statuses. kPortable is packed.h's code, what the CUDA
// kernel runs; kBmi2 is x86-64's pdep / pext with AVX2 rows; kAvx512 decodes
// eight blocks a step with AVX-512 VBMI and VBMI2 (and encodes as kBmi2).
enum class CodecIsa { kPortable, kBmi2, kAvx512 };
CodecIsa widest_codec_isa();                   // the widest this CPU (and build) has
std::vector<CodecIsa> available_codec_isas();  // every one it has, kPortable first
const char* codec_isa_name(CodecIsa isa);      // "portable", "bmi2", "avx512"

// packed_encode.h's encode_packed_record with `isa`'s bit extraction; `dst`
// holds packed_bound(shape, tile_rows) bytes.
int64_t encode_packed(CodecIsa isa, FrameShape shape, const uint8_t* frame,
                      const uint8_t* reference, int tile_rows, PackedScratch& scratch,
                      uint8_t* dst);

// Decodes every tile of the packed record laid out by `layout` into `out`;
// on an error, its status and the first failing tile (the tiles before it
// are decoded, the rest not). `scratch`: the caller's, reused between calls.
// Throws std::invalid_argument for an ISA this CPU has not.
struct TileStatus {
  RecordStatus status;
  int64_t tile;
};
TileStatus decode_packed(CodecIsa isa, const PackedLayout& layout, const uint8_t* reference,
                         uint8_t* out, std::vector<uint8_t>& scratch);

}  // namespace codecs
}  // namespace obsaug

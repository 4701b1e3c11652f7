// libFuzzer target: the distractor decode path on arbitrary bytes — format
// sniffing, TurboJPEG (with DCT-domain scaling) or libpng, colour
// conversion, RandomResizedCrop, flip and the antialiased resize. Malformed
// input must end in DecodeError; anything else (a crash, a sanitizer
// report, another exception) is a finding.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/decode/decode.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  obsaug::DecodeLimits limits;
  limits.max_pixels = 16u << 20;  // keep each input's work bounded
  static obsaug::ImageDecoder decoder(limits);
  // The last byte picks the variant, so the corpus explores all of them.
  const uint8_t variant = size > 0 ? data[size - 1] : 0;
  obsaug::AugmentSpec spec;
  spec.out_height = 24 + (variant & 7) * 9;
  spec.out_width = 84;
  spec.channels = (variant & 8) ? 1 : 3;
  spec.dct_scaling = (variant & 16) == 0;
  spec.random_crop = (variant & 32) == 0;
  std::vector<uint8_t> out(static_cast<size_t>(spec.channels) * spec.out_height * spec.out_width);
  try {
    decoder.decode_augmented(data, size, "fuzz-input", spec, /*seed=*/variant, /*serial=*/size,
                             out.data());
  } catch (const obsaug::DecodeError&) {
  }
  return 0;
}

// obsaug_decode_tool: decodes one JPEG/PNG through the distractor pipeline
// (decode.h) and writes the result as a binary PPM (C = 3) or PGM (C = 1).
// Prints one JSON line saying what was done (crop box in stored pixels, flip,
// DCT scale), which the Pillow comparison (tests/python/engine/
// test_decode_vs_pillow.py) replays with PIL.
//
//   obsaug_decode_tool IN OUT --size HxW [--channels 1|3] [--seed S]
//                      [--serial N] [--whole] [--no-dct]
//
// --whole resizes the whole image (no random crop, no flip). Exit status 1
// with the reason on stderr when the image cannot be decoded, 2 on bad usage.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "engine/decode/decode.h"
#include "engine/source/image_source.h"
#include "files/atomic_file.h"
#include "files/bounded_file.h"
#include "tools/decode_spec_args.h"

namespace {

int usage(const char* msg) {
  std::fprintf(
      stderr,
      "obsaug_decode_tool: %s\nusage: obsaug_decode_tool IN OUT --size HxW [--channels 1|3] "
      "[--seed S] [--serial N] [--whole] [--no-dct]\n",
      msg);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return usage("need an input and an output path");
  const std::string in_path = argv[1], out_path = argv[2];
  obsaug::AugmentSpec spec;
  uint64_t seed = 0, serial = 0;
  const std::string problem = obsaug::parse_decode_args(
      argc, argv, 3, &spec, [&](const std::string& arg, const char* value) {
        if (arg == "--seed" && value) {
          return obsaug::parse_decimal(value, UINT64_MAX, &seed) ? obsaug::kUsedArgAndValue
                                                                 : obsaug::kUnknownArg;
        }
        if (arg == "--serial" && value) {
          return obsaug::parse_decimal(value, UINT64_MAX, &serial) ? obsaug::kUsedArgAndValue
                                                                   : obsaug::kUnknownArg;
        }
        if (arg == "--whole") {
          spec.random_crop = false;
          return obsaug::kUsedArg;
        }
        return obsaug::kUnknownArg;
      });
  if (!problem.empty()) return usage(problem.c_str());

  try {
    obsaug::ImageRef ref;
    ref.path = in_path;
    const obsaug::DecodeLimits limits;
    const std::vector<uint8_t> bytes = obsaug::read_image_bytes(ref, limits.max_bytes);
    obsaug::ImageDecoder decoder(limits);
    std::vector<uint8_t> chw(static_cast<size_t>(spec.channels) * spec.out_height * spec.out_width);
    obsaug::AugmentRecord rec;
    decoder.decode_augmented(bytes.data(), bytes.size(), in_path, spec, seed, serial, chw.data(),
                             &rec);

    const size_t plane = static_cast<size_t>(spec.out_height) * spec.out_width;
    std::string ppm = "P" + std::to_string(spec.channels == 3 ? 6 : 5) + "\n" +
                      std::to_string(spec.out_width) + " " + std::to_string(spec.out_height) +
                      "\n255\n";
    const size_t header = ppm.size();
    ppm.resize(header + chw.size());
    for (size_t p = 0; p < plane; ++p)
      for (int c = 0; c < spec.channels; ++c)
        ppm[header + p * spec.channels + c] = static_cast<char>(chw[c * plane + p]);
    try {  // through a temporary renamed over out_path, as every obsaug output
      obsaug::files::AtomicFile out(out_path);
      out.write(ppm.data(), ppm.size());
      out.commit();
    } catch (const obsaug::files::FileError& e) {
      std::fprintf(stderr, "obsaug_decode_tool: cannot write %s: %s\n", out_path.c_str(),
                   e.reason().c_str());
      return 1;
    }
    std::printf(
        "{\"width\": %d, \"height\": %d, \"format\": \"%s\", \"crop\": [%d, %d, %d, %d], "
        "\"fallback\": %s, \"flipped\": %s, \"scale\": [%d, %d], \"decoded\": [%d, %d]}\n",
        rec.info.width, rec.info.height,
        rec.info.format == obsaug::ImageFormat::kJpeg ? "jpeg" : "png", rec.crop.top, rec.crop.left,
        rec.crop.height, rec.crop.width, rec.crop.fallback ? "true" : "false",
        rec.flipped ? "true" : "false", rec.scale_num, rec.scale_denom, rec.decoded_width,
        rec.decoded_height);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "obsaug_decode_tool: %s\n", e.what());
    return 1;
  }
}

// ImageDecoder's JPEG path: TurboJPEG 2.x (tjDecompressHeader3 /
// tjDecompress2), with DCT-domain scaling and strict error handling.
#include <turbojpeg.h>

#include <string>

#include "engine/decode/decode.h"
#include "engine/decode/pixel_convert.h"

namespace obsaug {

namespace {

bool is_scaling_factor(int num, int denom) {
  int count = 0;
  const tjscalingfactor* factors = tjGetScalingFactors(&count);
  for (int i = 0; factors && i < count; ++i) {
    if (factors[i].num == num && factors[i].denom == denom) return true;
  }
  return false;
}

}  // namespace

void choose_jpeg_scale(int width, int height, const CropBox& crop, int out_width, int out_height,
                       int* scale_num, int* scale_denom) {
  *scale_num = 1;
  *scale_denom = 1;
  int count = 0;
  const tjscalingfactor* factors = tjGetScalingFactors(&count);
  double best = 1.0;
  for (int i = 0; factors && i < count; ++i) {
    const tjscalingfactor f = factors[i];
    const double value = static_cast<double>(f.num) / f.denom;
    if (value >= best) continue;
    if (crop.width * value >= out_width && crop.height * value >= out_height) {
      best = value;
      *scale_num = f.num;
      *scale_denom = f.denom;
    }
  }
}

PixelImage ImageDecoder::decode_jpeg(const uint8_t* data, size_t size, const std::string& name,
                                     int channels, int scale_num, int scale_denom) {
  if (!tj_) {
    tj_ = tjInitDecompress();
    if (!tj_) throw DecodeError(name + ": cannot create a TurboJPEG decompressor");
  }
  tjhandle tj = static_cast<tjhandle>(tj_);
  int width = 0, height = 0, subsamp = 0, colorspace = 0;
  if (tjDecompressHeader3(tj, data, static_cast<unsigned long>(size), &width, &height, &subsamp,
                          &colorspace) != 0) {
    throw DecodeError(name + ": bad JPEG header (" + tjGetErrorStr2(tj) + ")");
  }
  if (width <= 0 || height <= 0 ||
      static_cast<uint64_t>(width) * static_cast<uint64_t>(height) > limits_.max_pixels) {
    throw DecodeError(name + ": JPEG of " + std::to_string(width) + " x " + std::to_string(height) +
                      " pixels exceeds the limit of " + std::to_string(limits_.max_pixels) +
                      " (decompression bomb?)");
  }
  if (!is_scaling_factor(scale_num, scale_denom)) {
    throw DecodeError(name + ": " + std::to_string(scale_num) + "/" + std::to_string(scale_denom) +
                      " is not one of TurboJPEG's scaling factors");
  }
  const tjscalingfactor factor{scale_num, scale_denom};
  PixelImage img;
  img.width = TJSCALED(width, factor);
  img.height = TJSCALED(height, factor);
  img.channels = channels;
  const bool cmyk = colorspace == TJCS_CMYK || colorspace == TJCS_YCCK;
  const int pixel_format = cmyk ? TJPF_CMYK : channels == 1 ? TJPF_GRAY : TJPF_RGB;
  const size_t pixels = static_cast<size_t>(img.width) * img.height;
  img.pixels.resize(pixels * tjPixelSize[pixel_format]);
  // STOPONWARNING: a truncated or corrupt stream fails instead of being
  // padded; LIMITSCANS: a progressive JPEG with > 500 scans (a CPU bomb) fails.
  const int flags = TJFLAG_STOPONWARNING | TJFLAG_LIMITSCANS;
  if (tjDecompress2(tj, data, static_cast<unsigned long>(size), img.pixels.data(), img.width, 0,
                    img.height, pixel_format, flags) != 0) {
    throw DecodeError(name + ": corrupt or truncated JPEG (" + tjGetErrorStr2(tj) + ")");
  }
  if (cmyk) {
    detail::cmyk_to_rgb_or_gray(img.pixels.data(), img.pixels.data(), pixels, channels);
    img.pixels.resize(pixels * channels);
  }
  return img;
}

ImageDecoder::~ImageDecoder() {
  if (tj_) tjDestroy(static_cast<tjhandle>(tj_));
}

}  // namespace obsaug

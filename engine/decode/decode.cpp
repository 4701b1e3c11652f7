// The decode pipeline (header probe, RandomResizedCrop, DCT scale choice,
// resize, flip, CHW write-out); the codecs live in jpeg_decode.cpp and
// png_decode.cpp, the resampler in resize.cpp.
#include "engine/decode/decode.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "kernels/philox.h"

namespace obsaug {

namespace {

constexpr uint8_t kPngSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
constexpr int kCropAttempts = 10;

uint32_t be16(const uint8_t* p) { return (uint32_t{p[0]} << 8) | p[1]; }
uint32_t be32(const uint8_t* p) { return (be16(p) << 16) | be16(p + 2); }

bool is_sof_marker(uint8_t m) {
  // SOF0..SOF15 except DHT (C4), JPG (C8) and DAC (CC).
  return m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC;
}

ImageInfo probe_jpeg(const uint8_t* data, size_t size, const std::string& name) {
  size_t pos = 2;
  while (true) {
    while (pos < size && data[pos] == 0xFF) ++pos;  // the marker prefix and fill bytes
    if (pos >= size || data[pos - 1] != 0xFF) {
      throw DecodeError(name +
                        ": JPEG ends or breaks before its frame header (truncated or corrupt)");
    }
    const uint8_t marker = data[pos++];
    if (marker == 0x01 || marker == 0xD8 || (marker >= 0xD0 && marker <= 0xD7)) continue;
    if (marker == 0xD9 || marker == 0xDA) {
      throw DecodeError(name + ": JPEG has no frame header before its scan data");
    }
    if (size - pos < 2) throw DecodeError(name + ": truncated JPEG marker segment");
    const uint32_t length = be16(data + pos);
    if (length < 2 || length > size - pos) {
      throw DecodeError(name + ": JPEG marker segment of " + std::to_string(length) +
                        " bytes runs past the end of the data (truncated or corrupt)");
    }
    if (is_sof_marker(marker)) {
      if (length < 8) throw DecodeError(name + ": JPEG frame header too short");
      ImageInfo info;
      info.format = ImageFormat::kJpeg;
      info.height = static_cast<int>(be16(data + pos + 3));
      info.width = static_cast<int>(be16(data + pos + 5));
      if (info.width == 0 || info.height == 0) {
        throw DecodeError(name + ": JPEG frame header gives a zero size");
      }
      return info;
    }
    pos += length;
  }
}

}  // namespace

ImageInfo probe_image(const uint8_t* data, size_t size, const std::string& name) {
  if (size == 0) throw DecodeError(name + ": empty file (0 bytes)");
  if (size >= 2 && data[0] == 0xFF && data[1] == 0xD8) return probe_jpeg(data, size, name);
  if (size >= 8 && std::memcmp(data, kPngSignature, 8) == 0) {
    if (size < 24 || be32(data + 8) != 13 || std::memcmp(data + 12, "IHDR", 4) != 0) {
      throw DecodeError(name + ": PNG without a valid IHDR chunk (truncated or corrupt)");
    }
    ImageInfo info;
    info.format = ImageFormat::kPng;
    const uint32_t w = be32(data + 16), h = be32(data + 20);
    if (w == 0 || h == 0 || w > 0x7fffffffu || h > 0x7fffffffu) {
      throw DecodeError(name + ": PNG header gives an invalid size " + std::to_string(w) + " x " +
                        std::to_string(h));
    }
    info.width = static_cast<int>(w);
    info.height = static_cast<int>(h);
    return info;
  }
  throw DecodeError(name + ": not a JPEG or PNG (unrecognised first bytes, " +
                    std::to_string(size) + " bytes)");
}

CropBox random_resized_crop_box(int width, int height, const AugmentSpec& spec, uint64_t seed,
                                uint64_t serial) {
  const double area = static_cast<double>(width) * height;
  const double log_lo = std::log(spec.ratio_min), log_hi = std::log(spec.ratio_max);
  for (int attempt = 0; attempt < kCropAttempts; ++attempt) {
    const Philox4 r = draw_block(seed, serial, static_cast<uint32_t>(attempt), kDecodeOpIndex, 0);
    const double target_area = area * (spec.scale_min + static_cast<double>(unit(r.v[0])) *
                                                            (spec.scale_max - spec.scale_min));
    const double aspect = std::exp(log_lo + static_cast<double>(unit(r.v[1])) * (log_hi - log_lo));
    // Python's round(): half to even, which nearbyint does in the default mode.
    const double w = std::nearbyint(std::sqrt(target_area * aspect));
    const double h = std::nearbyint(std::sqrt(target_area / aspect));
    if (w > 0 && w <= width && h > 0 && h <= height) {
      CropBox box;
      box.width = static_cast<int>(w);
      box.height = static_cast<int>(h);
      box.top = static_cast<int>(below(r.v[2], static_cast<uint32_t>(height - box.height + 1)));
      box.left = static_cast<int>(below(r.v[3], static_cast<uint32_t>(width - box.width + 1)));
      return box;
    }
  }
  // torchvision's fallback: the largest centred box whose aspect is in range.
  CropBox box;
  box.fallback = true;
  const double in_ratio = static_cast<double>(width) / height;
  if (in_ratio < spec.ratio_min) {
    box.width = width;
    box.height = static_cast<int>(std::nearbyint(width / spec.ratio_min));
  } else if (in_ratio > spec.ratio_max) {
    box.height = height;
    box.width = static_cast<int>(std::nearbyint(height * spec.ratio_max));
  } else {
    box.width = width;
    box.height = height;
  }
  box.width = std::clamp(box.width, 1, width);
  box.height = std::clamp(box.height, 1, height);
  box.top = (height - box.height) / 2;
  box.left = (width - box.width) / 2;
  return box;
}

bool draw_flip(const AugmentSpec& spec, uint64_t seed, uint64_t serial) {
  const Philox4 r = draw_block(seed, serial, kCropAttempts, kDecodeOpIndex, 0);
  return static_cast<double>(unit(r.v[0])) < spec.flip_p;
}

ImageDecoder::ImageDecoder(DecodeLimits limits) : limits_(limits) {}

PixelImage ImageDecoder::decode(const uint8_t* data, size_t size, const std::string& name,
                                int channels, int scale_num, int scale_denom) {
  if (channels != 1 && channels != 3) {
    throw std::invalid_argument("ImageDecoder::decode: channels must be 1 or 3, got " +
                                std::to_string(channels));
  }
  if (size > limits_.max_bytes) {
    throw DecodeError(name + ": " + std::to_string(size) + " bytes exceeds the limit of " +
                      std::to_string(limits_.max_bytes));
  }
  const ImageInfo info = probe_image(data, size, name);
  if (static_cast<uint64_t>(info.width) * static_cast<uint64_t>(info.height) > limits_.max_pixels) {
    throw DecodeError(name + ": image of " + std::to_string(info.width) + " x " +
                      std::to_string(info.height) + " pixels exceeds the limit of " +
                      std::to_string(limits_.max_pixels) + " (decompression bomb?)");
  }
  return info.format == ImageFormat::kJpeg
             ? decode_jpeg(data, size, name, channels, scale_num, scale_denom)
             : decode_png(data, size, name, channels);
}

void ImageDecoder::decode_augmented(const uint8_t* data, size_t size, const std::string& name,
                                    const AugmentSpec& spec, uint64_t seed, uint64_t serial,
                                    uint8_t* out_chw, AugmentRecord* record) {
  if (spec.out_height <= 0 || spec.out_width <= 0 || (spec.channels != 1 && spec.channels != 3) ||
      !(spec.scale_min > 0 && spec.scale_min <= spec.scale_max) ||
      !(spec.ratio_min > 0 && spec.ratio_min <= spec.ratio_max)) {
    throw std::invalid_argument(
        "AugmentSpec needs out_height, out_width > 0, channels 1 or 3, 0 < scale_min <= scale_max "
        "and 0 < ratio_min <= ratio_max; got " +
        std::to_string(spec.out_height) + "x" + std::to_string(spec.out_width) + "x" +
        std::to_string(spec.channels));
  }
  if (size > limits_.max_bytes) {
    throw DecodeError(name + ": " + std::to_string(size) + " bytes exceeds the limit of " +
                      std::to_string(limits_.max_bytes));
  }
  const ImageInfo info = probe_image(data, size, name);
  const CropBox crop = spec.random_crop
                           ? random_resized_crop_box(info.width, info.height, spec, seed, serial)
                           : CropBox{0, 0, info.height, info.width, false};
  const bool flipped = spec.random_crop && draw_flip(spec, seed, serial);
  int num = 1, denom = 1;
  if (info.format == ImageFormat::kJpeg && spec.dct_scaling) {
    choose_jpeg_scale(info.width, info.height, crop, spec.out_width, spec.out_height, &num, &denom);
  }
  const PixelImage img = decode(data, size, name, spec.channels, num, denom);

  // The crop in decoded pixels, and the whole-pixel window around it that
  // plays the part of torchvision's cropped PIL image (taps never reach past
  // it). At scale 1/1 the box is the window itself.
  // Decoded pixel i covers stored pixels [i, i + 1) * denom / num exactly
  // (the last one may be partial: TJSCALED rounds up).
  const double sx = static_cast<double>(num) / denom, sy = sx;
  const double x0 = crop.left * sx, x1 = (crop.left + crop.width) * sx;
  const double y0 = crop.top * sy, y1 = (crop.top + crop.height) * sy;
  const int wx0 = std::max(0, static_cast<int>(std::floor(x0)));
  const int wy0 = std::max(0, static_cast<int>(std::floor(y0)));
  const int wx1 = std::min(img.width, static_cast<int>(std::ceil(x1)));
  const int wy1 = std::min(img.height, static_cast<int>(std::ceil(y1)));
  const size_t stride = static_cast<size_t>(img.width) * img.channels;
  ImageView window;
  window.data = img.pixels.data() + wy0 * stride + static_cast<size_t>(wx0) * img.channels;
  window.width = wx1 - wx0;
  window.height = wy1 - wy0;
  window.channels = img.channels;
  window.row_stride = stride;
  const int c = spec.channels, hp = spec.out_height, wp = spec.out_width;
  resized_.resize(static_cast<size_t>(hp) * wp * c);
  resize_antialiased(
      window, x0 - wx0, y0 - wy0, std::min(x1 - wx0, static_cast<double>(window.width)),
      std::min(y1 - wy0, static_cast<double>(window.height)), resized_.data(), wp, hp);

  // HWC -> CHW, mirrored when flipped.
  for (int y = 0; y < hp; ++y) {
    const uint8_t* row = resized_.data() + static_cast<size_t>(y) * wp * c;
    for (int x = 0; x < wp; ++x) {
      const int sx_out = flipped ? wp - 1 - x : x;
      for (int ch = 0; ch < c; ++ch) {
        out_chw[(static_cast<size_t>(ch) * hp + y) * wp + x] = row[sx_out * c + ch];
      }
    }
  }
  if (record) {
    record->info = info;
    record->crop = crop;
    record->flipped = flipped;
    record->scale_num = num;
    record->scale_denom = denom;
    record->decoded_width = img.width;
    record->decoded_height = img.height;
  }
}

}  // namespace obsaug

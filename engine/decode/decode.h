// Decoding of distractor photographs (DESIGN.md section 4): JPEG through
// TurboJPEG with DCT-domain down-scaling, PNG through libpng, then
// torchvision's RandomResizedCrop, a horizontal flip, an antialiased resize to
// the pool's Hp x Wp and, for C = 1, ITU-R 601 grayscale. The output is one
// uint8 CHW image, ready to be copied into a pool slot.
//
// Colour handling (the same as PIL's `Image.open(f).convert("RGB")`, which
// the research code this replaces uses):
//   - grayscale (any bit depth) is replicated to R = G = B;
//   - palette images are expanded through their palette;
//   - 16-bit samples keep their high byte (PIL clips 16-bit gray at 255);
//   - alpha (including palette/colour-key transparency) is dropped, not
//     composited: a transparent pixel shows its stored colour;
//   - CMYK / YCCK JPEGs (stored inverted, the Adobe convention libjpeg-turbo
//     also writes) become R = C*K/255, G = M*K/255, B = Y*K/255.
//   - gAMA / ICC profiles and EXIF orientation are ignored (as PIL's
//     open + convert and torchvision's loaders do).
// Grayscale output: L = (19595 R + 38470 G + 7471 B + 32768) >> 16, PIL's
// integer form of 0.299 R + 0.587 G + 0.114 B; a YCbCr JPEG is decoded
// straight to its luma plane instead (the same weights, applied by the
// encoder), which skips the colour conversion.
//
// Randomness: everything an image's augmentation draws comes from Philox
// (kernels/philox.h) under key = seed with step = the image's serial number
// and op index kDecodeOpIndex, so the result is a pure function of (bytes,
// seed, serial, spec) whichever thread decodes it:
//   attempt a = 0..9 of RandomResizedCrop: block (serial, sample = a):
//     r0 -> area fraction  scale_min + unit(r0) * (scale_max - scale_min),
//     r1 -> log aspect     log(ratio_min) + unit(r1) * (log ratio_max - log ratio_min),
//     r2 -> top  below(r2, H - h + 1),  r3 -> left  below(r3, W - w + 1);
//   flip: block (serial, sample = 10): r0, flipped when unit(r0) < flip_p.
//
// Failures (zero-byte, truncated, non-image, corrupt, too large) throw
// DecodeError with the image's name; nothing is ever read out of bounds.
// TurboJPEG warnings (e.g. "premature end of data") count as failures, so a
// truncated JPEG is rejected rather than padded with grey.
//
// Threads: an ImageDecoder owns a TurboJPEG handle and scratch buffers; use
// one per thread. The free functions are pure and thread-safe.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace obsaug {

class DecodeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class ImageFormat { kJpeg, kPng };

// The Philox op index of the decoder's draws (kept apart from the augment
// pipeline's op indices 0, 1, 2, ...).
constexpr uint32_t kDecodeOpIndex = 0xDEC0;

struct DecodeLimits {
  uint64_t max_pixels = 64ull << 20;  // width * height of the stored image (64 Mpx)
  uint64_t max_bytes = 256ull << 20;  // encoded file size
};

// What the header says, read without decoding pixels.
struct ImageInfo {
  ImageFormat format = ImageFormat::kJpeg;
  int width = 0;
  int height = 0;
};

// 8-bit interleaved pixels, `channels` (1 or 3) per pixel, rows contiguous.
struct PixelImage {
  int width = 0;
  int height = 0;
  int channels = 3;
  std::vector<uint8_t> pixels;  // height * width * channels
};

// A crop box in the stored image's pixels: torchvision's (i, j, h, w) as
// (top, left, height, width).
struct CropBox {
  int top = 0;
  int left = 0;
  int height = 0;
  int width = 0;
  bool fallback = false;  // true when all ten attempts failed (centre crop)
};

struct AugmentSpec {
  int out_height = 0;  // Hp
  int out_width = 0;   // Wp
  int channels = 3;    // C: 3 (RGB) or 1 (grayscale)
  double scale_min = 0.08, scale_max = 1.0;
  double ratio_min = 3.0 / 4.0, ratio_max = 4.0 / 3.0;
  double flip_p = 0.5;
  bool random_crop = true;  // false: the whole image, no flip (a plain resize)
  bool dct_scaling = true;  // false: always decode at full size
};

// What decode_augmented did, for tests, benchmarks and statistics.
struct AugmentRecord {
  ImageInfo info;
  CropBox crop;  // in the stored image's pixels
  bool flipped = false;
  int scale_num = 1;  // the TurboJPEG scaling factor used (1/1 for PNG)
  int scale_denom = 1;
  int decoded_width = 0;  // size of the (possibly scaled) decoded image
  int decoded_height = 0;
};

// torchvision.transforms.RandomResizedCrop.get_params on a width x height
// image with the Philox draws described above.
CropBox random_resized_crop_box(int width, int height, const AugmentSpec& spec, uint64_t seed,
                                uint64_t serial);
bool draw_flip(const AugmentSpec& spec, uint64_t seed, uint64_t serial);

// Read-only interleaved 8-bit pixels, `channels` per pixel, rows
// `row_stride` bytes apart (a whole image or a window into one).
struct ImageView {
  const uint8_t* data = nullptr;
  int width = 0;
  int height = 0;
  int channels = 3;
  size_t row_stride = 0;
};

// Pillow's antialiased BILINEAR resize (Image.resize(size, BILINEAR, box)):
// a triangle filter whose support grows with the down-scale factor,
// fixed-point weights of 22 bits, horizontal pass then vertical, each
// rounded to uint8; taps are clamped to `src`. The box (x0, y0)-(x1, y1) is
// in `src` pixels and may be fractional (Pillow rounds it to float). `dst`
// receives out_height x out_width pixels of src.channels, contiguous.
void resize_antialiased(const ImageView& src, double x0, double y0, double x1, double y1,
                        uint8_t* dst, int out_width, int out_height);

// The format from the magic bytes (not the file name) and the size from the
// header. Throws DecodeError for anything that is not a JPEG or PNG.
ImageInfo probe_image(const uint8_t* data, size_t size, const std::string& name);

class ImageDecoder {
 public:
  explicit ImageDecoder(DecodeLimits limits = {});
  ~ImageDecoder();
  ImageDecoder(const ImageDecoder&) = delete;
  ImageDecoder& operator=(const ImageDecoder&) = delete;

  // The whole image as RGB (channels = 3) or luma (channels = 1). A JPEG may
  // be decoded at scale_num / scale_denom (one of tjGetScalingFactors'
  // factors, else DecodeError); PNG ignores the scale.
  PixelImage decode(const uint8_t* data, size_t size, const std::string& name, int channels = 3,
                    int scale_num = 1, int scale_denom = 1);

  // The whole pipeline into `out_chw` (spec.channels x out_height x
  // out_width uint8). `record`, when given, receives what was done.
  void decode_augmented(const uint8_t* data, size_t size, const std::string& name,
                        const AugmentSpec& spec, uint64_t seed, uint64_t serial, uint8_t* out_chw,
                        AugmentRecord* record = nullptr);

  const DecodeLimits& limits() const { return limits_; }

 private:
  PixelImage decode_jpeg(const uint8_t* data, size_t size, const std::string& name, int channels,
                         int scale_num, int scale_denom);
  PixelImage decode_png(const uint8_t* data, size_t size, const std::string& name, int channels);

  DecodeLimits limits_;
  void* tj_ = nullptr;            // tjhandle, created on first JPEG
  std::vector<uint8_t> resized_;  // scratch: out_height * out_width * channels
};

// The smallest TurboJPEG scaling factor (num / denom <= 1) at which the crop
// box still spans at least out_width x out_height decoded pixels; 1/1 when
// none does (the crop is being enlarged).
void choose_jpeg_scale(int width, int height, const CropBox& crop, int out_width, int out_height,
                       int* scale_num, int* scale_denom);

}  // namespace obsaug

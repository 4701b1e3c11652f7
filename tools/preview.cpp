// obsaug preview: augments B synthetic scenes (tools/synthetic_scene.h) and
// writes a PNG grid: one row per sample, its S original frames, a gap, then
// its S augmented frames, each magnified by nearest neighbour.
#include <ATen/ATen.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <string>

#include "engine/config.h"
#include "engine/engine.h"
#include "tools/args.h"
#include "tools/commands.h"
#include "tools/png_writer.h"
#include "tools/synthetic_scene.h"

namespace obsaug::cli {
namespace {

constexpr int64_t kGap = 2;       // pixels between frames and between rows
constexpr int64_t kGroupGap = 8;  // between the original and the augmented frames
constexpr int64_t kMaxPngSide = 1000000;  // libpng's default user limit
constexpr int64_t kMaxGridBytes = int64_t{1} << 30;

// Augmented output back to uint8 0..255 on the CPU (undoing float32 scale/bias).
at::Tensor to_display(const at::Tensor& out, const OutputConfig& output) {
  at::Tensor cpu = out.cpu();
  if (cpu.scalar_type() == at::kByte) return cpu.contiguous();
  at::Tensor v = cpu.to(at::kDouble);
  if (output.scale != 0) v = (v - output.bias) / output.scale;
  return v.round().clamp(0, 255).to(at::kByte).contiguous();
}

// Pastes `frame` [C, H, W] uint8 contiguous CPU (C = 3: RGB, else channel 0
// as gray) at (left, top), magnified `scale` times.
void paste(RgbImage& image, const at::Tensor& frame, int64_t left, int64_t top, int64_t scale) {
  const int64_t C = frame.size(0), H = frame.size(1), W = frame.size(2);
  const uint8_t* p = frame.data_ptr<uint8_t>();
  for (int64_t y = 0; y < H * scale; ++y) {
    for (int64_t x = 0; x < W * scale; ++x) {
      const int64_t src = (y / scale) * W + x / scale;
      uint8_t* dst = image.pixel(left + x, top + y);
      for (int k = 0; k < 3; ++k) dst[k] = p[(C == 3 ? k : 0) * H * W + src];
    }
  }
}

}  // namespace

int preview_command(int argc, char** argv) {
  Args args =
      parse_args("preview", argc, argv, 2, {"config", "out", "batch", "seed-step", "scale"}, {});
  if (args.has("help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const std::string path = config_file("preview", args);
  const std::string out_path = args.get("out");
  if (out_path.empty()) throw UsageError("preview: --out GRID.png is required");
  const int64_t batch = args.get_int("batch", 8, 1, 4096);
  const uint64_t step = args.get_uint64("seed-step", 0);
  const int64_t scale = args.get_int("scale", 2, 1, 64);

  Config config = load_config_file(path, checkout_root());
  const FramesConfig& f = config.frames;
  // The grid's size, checked before anything is built (frame sides are at
  // most 2^20, so none of this overflows).
  const auto [out_h, out_w] = frame_size_after(config);
  const int64_t oh = f.height * scale, ow = f.width * scale;
  const int64_t ah = out_h * scale, aw = out_w * scale;
  const int64_t S = f.stack, C = f.channels;
  const int64_t row_h = std::max(oh, ah);
  const int64_t augmented_left = S * ow + (S - 1) * kGap + kGroupGap;
  const int64_t width = augmented_left + S * aw + (S - 1) * kGap;
  const int64_t height = batch * row_h + (batch - 1) * kGap;
  if (width > kMaxPngSide || height > kMaxPngSide || width * height * 3 > kMaxGridBytes) {
    throw UsageError("preview: the grid would be " + std::to_string(width) + "x" +
                     std::to_string(height) + " pixels, beyond " + std::to_string(kMaxPngSide) +
                     " a side or 1 GiB; lower --batch (" + std::to_string(batch) +
                     ") or --scale (" + std::to_string(scale) + ")");
  }

  Engine engine(config);
  at::Tensor original = synthetic_observations(batch, f);
  at::Tensor augmented =
      to_display(engine.augment(original.to(config.device), step), config.output);
  engine.close();
  RgbImage grid(width, height, 255);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t top = b * (row_h + kGap);
    for (int64_t s = 0; s < S; ++s) {
      paste(grid, original[b].narrow(0, s * C, C).contiguous(), s * (ow + kGap), top, scale);
      paste(grid, augmented[b].narrow(0, s * C, C).contiguous(), augmented_left + s * (aw + kGap),
            top, scale);
    }
  }
  write_png(grid, out_path);
  std::printf("wrote %s: %" PRId64 "x%" PRId64 " pixels; %" PRId64 " rows (samples, step %" PRIu64
              "), each %" PRId64 " original %" PRId64 "x%" PRId64 " frames | %" PRId64
              " augmented %" PRId64 "x%" PRId64 " frames, magnified %" PRId64 "x\n",
              out_path.c_str(), width, height, batch, step, S, f.height, f.width, S,
              augmented.size(2), augmented.size(3), scale);
  return 0;
}

}  // namespace obsaug::cli

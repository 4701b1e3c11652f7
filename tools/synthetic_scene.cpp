// The cart-pole-like scene of `obsaug preview` (tools/synthetic_scene.h).
#include "tools/synthetic_scene.h"

#include <ATen/ops/empty.h>

#include <algorithm>
#include <cmath>

namespace obsaug::cli {
namespace {

struct Rgb {
  double r, g, b;
};

uint64_t mix(uint64_t x) {  // splitmix64 finaliser: per-sample scene variety
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
double unit(uint64_t& state) { return (mix(state++) >> 11) * (1.0 / 9007199254740992.0); }

double segment_distance(double px, double py, double ax, double ay, double bx, double by) {
  double dx = bx - ax, dy = by - ay;
  double t = std::clamp(((px - ax) * dx + (py - ay) * dy) / (dx * dx + dy * dy + 1e-12), 0.0, 1.0);
  double ex = px - (ax + t * dx), ey = py - (ay + t * dy);
  return std::sqrt(ex * ex + ey * ey);
}

}  // namespace

at::Tensor synthetic_observations(int64_t batch, const FramesConfig& f) {
  at::Tensor obs = at::empty({batch, f.stack * f.channels, f.height, f.width}, at::kByte);
  uint8_t* data = obs.data_ptr<uint8_t>();
  const int64_t H = f.height, W = f.width, plane = H * W;
  for (int64_t b = 0; b < batch; ++b) {
    uint64_t rng = 1000 * static_cast<uint64_t>(b) + 17;
    const Rgb sky_top{60 + 60 * unit(rng), 110 + 60 * unit(rng), 190 + 50 * unit(rng)};
    const Rgb sky_low{200 + 40 * unit(rng), 215 + 30 * unit(rng), 230 + 20 * unit(rng)};
    const Rgb tile_a{40 + 40 * unit(rng), 70 + 50 * unit(rng), 90 + 50 * unit(rng)};
    const Rgb tile_b{tile_a.r + 50, tile_a.g + 50, tile_a.b + 50};
    const Rgb cart{180 + 70 * unit(rng), 60 + 120 * unit(rng), 30 + 60 * unit(rng)};
    const Rgb pole{230, 200 + 40 * unit(rng), 120 + 60 * unit(rng)};
    const double horizon = H * (0.6 + 0.1 * unit(rng));
    const double cart_x0 = W * (0.25 + 0.3 * unit(rng));
    const double speed = W * (0.04 + 0.04 * unit(rng));
    const double angle0 = -0.6 + 1.2 * unit(rng);
    const double swing = 0.15 + 0.2 * unit(rng);
    const double cell = std::max<double>(4.0, W / 8.0);
    for (int64_t s = 0; s < f.stack; ++s) {
      const double cx = cart_x0 + speed * s, cy = horizon - 0.02 * H;
      const double cw = 0.22 * W, ch = 0.1 * H;
      const double angle = angle0 + swing * s;
      const double len = 0.4 * H;
      const double tip_x = cx + len * std::sin(angle), tip_y = cy - ch / 2 - len * std::cos(angle);
      for (int64_t y = 0; y < H; ++y) {
        for (int64_t x = 0; x < W; ++x) {
          const double px = x + 0.5, py = y + 0.5;
          Rgb c;
          if (py < horizon) {
            double t = py / horizon;
            c = {sky_top.r + t * (sky_low.r - sky_top.r), sky_top.g + t * (sky_low.g - sky_top.g),
                 sky_top.b + t * (sky_low.b - sky_top.b)};
          } else {
            bool odd = (static_cast<int64_t>(px / cell) +
                        static_cast<int64_t>((py - horizon) / cell * 2)) &
                       1;
            c = odd ? tile_a : tile_b;
          }
          if (std::fabs(px - cx) < cw / 2 && std::fabs(py - cy) < ch / 2) c = cart;
          double d = segment_distance(px, py, cx, cy - ch / 2, tip_x, tip_y);
          if (d < std::max(1.2, 0.025 * W)) c = pole;
          if (std::hypot(px - tip_x, py - tip_y) < std::max(2.0, 0.05 * W)) c = {240, 80, 60};
          auto u8 = [](double v) { return static_cast<uint8_t>(std::clamp(v, 0.0, 255.0) + 0.5); };
          uint8_t* sample = data + b * f.stack * f.channels * plane;
          if (f.channels == 3) {
            sample[(s * 3 + 0) * plane + y * W + x] = u8(c.r);
            sample[(s * 3 + 1) * plane + y * W + x] = u8(c.g);
            sample[(s * 3 + 2) * plane + y * W + x] = u8(c.b);
          } else {
            uint8_t gray = u8(0.299 * c.r + 0.587 * c.g + 0.114 * c.b);
            for (int64_t ch_i = 0; ch_i < f.channels; ++ch_i)
              sample[(s * f.channels + ch_i) * plane + y * W + x] = gray;
          }
        }
      }
    }
  }
  return obs;
}

}  // namespace obsaug::cli

// Synthetic observations for `obsaug preview`: a DMControl cart-pole-like
// render (sky gradient, checkered floor, a cart moving right and a swinging
// pole), one step of motion per stacked frame, colours varied per sample.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "engine/config.h"

namespace obsaug::cli {

// [batch, S*C, H, W] uint8 on the CPU for frames `f` (C = 3: RGB; any other
// C: the luma of the render in every channel). A pure function of its
// arguments.
at::Tensor synthetic_observations(int64_t batch, const FramesConfig& f);

}  // namespace obsaug::cli

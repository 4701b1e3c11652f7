// How the distractor pool is refreshed; shared by the configuration
// (engine/config.h) and the pool (engine/pool/distractor_pool.h), so that code
// which sees both (the Engine) has one type.
#pragma once

namespace obsaug {

// async: background decoder threads (fast, not reproducible).
// sync: a fixed number of images per augment call from a seeded file order
// (bit-reproducible).
enum class RefreshMode { kAsync, kSync };

// The smallest non-zero refresh rate cap (max_per_second; 0 means no cap):
// one image per 1000 s. Smaller caps are refused, not clamped: the interval
// between decodes would overflow the clock.
constexpr double kMinMaxPerSecond = 1e-3;

}  // namespace obsaug

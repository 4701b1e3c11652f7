// How the distractor pool is refreshed; shared by the configuration
// (engine/config.h) and the pool (engine/pool/distractor_pool.h), so that code
// which sees both (the Engine) has one type.
#pragma once

namespace obsaug {

// async: background decoder threads (fast, not reproducible).
// sync: a fixed number of images per augment call from a seeded file order
// (bit-reproducible).
enum class RefreshMode { kAsync, kSync };

}  // namespace obsaug

// Every check of what a ReplayBuffer takes in, made before anything is
// written: the options' values (the constructor's, and a checkpoint
// header's), the arguments of add and add_first, and the arrays a
// checkpoint brings (its actions and priorities, beyond what its checksums
// vouch for: values no call could have stored). Internal to replay/.
// Errors: std::invalid_argument (ValueError) "ReplayBuffer.WHERE: ...",
// c10::TypeError for a wrong dtype; a checkpoint's through
// CheckpointReader::corrupt (std::invalid_argument naming the file).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "replay/checkpoint_io.h"
#include "replay/replay_buffer.h"

namespace obsaug {

[[noreturn]] void replay_bad(const std::string& where, const std::string& what);
// A wrong dtype: c10::TypeError (TypeError in Python), where replay_bad is a ValueError.
[[noreturn]] void replay_bad_type(const std::string& where, const std::string& what);

// The options' values, but the device and whether the machine holds the
// buffer: std::invalid_argument(where + what), `what` naming the option and
// its range ("gamma must be in [0, 1], got nan").
void check_option_values(const ReplayOptions& o, const std::string& where);

// add / add_first arguments (`where`: "add", "add_first"), each as stored.
// Frames [C, H, W] or [N, C, H, W] as [N, C, H, W], and N.
at::Tensor checked_frames(const ReplayOptions& o, const at::Tensor& frames, const char* where,
                          int64_t* n);
// The env ids: as given (an empty list included, which names no env), or
// 0..N-1 when not given; distinct, in [0, 2^20).
std::vector<int64_t> checked_env_ids(const std::optional<std::vector<int64_t>>& envs, int64_t n,
                                     bool single, const char* where);
// A per-env value as a host tensor [N] of `dtype`: given as [N], or as a
// scalar when `scalar_for_all` (one value for every env).
at::Tensor checked_per_env(const at::Tensor& v, int64_t n, at::ScalarType dtype, const char* name,
                           bool scalar_for_all, const char* where);
// Actions [*action_shape] or [N, *action_shape] as contiguous host rows
// [N, *action_shape] of action_dtype; float ones finite in that dtype.
at::Tensor checked_actions(const ReplayOptions& o, const at::Tensor& action, int64_t n, bool single,
                           const char* where);

// The first element of a float tensor (contiguous, host) that is NaN or
// infinite, or -1.
int64_t first_non_finite(const at::Tensor& a);

// A loaded checkpoint's arrays. Actions [capacity, *action_shape]: the
// first `stored` rows of a float dtype finite. Priorities (weights
// q = p^alpha) each in [0, largest_weight], and max_priority positive with
// max_priority^alpha at most largest_weight: values update_priorities could
// have set.
void check_loaded_actions(const CheckpointReader& r, const at::Tensor& actions, int64_t stored);
void check_loaded_priorities(const CheckpointReader& r, const std::vector<double>& weights,
                             double max_priority, double alpha, double largest_weight);

}  // namespace obsaug

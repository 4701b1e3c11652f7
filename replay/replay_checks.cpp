// The checks of what a ReplayBuffer takes in (replay/replay_checks.h).
#include "replay/replay_checks.h"

#include <ATen/Dispatch.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Exception.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <unordered_set>

#include "kernels/tensor_text.h"

namespace obsaug {
namespace {

double largest_finite(at::ScalarType t) {
  switch (t) {
    case at::kHalf:
      return static_cast<double>(std::numeric_limits<at::Half>::max());
    case at::kBFloat16:
      return static_cast<double>(std::numeric_limits<at::BFloat16>::max());
    case at::kFloat:
      return static_cast<double>(std::numeric_limits<float>::max());
    default:
      return std::numeric_limits<double>::max();
  }
}

// Float actions, converted to action_dtype (`a`), must be finite: a NaN or
// infinite action, or a finite one beyond the dtype's range (1e5 into
// float16, which would turn into inf), is a ValueError naming it.
void check_finite_actions(const ReplayOptions& o, const at::Tensor& a, const at::Tensor& given,
                          const char* where) {
  const int64_t bad_at = first_non_finite(a);
  if (bad_at < 0) return;
  const double value = given.to(at::kCPU).reshape(-1)[bad_at].item<double>();
  std::ostringstream what;
  what << "action must be finite, got " << value << " at element " << bad_at;
  if (std::isfinite(value)) {
    what << ", beyond the range of action_dtype " << dtype_name(o.action_dtype) << " (+-"
         << largest_finite(o.action_dtype) << ")";
  } else if (std::isnan(value)) {
    what << " (a NaN action is a bug where the action was computed)";
  }
  replay_bad(where, what.str());
}

}  // namespace

void replay_bad(const std::string& where, const std::string& what) {
  throw std::invalid_argument("ReplayBuffer." + where + ": " + what);
}

void replay_bad_type(const std::string& where, const std::string& what) {
  TORCH_CHECK_TYPE(false, "ReplayBuffer." + where + ": " + what);
}

void check_option_values(const ReplayOptions& o, const std::string& where) {
  const auto fail = [&](const std::string& what) { throw std::invalid_argument(where + what); };
  if (o.capacity < 1) fail("capacity must be >= 1, got " + std::to_string(o.capacity));
  if (o.capacity > (int64_t{1} << 32)) {  // below(r0, size) draws from 32 bits
    fail(
        "capacity must be at most 2^32 = 4294967296 slots (the uniform draw is 32 "
        "bits), got " +
        std::to_string(o.capacity));
  }
  if (o.frame_shape.size() != 3 || o.frame_shape[0] < 1 || o.frame_shape[1] < 1 ||
      o.frame_shape[2] < 1) {
    fail("frame_shape must be (C, H, W) with positive sizes, got " + shape_text(o.frame_shape));
  }
  if (o.frame_stack < 1 || o.frame_stack > 64) {
    fail("frame_stack must be in [1, 64], got " + std::to_string(o.frame_stack));
  }
  if (o.n_step < 1 || o.n_step > 1000) {
    fail("n_step must be in [1, 1000], got " + std::to_string(o.n_step));
  }
  if (!(o.gamma >= 0.0 && o.gamma <= 1.0)) {
    fail("gamma must be in [0, 1], got " + std::to_string(o.gamma));
  }
  if (!(o.alpha >= 0.0 && std::isfinite(o.alpha))) {
    fail("alpha must be finite and >= 0, got " + std::to_string(o.alpha));
  }
  if (!(o.beta >= 0.0 && std::isfinite(o.beta))) {
    fail("beta must be finite and >= 0, got " + std::to_string(o.beta));
  }
  if (o.action_shape.size() > 8) fail("action_shape has more than 8 dimensions");
  for (int64_t d : o.action_shape) {
    if (d < 1) fail("action_shape sizes must be positive, got " + shape_text(o.action_shape));
  }
  if (std::find(std::begin(kActionDtypes), std::end(kActionDtypes), o.action_dtype) ==
      std::end(kActionDtypes)) {
    std::string known;
    for (at::ScalarType t : kActionDtypes) known += (known.empty() ? "" : ", ") + dtype_name(t);
    fail("action_dtype must be one of " + known + ", got " + dtype_name(o.action_dtype));
  }
  const bool huge_frame =
      o.frame_shape[0] > (1 << 16) || o.frame_shape[1] > (1 << 16) || o.frame_shape[2] > (1 << 16);
  if (huge_frame ||
      o.capacity > (int64_t{1} << 62) / (o.frame_shape[0] * o.frame_shape[1] * o.frame_shape[2])) {
    fail("capacity x frame_shape " + std::to_string(o.capacity) + " x " +
         shape_text(o.frame_shape) + " is too large to store");
  }
}

// Frames [C, H, W] or [N, C, H, W] as [N, C, H, W]; N and the env ids.
at::Tensor checked_frames(const ReplayOptions& o, const at::Tensor& frames_in, const char* where,
                          int64_t* n) {
  if (!frames_in.defined()) replay_bad(where, "frame must be a tensor, got None");
  if (!frames_in.device().is_cpu() && !frames_in.device().is_cuda()) {
    replay_bad(where, "frame must be on cpu or cuda, got " + describe(frames_in));
  }
  if (frames_in.layout() != at::kStrided) {
    std::ostringstream layout;
    layout << frames_in.layout();
    replay_bad_type(where, "frame must be a dense (strided) uint8 tensor, got a " + layout.str() +
                               " tensor; pass frame.to_dense()");
  }
  const bool single = frames_in.dim() == 3;
  const at::Tensor f = single ? frames_in.unsqueeze(0) : frames_in;
  std::vector<int64_t> expected{o.frame_shape};
  const std::string frame_must = "frame must be uint8 " + shape_text(expected) +
                                 " (one env) or [N, " + std::to_string(expected[0]) + ", " +
                                 std::to_string(expected[1]) + ", " + std::to_string(expected[2]) +
                                 "] (N envs), got " + describe(frames_in);
  if (f.scalar_type() != at::kByte) replay_bad_type(where, frame_must);
  if (f.dim() != 4 || std::vector<int64_t>(f.sizes().begin() + 1, f.sizes().end()) != expected) {
    replay_bad(where, frame_must);
  }
  *n = f.size(0);
  if (*n < 1) replay_bad(where, "frame holds no env (N = 0)");
  if (*n > o.capacity) {
    replay_bad(where, "a batch of " + std::to_string(*n) + " frames exceeds capacity " +
                          std::to_string(o.capacity));
  }
  return f;
}

// The env ids: as given (an empty list included, which names no env),
// or 0..N-1 when not given.
std::vector<int64_t> checked_env_ids(const std::optional<std::vector<int64_t>>& envs, int64_t n,
                                     bool single, const char* where) {
  std::vector<int64_t> ids;
  if (envs.has_value()) {
    ids = *envs;
  } else {
    for (int64_t i = 0; i < n; ++i) ids.push_back(i);
  }
  if (static_cast<int64_t>(ids.size()) != n) {
    replay_bad(where, "env names " + std::to_string(ids.size()) + " envs for " + std::to_string(n) +
                          (single ? " frame" : " frames"));
  }
  std::unordered_set<int64_t> seen;
  for (int64_t e : ids) {
    if (e < 0 || e >= EpisodeRing::kMaxEnvs) {
      replay_bad(where, "env ids must be in [0, 2^20), got " + std::to_string(e));
    }
    if (!seen.insert(e).second) replay_bad(where, "env " + std::to_string(e) + " appears twice");
  }
  return ids;
}

// A per-env value as a host tensor [N] of `dtype`: given as [N], or as a
// scalar when `scalar_for_all` (one value for every env).
at::Tensor checked_per_env(const at::Tensor& v, int64_t n, at::ScalarType dtype, const char* name,
                           bool scalar_for_all, const char* where) {
  if (!v.defined()) replay_bad(where, std::string(name) + " must be given");
  if (!v.device().is_cpu() && !v.device().is_cuda()) {
    replay_bad(where, std::string(name) + " must be on cpu or cuda, got " + describe(v));
  }
  if (!((v.dim() == 0 && scalar_for_all) || (v.dim() == 1 && v.size(0) == n))) {
    replay_bad(where, std::string(name) + " must be " + (scalar_for_all ? "a scalar or " : "") +
                          "[N] = [" + std::to_string(n) + "], one per env" +
                          (scalar_for_all ? "" : " (a batched add takes each env's own value)") +
                          ", got " + describe(v));
  }
  if (dtype == at::kBool && v.scalar_type() != at::kBool) {
    replay_bad_type(where, std::string(name) + " must be bool, got " + describe(v));
  }
  if (dtype != at::kBool && !(at::isFloatingType(v.scalar_type()) ||
                              at::isIntegralType(v.scalar_type(), /*includeBool=*/false))) {
    replay_bad_type(where, std::string(name) + " must be a number, got " + describe(v));
  }
  return v.to(at::kCPU).to(dtype).expand({n}).contiguous();
}

at::Tensor checked_actions(const ReplayOptions& o, const at::Tensor& action, int64_t n, bool single,
                           const char* where) {
  if (!action.defined()) replay_bad(where, "action must be given");
  if (!action.device().is_cpu() && !action.device().is_cuda()) {
    replay_bad(where, "action must be on cpu or cuda, got " + describe(action));
  }
  std::vector<int64_t> expected = o.action_shape;
  if (!single) expected.insert(expected.begin(), n);
  if (std::vector<int64_t>(action.sizes().begin(), action.sizes().end()) != expected) {
    replay_bad(where, "action must have shape " + shape_text(expected) + " (action_shape" +
                          (single ? "" : " with the N envs first") + "), got " + describe(action));
  }
  const bool want_float = at::isFloatingType(o.action_dtype);
  const at::ScalarType got = action.scalar_type();
  if (got == at::kBool || at::isComplexType(got) ||
      (!want_float && !at::isIntegralType(got, /*includeBool=*/false))) {
    replay_bad_type(where,
                    "action must be " + dtype_name(o.action_dtype) +
                        (want_float ? " (or another real dtype)" : " (or another integer dtype)") +
                        ", got " + describe(action));
  }
  std::vector<int64_t> rows{n};
  rows.insert(rows.end(), o.action_shape.begin(), o.action_shape.end());
  at::Tensor a = action.to(at::kCPU).to(o.action_dtype).reshape(rows).contiguous();
  if (!want_float && got != o.action_dtype &&
      !a.to(got).equal(action.to(at::kCPU).reshape(a.sizes()))) {
    replay_bad(where, "action values do not fit action_dtype " + dtype_name(o.action_dtype));
  }
  if (want_float) check_finite_actions(o, a, action, where);
  return a;
}

int64_t first_non_finite(const at::Tensor& a) {
  int64_t bad_at = -1;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, a.scalar_type(), "actions", [&] {
    const scalar_t* p = a.data_ptr<scalar_t>();
    for (int64_t i = 0; i < a.numel() && bad_at < 0; ++i) {
      if (!std::isfinite(static_cast<double>(p[i]))) bad_at = i;
    }
  });
  return bad_at;
}

void check_loaded_actions(const CheckpointReader& r, const at::Tensor& actions, int64_t stored) {
  if (!at::isFloatingType(actions.scalar_type()) || stored == 0) return;
  const at::Tensor rows = actions.narrow(0, 0, stored);
  const int64_t bad_at = first_non_finite(rows);
  if (bad_at < 0) return;
  const int64_t per_row = rows.numel() / stored;
  std::ostringstream what;
  what << "the action of slot " << bad_at / per_row << " holds "
       << rows.reshape(-1)[bad_at].item<double>() << " at element " << bad_at % per_row
       << " (a float action must be finite)";
  r.corrupt(what.str());
}

void check_loaded_priorities(const CheckpointReader& r, const std::vector<double>& weights,
                             double max_priority, double alpha, double largest_weight) {
  const auto settable = [&](double weight) {
    return std::isfinite(weight) && weight >= 0 && weight <= largest_weight;
  };
  if (!(max_priority > 0) || !settable(std::pow(max_priority, alpha))) {
    r.corrupt("max_priority " + std::to_string(max_priority) +
              " (it must be finite and positive, with p^alpha at most " +
              std::to_string(largest_weight) + ")");
  }
  for (size_t s = 0; s < weights.size(); ++s) {
    if (!settable(weights[s])) {
      r.corrupt("the priority weight of slot " + std::to_string(s) + " is " +
                std::to_string(weights[s]) + " (it must be finite, >= 0 and at most " +
                std::to_string(largest_weight) + ")");
    }
  }
}

}  // namespace obsaug

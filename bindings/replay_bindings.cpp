// obsaug._C.ReplayBuffer: the native side of obsaug.ReplayBuffer
// (python/obsaug/replay.py turns Python numbers and arrays into tensors).
// The GIL is released around adds, sampling (gather + augment kernels),
// priority updates and checkpoint I/O.
#include "bindings/replay_bindings.h"

#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>  // at::Tensor <-> torch.Tensor

#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "replay/replay_buffer.h"
#ifdef OBSAUG_WITH_ENGINE
#include "replay/engine_augment.h"
#endif

namespace py = pybind11;
using namespace pybind11::literals;  // "key"_a = value

namespace obsaug::python {
namespace {

py::dict batch_dict(const ReplayBatch& b) {
  py::dict d("obs"_a = b.obs, "action"_a = b.action, "reward"_a = b.reward,
             "discount"_a = b.discount, "next_obs"_a = b.next_obs, "indices"_a = b.indices);
  if (b.weights.defined()) d["weights"] = b.weights;
  return d;
}

ReplayBatch sample(ReplayBuffer& rb, int64_t batch, const py::object& augment, bool share,
                   std::optional<double> beta) {
  if (augment.is_none()) {
    py::gil_scoped_release release;
    return rb.sample(batch, nullptr, share, beta);
  }
#ifdef OBSAUG_WITH_ENGINE
  if (py::isinstance<Engine>(augment)) {
    Engine& engine = augment.cast<Engine&>();
    const StackAugment with_engine = augment_with(engine);
    py::gil_scoped_release release;
    return rb.sample(batch, &with_engine, share, beta);
  }
#endif
  throw py::type_error("augment must be an obsaug.Engine or None, got " +
                       std::string(py::str(py::type::handle_of(augment).attr("__name__"))));
}

// A counter's getter as a property that waits for the buffer's lock without the GIL.
template <typename R>
py::cpp_function released(R (ReplayBuffer::*getter)() const) {
  return py::cpp_function([getter](const ReplayBuffer& rb) { return (rb.*getter)(); },
                          py::call_guard<py::gil_scoped_release>());
}

// ReplayOptions but the device: the native constructor's keyword arguments
// and the read-only properties of the same names, in one table.
constexpr auto kOptionFields = std::make_tuple(
    std::pair{"capacity", &ReplayOptions::capacity},
    std::pair{"frame_shape", &ReplayOptions::frame_shape},
    std::pair{"frame_stack", &ReplayOptions::frame_stack},
    std::pair{"action_shape", &ReplayOptions::action_shape},
    std::pair{"action_dtype", &ReplayOptions::action_dtype},
    std::pair{"n_step", &ReplayOptions::n_step}, std::pair{"gamma", &ReplayOptions::gamma},
    std::pair{"prioritized", &ReplayOptions::prioritized},
    std::pair{"alpha", &ReplayOptions::alpha}, std::pair{"beta", &ReplayOptions::beta},
    std::pair{"seed", &ReplayOptions::seed});

// fn(name, member pointer) for each entry of kOptionFields.
template <typename Fn>
void for_each_option_field(Fn&& fn) {
  std::apply([&](const auto&... field) { (fn(field.first, field.second), ...); }, kOptionFields);
}

// "capacity, frame_shape, ..., seed", for error messages.
std::string option_names() {
  std::string names;
  for_each_option_field(
      [&](const char* name, auto) { names += (names.empty() ? "" : ", ") + std::string(name); });
  return names;
}

}  // namespace

void bind_replay(py::module& m) {
  py::class_<ReplayBuffer> cls(m, "ReplayBuffer", "Native replay buffer; use obsaug.ReplayBuffer.");
  for_each_option_field([&](const char* name, auto member) {
    cls.def_property_readonly(name,
                              [member](const ReplayBuffer& rb) { return rb.options().*member; });
  });
  cls.def(py::init([](const std::string& device, const py::kwargs& options) {
            const size_t expected = std::tuple_size_v<decltype(kOptionFields)>;
            if (options.size() != expected) {
              throw py::type_error("ReplayBuffer takes the device and " + std::to_string(expected) +
                                   " options by keyword (" + option_names() + "), got " +
                                   std::to_string(options.size()));
            }
            ReplayOptions o;
            o.device = c10::Device(device);
            for_each_option_field([&](const char* name, auto member) {
              if (!options.contains(name)) {
                throw py::type_error(std::string("ReplayBuffer is missing the option '") + name +
                                     "' (expected " + option_names() + ")");
              }
              o.*member = options[name].cast<std::decay_t<decltype(o.*member)>>();
            });
            return ReplayBuffer(std::move(o));
          }),
          py::arg("device"))
      .def("add_first", &ReplayBuffer::add_first, py::arg("frames"), py::arg("envs"),
           py::call_guard<py::gil_scoped_release>())
      .def("add",
           py::overload_cast<const at::Tensor&, const at::Tensor&, const at::Tensor&,
                             const at::Tensor&, const at::Tensor&,
                             const std::optional<std::vector<int64_t>>&>(&ReplayBuffer::add),
           py::arg("action"), py::arg("reward"), py::arg("frames"), py::arg("terminated"),
           py::arg("truncated"), py::arg("envs"), py::call_guard<py::gil_scoped_release>())
      .def("add_step",
           py::overload_cast<const at::Tensor&, double, const at::Tensor&, bool, bool, int64_t>(
               &ReplayBuffer::add),
           py::arg("action"), py::arg("reward"), py::arg("frame"), py::arg("terminated"),
           py::arg("truncated"), py::arg("env"), py::call_guard<py::gil_scoped_release>())
      .def(
          "sample",
          [](ReplayBuffer& rb, int64_t batch, const py::object& augment, bool share,
             std::optional<double> beta) {
            return batch_dict(sample(rb, batch, augment, share, beta));
          },
          py::arg("batch"), py::arg("augment"), py::arg("share_augmentation"), py::arg("beta"))
      .def("update_priorities", &ReplayBuffer::update_priorities, py::arg("indices"),
           py::arg("priorities"), py::call_guard<py::gil_scoped_release>())
      .def("check_priorities", &ReplayBuffer::check_priorities, py::arg("indices"),
           py::arg("priorities"), py::call_guard<py::gil_scoped_release>())
      .def("save", &ReplayBuffer::save, py::arg("dir"), py::call_guard<py::gil_scoped_release>())
      .def_static(
          "load",
          [](const std::string& dir, std::optional<std::string> device) {
            py::gil_scoped_release release;
            return ReplayBuffer::load(
                dir, device ? std::optional<c10::Device>(c10::Device(*device)) : std::nullopt);
          },
          py::arg("dir"), py::arg("device") = py::none())
      .def_property_readonly("device",
                             [](const ReplayBuffer& rb) { return rb.options().device.str(); })
      // The counters wait for the buffer's lock: without the GIL, so a sample in
      // another thread does not stall every Python thread.
      .def_property_readonly("size", released(&ReplayBuffer::size))
      .def_property_readonly("num_valid", released(&ReplayBuffer::num_valid))
      .def_property_readonly("total_frames", released(&ReplayBuffer::total_frames))
      .def_property_readonly("sample_calls", released(&ReplayBuffer::sample_calls))
      .def_property_readonly("storage", &ReplayBuffer::storage)
      // obsaug.distributed.ShardedReplayBuffer's pieces (docs/distributed.md)
      .def("uniform_slots_for", &ReplayBuffer::uniform_slots_for, py::arg("call"),
           py::arg("draw_ids"), py::call_guard<py::gil_scoped_release>())
      .def("priority_slots_for", &ReplayBuffer::priority_slots_for, py::arg("fractions"),
           py::call_guard<py::gil_scoped_release>())
      .def(
          "priority_summary",
          [](const ReplayBuffer& rb) {
            const PrioritySummary p = rb.priority_summary();
            return std::make_tuple(p.total, p.smallest);
          },
          py::call_guard<py::gil_scoped_release>())
      .def(
          "rows_at",
          [](const ReplayBuffer& rb, const std::vector<int64_t>& slots) {
            TransitionRows r;
            {
              py::gil_scoped_release release;
              r = rb.rows_at(slots);
            }
            return py::dict("obs_index"_a = r.obs_index, "next_index"_a = r.next_index,
                            "action"_a = r.action, "reward"_a = r.reward, "discount"_a = r.discount,
                            "weight"_a = r.weight);
          },
          py::arg("slots"))
      .def("count_sample_call", &ReplayBuffer::count_sample_call,
           py::call_guard<py::gil_scoped_release>());

  m.def(
      "shard_draws",
      [](uint64_t seed, uint64_t call, int64_t first_id, int64_t batch,
         const std::vector<double>& shard_mass, bool prioritized) {
        std::vector<int32_t> owner(static_cast<size_t>(batch));
        std::vector<double> target(static_cast<size_t>(batch));
        shard_draws(seed, call, first_id, batch, shard_mass, prioritized, owner.data(),
                    target.data());
        return std::make_tuple(owner, target);
      },
      py::arg("seed"), py::arg("call"), py::arg("first_id"), py::arg("batch"),
      py::arg("shard_mass"), py::arg("prioritized"));
}

}  // namespace obsaug::python

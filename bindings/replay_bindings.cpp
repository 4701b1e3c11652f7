// obsaug._C.ReplayBuffer: the native side of obsaug.ReplayBuffer
// (python/obsaug/replay.py turns Python numbers and arrays into tensors).
// The GIL is released around adds, sampling (gather + augment kernels),
// priority updates and checkpoint I/O.
#include "bindings/replay_bindings.h"

#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>  // at::Tensor <-> torch.Tensor

#include <optional>
#include <string>
#include <vector>

#include "replay/replay_buffer.h"
#ifdef OBSAUG_WITH_ENGINE
#include "replay/engine_augment.h"
#endif

namespace py = pybind11;

namespace obsaug::python {
namespace {

py::dict batch_dict(const ReplayBatch& b) {
  py::dict d;
  d["obs"] = b.obs;
  d["action"] = b.action;
  d["reward"] = b.reward;
  d["discount"] = b.discount;
  d["next_obs"] = b.next_obs;
  d["indices"] = b.indices;
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

}  // namespace

void bind_replay(py::module& m) {
  py::class_<ReplayBuffer>(m, "ReplayBuffer", "Native replay buffer; use obsaug.ReplayBuffer.")
      .def(py::init([](int64_t capacity, std::vector<int64_t> frame_shape, int32_t frame_stack,
                       std::vector<int64_t> action_shape, at::ScalarType action_dtype,
                       const std::string& device, int32_t n_step, double gamma, bool prioritized,
                       double alpha, double beta, uint64_t seed) {
             ReplayOptions o;
             o.capacity = capacity;
             o.frame_shape = std::move(frame_shape);
             o.frame_stack = frame_stack;
             o.action_shape = std::move(action_shape);
             o.action_dtype = action_dtype;
             o.device = c10::Device(device);
             o.n_step = n_step;
             o.gamma = gamma;
             o.prioritized = prioritized;
             o.alpha = alpha;
             o.beta = beta;
             o.seed = seed;
             return ReplayBuffer(std::move(o));
           }),
           py::arg("capacity"), py::arg("frame_shape"), py::arg("frame_stack"),
           py::arg("action_shape"), py::arg("action_dtype"), py::arg("device"), py::arg("n_step"),
           py::arg("gamma"), py::arg("prioritized"), py::arg("alpha"), py::arg("beta"),
           py::arg("seed"))
      .def("add_first", &ReplayBuffer::add_first, py::arg("frames"), py::arg("envs"),
           py::call_guard<py::gil_scoped_release>())
      .def("add",
           py::overload_cast<const at::Tensor&, const at::Tensor&, const at::Tensor&,
                             const at::Tensor&, const at::Tensor&, const std::vector<int64_t>&>(
               &ReplayBuffer::add),
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
      .def("save", &ReplayBuffer::save, py::arg("dir"), py::call_guard<py::gil_scoped_release>())
      .def_static(
          "load",
          [](const std::string& dir, std::optional<std::string> device) {
            py::gil_scoped_release release;
            return ReplayBuffer::load(
                dir, device ? std::optional<c10::Device>(c10::Device(*device)) : std::nullopt);
          },
          py::arg("dir"), py::arg("device") = py::none())
      .def_property_readonly("capacity",
                             [](const ReplayBuffer& rb) { return rb.options().capacity; })
      .def_property_readonly("frame_shape",
                             [](const ReplayBuffer& rb) { return rb.options().frame_shape; })
      .def_property_readonly("frame_stack",
                             [](const ReplayBuffer& rb) { return rb.options().frame_stack; })
      .def_property_readonly("action_shape",
                             [](const ReplayBuffer& rb) { return rb.options().action_shape; })
      .def_property_readonly("action_dtype",
                             [](const ReplayBuffer& rb) { return rb.options().action_dtype; })
      .def_property_readonly("device",
                             [](const ReplayBuffer& rb) { return rb.options().device.str(); })
      .def_property_readonly("n_step", [](const ReplayBuffer& rb) { return rb.options().n_step; })
      .def_property_readonly("gamma", [](const ReplayBuffer& rb) { return rb.options().gamma; })
      .def_property_readonly("prioritized",
                             [](const ReplayBuffer& rb) { return rb.options().prioritized; })
      .def_property_readonly("alpha", [](const ReplayBuffer& rb) { return rb.options().alpha; })
      .def_property_readonly("beta", [](const ReplayBuffer& rb) { return rb.options().beta; })
      .def_property_readonly("seed", [](const ReplayBuffer& rb) { return rb.options().seed; })
      .def_property_readonly("size", &ReplayBuffer::size)
      .def_property_readonly("num_valid", &ReplayBuffer::num_valid)
      .def_property_readonly("total_frames", &ReplayBuffer::total_frames)
      .def_property_readonly("sample_calls", &ReplayBuffer::sample_calls)
      .def_property_readonly("storage", &ReplayBuffer::storage);
}

}  // namespace obsaug::python

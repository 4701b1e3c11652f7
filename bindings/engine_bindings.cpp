// obsaug._C.Engine: the native side of obsaug.Engine (python/obsaug/engine.py
// turns paths and dicts into the two factories below). The GIL is released
// around everything that can take time: loading the config and filling the
// pool, augment / augment_ (refresh + kernel), load_state (sync mode
// re-decodes the pool) and close (joins the decoder threads). augment and
// augment_ may be called from several Python threads at once (engine/engine.h).
#include "bindings/engine_bindings.h"

#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>  // at::Tensor <-> torch.Tensor

#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "bindings/grad_refusal.h"
#include "bindings/pool_bindings.h"
#include "bindings/schema_bindings.h"
#include "engine/config.h"
#include "engine/engine.h"
#include "engine/locations.h"
#include "engine/pool/distractor_pool.h"
#include "engine/source/image_source.h"

namespace py = pybind11;
using namespace pybind11::literals;  // "key"_a = value

namespace obsaug::python {
namespace {

py::dict stats_dict(const EngineStats& s) {
  return py::dict(
      "calls"_a = s.calls, "samples"_a = s.samples, "step"_a = s.step, "has_pool"_a = s.has_pool,
      "pool_decoded"_a = s.pool_decoded, "pool_failed"_a = s.pool_failed,
      "pool_uploaded"_a = s.pool_uploaded, "pool_decode_rate"_a = s.pool_decode_rate,
      "pool_mean_age_calls"_a = s.pool_mean_age_calls, "pool_queue_depth"_a = s.pool_queue_depth,
      "pool_distinct_crops"_a = s.pool_distinct_crops,
      "pool_new_crops_per_call"_a = s.pool_new_crops_per_call,
      "pool_first_failures"_a = failures_list(s.pool_first_failures));
}

// Engine.state_dict()'s keys and the members they hold, in dict order:
// state_dict and state_from_dict both read this one table.
constexpr auto kStateFields =
    std::make_tuple(std::pair{"seed", &EngineState::seed}, std::pair{"step", &EngineState::step},
                    std::pair{"pool_serial", &EngineState::pool_serial},
                    std::pair{"pool_stamp", &EngineState::pool_stamp},
                    std::pair{"pool_calls", &EngineState::pool_calls},
                    std::pair{"pool_slots", &EngineState::pool_slots},
                    std::pair{"pool_files", &EngineState::pool_files},
                    std::pair{"pool_listing", &EngineState::pool_listing},
                    std::pair{"pool_checksums", &EngineState::pool_checksums});

// fn(name, member pointer) for each entry of kStateFields.
template <typename Fn>
void for_each_state_field(Fn&& fn) {
  std::apply([&](const auto&... field) { (fn(field.first, field.second), ...); }, kStateFields);
}

py::dict state_dict(const EngineState& s) {
  py::dict d;
  for_each_state_field([&](const char* name, auto member) { d[name] = py::cast(s.*member); });
  return d;
}

// The resolved config as the dict Engine(dict) takes: every key, inferred
// pool image size and absolute sources included; Engine(config_dict(c))
// loads a config equal to c.
py::dict config_dict(const Config& c) {
  const py::dict frames("stack"_a = c.frames.stack, "channels"_a = c.frames.channels,
                        "height"_a = c.frames.height, "width"_a = c.frames.width);
  py::list pipeline;
  for (const OpSpec& op : c.pipeline) pipeline.append(op_dict(op));
  const py::dict refresh(
      "threads"_a = c.pool.refresh.threads, "max_per_second"_a = c.pool.refresh.max_per_second,
      "mode"_a = to_string(c.pool.refresh.mode), "per_call"_a = c.pool.refresh.per_call);
  py::dict pool;
  pool["size"] = c.pool.size;
  if (c.pool.image_height > 0 || c.pool.image_width > 0) {
    py::list image_size;
    image_size.append(c.pool.image_height);
    image_size.append(c.pool.image_width);
    pool["image_size"] = image_size;
  }
  pool["sources"] = py::cast(c.pool.sources);
  pool["refresh"] = refresh;
  const py::dict output("dtype"_a = to_string(c.output.dtype), "scale"_a = c.output.scale,
                        "bias"_a = c.output.bias, "reuse"_a = c.output.reuse);
  return py::dict("device"_a = c.device, "seed"_a = c.seed, "frames"_a = frames,
                  "pipeline"_a = pipeline, "pool"_a = pool, "output"_a = output);
}

// A state value as the uint64 it holds: an int (or what has __index__: a
// numpy integer, a 0-dim integer tensor), not a bool. TypeError or ValueError
// naming `what` (state_dict['step']), what it needs and what it got.
uint64_t state_uint64(const py::handle& value, const std::string& what) {
  const std::string need = what + " must be an int in [0, 2**64), got ";
  if (PyBool_Check(value.ptr()) || !PyIndex_Check(value.ptr()))
    throw py::type_error(need +
                         py::str(py::type::handle_of(value).attr("__name__")).cast<std::string>());
  const auto index = py::reinterpret_steal<py::object>(PyNumber_Index(value.ptr()));
  if (!index) throw py::error_already_set();
  const unsigned long long v = PyLong_AsUnsignedLongLong(index.ptr());
  if (v == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
    PyErr_Clear();  // OverflowError: negative, or 2**64 and up
    throw py::value_error(need + py::str(index).cast<std::string>());
  }
  return v;
}

// A list of such values (a list, tuple or other sequence, not a string).
std::vector<uint64_t> state_uint64s(const py::handle& value, const std::string& what) {
  if (!PySequence_Check(value.ptr()) || py::isinstance<py::str>(value) ||
      py::isinstance<py::bytes>(value))
    throw py::type_error(what + " must be a list of ints in [0, 2**64), got " +
                         py::str(py::type::handle_of(value).attr("__name__")).cast<std::string>());
  const py::sequence items = py::reinterpret_borrow<py::sequence>(value);
  std::vector<uint64_t> out;
  out.reserve(items.size());
  for (size_t k = 0; k < items.size(); ++k)
    out.push_back(state_uint64(items[k], what + "[" + std::to_string(k) + "]"));
  return out;
}

EngineState state_from_dict(const py::dict& d) {
  std::string keys;
  for_each_state_field(
      [&](const char* name, auto) { keys += (keys.empty() ? "" : ", ") + std::string(name); });
  EngineState s;
  for_each_state_field([&](const char* name, auto member) {
    if (!d.contains(name)) {
      const std::string field = name;
      const bool listing =
          field == "pool_files" || field == "pool_listing" || field == "pool_checksums";
      throw py::value_error("state_dict is missing '" + field +
                            "' (expected the keys of Engine.state_dict(): " + keys + ")" +
                            (listing ? "; a state saved before the pool's listing was part of "
                                       "it cannot be resumed exactly: take a new one"
                                     : ""));
    }
    const std::string what = "state_dict['" + std::string(name) + "']";
    if constexpr (std::is_same_v<std::decay_t<decltype(s.*member)>, uint64_t>)
      s.*member = state_uint64(d[name], what);
    else
      s.*member = state_uint64s(d[name], what);
  });
  return s;
}

// A loaded config with Engine(reuse_output=...) applied (None keeps the config's).
Config with_reuse(Config config, std::optional<bool> reuse_output) {
  if (reuse_output) config.output.reuse = *reuse_output;
  return config;
}

// An optional out= tensor as the C++ API takes it (undefined = none).
at::Tensor out_tensor(const std::optional<at::Tensor>& out) { return out.value_or(at::Tensor()); }

}  // namespace

void bind_engine(py::module& m) {
  py::class_<Engine>(m, "Engine", "Native obsaug engine; use obsaug.Engine.")
      .def_static(
          "from_file",
          [](const std::string& path, int rank, int world_size, std::optional<bool> reuse_output,
             const std::string& base_dir) {
            py::gil_scoped_release release;  // config load + pool fill
            return std::make_unique<Engine>(
                with_reuse(load_config_file(path, base_dir), reuse_output),
                DistributedRank{rank, world_size});
          },
          py::arg("path"), py::arg("rank") = 0, py::arg("world_size") = 1,
          py::arg("reuse_output") = py::none(), py::arg("base_dir") = "")
      .def_static(
          "from_string",
          [](const std::string& text, const std::string& origin, const std::string& base_dir,
             int rank, int world_size, std::optional<bool> reuse_output) {
            py::gil_scoped_release release;
            return std::make_unique<Engine>(
                with_reuse(load_config_string(text, origin, base_dir), reuse_output),
                DistributedRank{rank, world_size});
          },
          py::arg("text"), py::arg("origin") = "<string>", py::arg("base_dir") = "",
          py::arg("rank") = 0, py::arg("world_size") = 1, py::arg("reuse_output") = py::none())
      .def(
          "augment",
          [](Engine& e, const at::Tensor& obs, std::optional<uint64_t> step,
             const std::optional<at::Tensor>& out) {
            bindings::refuse_grad(obs, "Engine.augment", "obs");
            if (out) bindings::refuse_grad(*out, "Engine.augment", "out");
            at::Tensor result = e.augment(obs, step, out_tensor(out));
            if (out) bindings::note_written(*out);
            return result;
          },
          py::arg("obs"), py::arg("step") = py::none(), py::arg("out") = py::none(),
          py::call_guard<py::gil_scoped_release>())
      .def(
          "gather_augment",
          [](Engine& e, const at::Tensor& storage, const at::Tensor& indices,
             std::optional<uint64_t> step, const std::optional<at::Tensor>& out) {
            bindings::refuse_grad(storage, "Engine.gather_augment", "storage");
            if (out) bindings::refuse_grad(*out, "Engine.gather_augment", "out");
            at::Tensor result =
                e.gather_augment(storage, indices, step, /*check_indices=*/true, out_tensor(out));
            if (out) bindings::note_written(*out);
            return result;
          },
          py::arg("storage"), py::arg("indices"), py::arg("step") = py::none(),
          py::arg("out") = py::none(), py::call_guard<py::gil_scoped_release>())
      .def(
          "augment_",
          [](Engine& e, const at::Tensor& obs, std::optional<uint64_t> step) {
            bindings::refuse_grad(obs, "Engine.augment_", "obs");
            e.augment_(obs, step);
            bindings::note_written(obs);
          },
          py::arg("obs"), py::arg("step") = py::none(), py::call_guard<py::gil_scoped_release>())
      .def(
          "gather_augment_for",
          [](Engine& e, const at::Tensor& storage, const at::Tensor& indices, uint64_t seed,
             uint64_t step, const at::Tensor& sample_ids, const std::optional<at::Tensor>& out,
             const std::optional<at::Tensor>& out_rows) {
            return e.gather_augment_for(storage, indices, seed, step, sample_ids, out_tensor(out),
                                        out_tensor(out_rows));
          },
          py::arg("storage"), py::arg("indices"), py::arg("seed"), py::arg("step"),
          py::arg("sample_ids"), py::arg("out") = py::none(), py::arg("out_rows") = py::none(),
          py::call_guard<py::gil_scoped_release>())
      .def("reserve_steps", &Engine::reserve_steps, py::arg("count"))
      .def_property_readonly("step", &Engine::step)
      .def("config_dict", [](const Engine& e) { return config_dict(e.config()); })
      .def("config_yaml", [](const Engine& e) { return describe(e.config()); })
      .def_property_readonly("device", [](const Engine& e) { return e.device().str(); })
      .def_property_readonly("rank", [](const Engine& e) { return e.distributed().rank; })
      .def_property_readonly("world_size",
                             [](const Engine& e) { return e.distributed().world_size; })
      .def_property_readonly("seed", &Engine::seed)
      .def("pool_files",
           [](const Engine& e) {
             // This rank's share of the sources' files, in listing order:
             // "path" for a plain file, "shard.tar::member" for a tar member
             // (ImageRef::display_name, as failure reports name them).
             std::vector<std::string> out;
             if (e.closed() || e.pool() == nullptr) return out;
             const std::vector<ImageRef>& refs = e.pool()->refs();
             out.reserve(refs.size());
             for (const ImageRef& r : refs) out.push_back(r.display_name());
             return out;
           })
      .def("stats", [](const Engine& e) { return stats_dict(e.stats()); })
      .def("state_dict", [](const Engine& e) { return state_dict(e.state()); })
      .def(
          "load_state_dict",
          [](Engine& e, const py::dict& d) {
            const EngineState s = state_from_dict(d);
            py::gil_scoped_release release;  // sync mode re-decodes the pool
            e.load_state(s);
          },
          py::arg("state"))
      .def_property_readonly("pool_images",
                             [](const Engine& e) -> py::object {
                               if (e.closed() || e.pool() == nullptr) return py::none();
                               return py::cast(e.pool()->images());
                             })
      .def("close", &Engine::close, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("closed", &Engine::closed);

  // engine/locations.h, for obsaug.locations (which knows the package's layout).
  m.def("photo_cache_dir", &photo_cache_dir);
  m.def("find_embedded_photos", &find_embedded_photos, py::arg("roots"));
  m.def("find_config", &find_config, py::arg("name_or_path"), py::arg("preset_dirs"));
  m.def("preset_names", &preset_names, py::arg("preset_dirs"));
  // A config file resolved (as Engine.config gives it) without building an
  // engine: what obsaug.sb3 rebuilds an engine from on another device.
  m.def(
      "config_file_dict",
      [](const std::string& path, const std::string& base_dir) {
        return config_dict(load_config_file(path, base_dir));
      },
      py::arg("path"), py::arg("base_dir") = "");
}

}  // namespace obsaug::python

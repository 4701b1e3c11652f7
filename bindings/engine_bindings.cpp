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
#include <vector>

#include "bindings/schema_bindings.h"
#include "engine/config.h"
#include "engine/engine.h"
#include "engine/pool/distractor_pool.h"
#include "engine/source/image_source.h"

namespace py = pybind11;

namespace obsaug::python {
namespace {

py::dict stats_dict(const EngineStats& s) {
  py::dict d;
  d["calls"] = s.calls;
  d["samples"] = s.samples;
  d["step"] = s.step;
  d["has_pool"] = s.has_pool;
  d["pool_decoded"] = s.pool_decoded;
  d["pool_failed"] = s.pool_failed;
  d["pool_uploaded"] = s.pool_uploaded;
  d["pool_decode_rate"] = s.pool_decode_rate;
  d["pool_mean_age_calls"] = s.pool_mean_age_calls;
  d["pool_queue_depth"] = s.pool_queue_depth;
  return d;
}

py::dict state_dict(const EngineState& s) {
  py::dict d;
  d["seed"] = s.seed;
  d["step"] = s.step;
  d["pool_serial"] = s.pool_serial;
  d["pool_stamp"] = s.pool_stamp;
  d["pool_calls"] = s.pool_calls;
  d["pool_slots"] = py::cast(s.pool_slots);
  return d;
}

// The resolved config as the dict Engine(dict) takes: every key, inferred
// pool image size and absolute sources included; Engine(config_dict(c))
// loads a config equal to c.
py::dict config_dict(const Config& c) {
  py::dict frames;
  frames["stack"] = c.frames.stack;
  frames["channels"] = c.frames.channels;
  frames["height"] = c.frames.height;
  frames["width"] = c.frames.width;
  py::list pipeline;
  for (const OpSpec& op : c.pipeline) pipeline.append(op_dict(op));
  py::dict refresh;
  refresh["threads"] = c.pool.refresh.threads;
  refresh["max_per_second"] = c.pool.refresh.max_per_second;
  refresh["mode"] = to_string(c.pool.refresh.mode);
  refresh["per_call"] = c.pool.refresh.per_call;
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
  py::dict output;
  output["dtype"] = to_string(c.output.dtype);
  output["scale"] = c.output.scale;
  output["bias"] = c.output.bias;
  py::dict d;
  d["device"] = c.device;
  d["seed"] = c.seed;
  d["frames"] = frames;
  d["pipeline"] = pipeline;
  d["pool"] = pool;
  d["output"] = output;
  return d;
}

EngineState state_from_dict(const py::dict& d) {
  static const char* const kKeys[] = {"seed",       "step",       "pool_serial",
                                      "pool_stamp", "pool_calls", "pool_slots"};
  for (const char* key : kKeys) {
    if (!d.contains(key)) {
      throw py::value_error(std::string("state_dict is missing '") + key +
                            "' (expected the keys of Engine.state_dict(): seed, step, "
                            "pool_serial, pool_stamp, pool_calls, pool_slots)");
    }
  }
  EngineState s;
  s.seed = d["seed"].cast<uint64_t>();
  s.step = d["step"].cast<uint64_t>();
  s.pool_serial = d["pool_serial"].cast<uint64_t>();
  s.pool_stamp = d["pool_stamp"].cast<uint64_t>();
  s.pool_calls = d["pool_calls"].cast<uint64_t>();
  s.pool_slots = d["pool_slots"].cast<std::vector<uint64_t>>();
  return s;
}

}  // namespace

void bind_engine(py::module& m) {
  py::class_<Engine>(m, "Engine", "Native obsaug engine; use obsaug.Engine.")
      .def_static(
          "from_file",
          [](const std::string& path, int rank, int world_size) {
            py::gil_scoped_release release;  // config load + pool fill
            return std::make_unique<Engine>(load_config_file(path),
                                            DistributedRank{rank, world_size});
          },
          py::arg("path"), py::arg("rank") = 0, py::arg("world_size") = 1)
      .def_static(
          "from_string",
          [](const std::string& text, const std::string& origin, const std::string& base_dir,
             int rank, int world_size) {
            py::gil_scoped_release release;
            return std::make_unique<Engine>(load_config_string(text, origin, base_dir),
                                            DistributedRank{rank, world_size});
          },
          py::arg("text"), py::arg("origin") = "<string>", py::arg("base_dir") = "",
          py::arg("rank") = 0, py::arg("world_size") = 1)
      .def("augment", &Engine::augment, py::arg("obs"), py::arg("step") = py::none(),
           py::call_guard<py::gil_scoped_release>())
      .def("augment_", &Engine::augment_, py::arg("obs"), py::arg("step") = py::none(),
           py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("step", &Engine::step)
      .def("config_dict", [](const Engine& e) { return config_dict(e.config()); })
      .def("config_yaml", [](const Engine& e) { return describe(e.config()); })
      .def_property_readonly("device", [](const Engine& e) { return e.config().device; })
      .def_property_readonly("rank", [](const Engine& e) { return e.distributed().rank; })
      .def_property_readonly("world_size",
                             [](const Engine& e) { return e.distributed().world_size; })
      .def_property_readonly("seed", &Engine::seed)
      .def("pool_files",
           [](const Engine& e) {
             // This rank's share of the sources' files, in listing order:
             // "path" for a plain file, "shard.tar::member" for a tar member.
             std::vector<std::string> out;
             if (e.closed() || e.pool() == nullptr) return out;
             const std::vector<ImageRef>& refs = e.pool()->refs();
             out.reserve(refs.size());
             for (const ImageRef& r : refs) {
               out.push_back(r.in_archive() ? r.path + "::" + r.member : r.path);
             }
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
}

}  // namespace obsaug::python

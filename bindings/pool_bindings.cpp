// obsaug._C.DistractorPool: the native face of engine/pool/distractor_pool.h
// (DESIGN.md section 7), wrapped by python/obsaug/pool.py. The GIL is
// released around everything that blocks (the fill in the constructor,
// refresh, restore, close) so the decoder threads and other Python threads
// run meanwhile. The object is not thread-safe: one Python thread refreshes
// and augments (the consumer of the C++ contract).
#include "bindings/pool_bindings.h"

#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>  // at::Tensor <-> torch.Tensor

#include <memory>
#include <string>
#include <vector>

#include "engine/pool/distractor_pool.h"

namespace py = pybind11;
using namespace pybind11::literals;  // "key"_a = value

namespace obsaug::python {
namespace {

// The paths as given; DistractorPool makes relative ones absolute.
std::vector<std::string> source_paths(const py::object& sources) {
  const py::object fspath = py::module_::import("os").attr("fspath");
  if (py::isinstance<py::str>(sources) || py::hasattr(sources, "__fspath__")) {
    return {py::cast<std::string>(fspath(sources))};
  }
  std::vector<std::string> paths;
  for (const py::handle item : sources) paths.push_back(py::cast<std::string>(fspath(item)));
  return paths;
}

std::pair<int, int> image_size_pair(const py::object& size) {
  if (py::isinstance<py::int_>(size)) {
    const int s = py::cast<int>(size);
    return {s, s};
  }
  const auto hw = py::cast<std::vector<int>>(size);
  if (hw.size() != 2) {
    throw py::value_error("image_size must be an int or (height, width), got " +
                          std::to_string(hw.size()) + " values");
  }
  return {hw[0], hw[1]};
}

py::dict stats_dict(const DistractorPoolStats& s) {
  return py::dict("decoded"_a = s.decoded, "failed"_a = s.failed, "uploaded"_a = s.uploaded,
                  "decode_rate"_a = s.decode_rate, "mean_age_calls"_a = s.mean_age_calls,
                  "queue_depth"_a = s.queue_depth, "calls"_a = s.calls,
                  "distinct_crops"_a = s.distinct_crops,
                  "new_crops_per_call"_a = s.new_crops_per_call,
                  "first_failures"_a = failures_list(s.first_failures));
}

// The cursor as the dict pool.cursor reads and writes.
py::dict cursor_dict(const PoolCursor& c) {
  return py::dict("next_serial"_a = c.next_serial, "next_stamp"_a = c.next_stamp,
                  "calls"_a = c.calls);
}

PoolCursor cursor_from_dict(const py::dict& d) {
  return PoolCursor{d["next_serial"].cast<uint64_t>(), d["next_stamp"].cast<uint64_t>(),
                    d["calls"].cast<uint64_t>()};
}

// The state as pool.state_dict() gives it: the cursor's keys, then
// slot_serials, slot_checksums, num_files, listing_fingerprint.
py::dict state_dict(const PoolState& s) {
  py::dict d = cursor_dict(s.cursor);
  d["slot_serials"] = py::cast(s.slot_serials);
  d["slot_checksums"] = py::cast(s.slot_checksums);
  d["num_files"] = s.listing.files;
  d["listing_fingerprint"] = s.listing.fingerprint;
  return d;
}

// Every key of state_dict() must be there (pool.py checks and names them).
PoolState state_from_dict(const py::dict& d) {
  return PoolState{
      cursor_from_dict(d),
      PoolListing{d["num_files"].cast<uint64_t>(), d["listing_fingerprint"].cast<uint64_t>()},
      d["slot_serials"].cast<std::vector<uint64_t>>(),
      d["slot_checksums"].cast<std::vector<uint64_t>>()};
}

}  // namespace

py::list failures_list(const std::vector<SourceFailure>& failures) {
  py::list out;
  for (const auto& f : failures) out.append(py::dict("path"_a = f.path, "message"_a = f.message));
  return out;
}

void bind_pool(py::module& m) {
  py::class_<DistractorPool>(m, "DistractorPool", R"doc(
Decoded distractor photographs for the overlay op, refreshed in the background.

``images`` is the [size, channels, H, W] uint8 tensor on ``device``; call
``refresh()`` before each augment that reads it (on the augment thread, with
the augment stream current on CUDA): it uploads what the decoder threads
staged (mode="async") or decodes ``per_call`` images from the seeded file
order (mode="sync", bit-reproducible).)doc")
      .def(py::init([](const py::object& sources, int64_t size, const py::object& image_size,
                       int channels, const std::string& device, int threads,
                       const std::string& mode, double max_per_second, int64_t per_call,
                       uint64_t seed, int rank, int world_size, bool progress, int worker_nice) {
             DistractorPoolOptions o;
             o.sources = source_paths(sources);
             o.size = size;
             std::tie(o.height, o.width) = image_size_pair(image_size);
             o.channels = channels;
             o.device = c10::Device(device);
             o.threads = threads;
             o.mode = parse_refresh_mode(mode);
             o.max_per_second = max_per_second;
             o.per_call = per_call;
             o.seed = seed;
             o.rank = rank;
             o.world_size = world_size;
             o.show_progress = progress;
             o.worker_nice = worker_nice;
             py::gil_scoped_release release;  // the fill
             return std::make_unique<DistractorPool>(std::move(o));
           }),
           py::arg("sources"), py::arg("size") = 1024,
           py::arg("image_size") = py::make_tuple(84, 84), py::arg("channels") = 3,
           py::arg("device") = "cpu", py::arg("threads") = 2, py::arg("mode") = "async",
           py::arg("max_per_second") = 0.0, py::arg("per_call") = 8, py::arg("seed") = 0,
           py::arg("rank") = 0, py::arg("world_size") = 1, py::arg("progress") = true,
           py::arg("worker_nice") = 10)
      .def_property_readonly("images", [](const DistractorPool& p) { return p.images(); })
      .def("refresh", &DistractorPool::prepare_for_augment,
           py::call_guard<py::gil_scoped_release>(),
           "Uploads the staged images (async) or decodes per_call images (sync).")
      .def("stats", [](const DistractorPool& p) { return stats_dict(p.stats()); })
      .def("close", &DistractorPool::close, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("closed", &DistractorPool::closed)
      .def_property_readonly("num_files", [](const DistractorPool& p) { return p.refs().size(); })
      .def_property(
          "cursor", [](const DistractorPool& p) { return cursor_dict(p.cursor()); },
          [](DistractorPool& p, const py::dict& d) { p.set_cursor(cursor_from_dict(d)); },
          "Where the refresh stands (next_serial, next_stamp, calls), to save and restore.")
      .def("slot_serials", &DistractorPool::slot_serials,
           "The serial (file order position) of the image each slot holds.")
      .def(
          "state", [](const DistractorPool& p) { return state_dict(p.state()); },
          "The cursor, each slot's serial and checksum, and the listing (DistractorPool::state).")
      .def(
          "restore",
          [](DistractorPool& p, const py::dict& state) {
            const PoolState s = state_from_dict(state);
            py::gil_scoped_release release;  // P decodes
            p.restore(s);
          },
          py::arg("state"),
          "Re-decodes each slot's serial, checks it against the state and sets the cursor "
          "(DistractorPool::restore).")
      .def(
          "__enter__", [](DistractorPool& p) -> DistractorPool& { return p; },
          py::return_value_policy::reference)
      .def("__exit__",
           [](DistractorPool& p, const py::args&) {
             py::gil_scoped_release release;
             p.close();
           })
      .def("__repr__", [](const DistractorPool& p) {
        const auto& o = p.options();
        return "obsaug.DistractorPool(size=" + std::to_string(o.size) + ", image_size=(" +
               std::to_string(o.height) + ", " + std::to_string(o.width) +
               "), channels=" + std::to_string(o.channels) + ", device=\"" + o.device.str() +
               "\", mode=\"" + (o.mode == RefreshMode::kSync ? "sync" : "async") +
               "\", files=" + std::to_string(p.refs().size()) + ")";
      });
}

}  // namespace obsaug::python

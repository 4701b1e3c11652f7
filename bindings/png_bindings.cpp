// obsaug._C.write_png: an RGB image tensor through tools/png_writer (the one
// PNG encoder, shared with `obsaug preview`).
#include "bindings/png_bindings.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/csrc/utils/pybind.h>  // at::Tensor <-> torch.Tensor

#include <cstring>
#include <string>

#include "tools/png_writer.h"

namespace py = pybind11;

namespace obsaug::python {

void bind_png(py::module& m) {
  m.def(
      "write_png",
      [](const at::Tensor& rgb, const std::string& path) {
        TORCH_CHECK_TYPE(rgb.scalar_type() == at::kByte,
                         "write_png: rgb must be uint8 [H, W, 3], got ", rgb.scalar_type());
        TORCH_CHECK_VALUE(
            rgb.dim() == 3 && rgb.size(2) == 3 && rgb.size(0) >= 1 && rgb.size(1) >= 1,
            "write_png: rgb must be [H, W, 3] with H, W >= 1, got ", rgb.sizes());
        const at::Tensor image = rgb.cpu().contiguous();
        cli::RgbImage out(image.size(1), image.size(0), 0);
        std::memcpy(out.rgb.data(), image.data_ptr<uint8_t>(), out.rgb.size());
        py::gil_scoped_release release;
        cli::write_png(out, path);  // std::runtime_error naming the path when it cannot
      },
      py::arg("rgb"), py::arg("path"),
      "Writes an RGB image ([H, W, 3] uint8) as an 8-bit PNG (the CLI's writer).");
}

}  // namespace obsaug::python

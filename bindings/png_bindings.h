// obsaug._C.write_png (bindings/png_bindings.cpp): the CLI's PNG writer
// (tools/png_writer.h) for obsaug.preview, compiled in where libpng is
// (OBSAUG_WITH_PNG).
#pragma once

#include <pybind11/pybind11.h>

namespace obsaug::python {

// Adds obsaug._C.write_png(rgb, path): rgb a [H, W, 3] uint8 CPU tensor.
void bind_png(pybind11::module& m);

}  // namespace obsaug::python

#include "bindings/register_ops.h"

TORCH_LIBRARY_IMPL(obsaug, CUDA, m) { obsaug::bindings::register_backend(m); }

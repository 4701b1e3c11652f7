#include "bindings/register_ops.h"

TORCH_LIBRARY_IMPL(obsaug, CPU, m) { obsaug::bindings::register_backend(m); }

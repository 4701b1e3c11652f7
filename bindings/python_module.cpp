// obsaug._C: importing it loads libobsaug, whose static initialisers register
// the torch.ops.obsaug schemas and kernels. It also holds the op schema
// (always), the DistractorPool, the Engine and the ReplayBuffer (where their
// libraries are built: OBSAUG_WITH_*); only bindings/ sees pybind11.
#include <pybind11/pybind11.h>

#include "bindings/schema_bindings.h"

#ifdef OBSAUG_WITH_ENGINE
#include "bindings/pool_bindings.h"
#endif
#ifdef OBSAUG_WITH_ENGINE_API
#include "bindings/engine_bindings.h"
#endif
#ifdef OBSAUG_WITH_REPLAY
#include "bindings/replay_bindings.h"
#endif

PYBIND11_MODULE(_C, m) {
  m.doc() = "obsaug native module";
#ifdef OBSAUG_WITH_CUDA
  m.attr("built_with_cuda") = true;
#else
  m.attr("built_with_cuda") = false;
#endif
  obsaug::python::bind_schema(m);
#ifdef OBSAUG_WITH_ENGINE
  obsaug::python::bind_pool(m);
#endif
#ifdef OBSAUG_WITH_ENGINE_API
  obsaug::python::bind_engine(m);
#endif
#ifdef OBSAUG_WITH_REPLAY
  obsaug::python::bind_replay(m);  // after the engine: sample(augment=Engine)
#endif
}

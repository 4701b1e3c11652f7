// obsaug._C: importing it loads libobsaug, whose static initialisers register
// the torch.ops.obsaug schemas and kernels. Classes (pool, engine, replay)
// are bound here as they arrive; only bindings/ sees pybind11.
#include <pybind11/pybind11.h>

#ifdef OBSAUG_WITH_POOL
#include "bindings/pool_bindings.h"
#endif
#ifdef OBSAUG_WITH_ENGINE
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
  // Built with OBSAUG_REQUIRE_ALL: every component below is present (the
  // configure failed otherwise), and the tests treat a missing one as a failure.
#ifdef OBSAUG_REQUIRED_ALL
  m.attr("required_all") = true;
#else
  m.attr("required_all") = false;
#endif
#ifdef OBSAUG_WITH_POOL
  obsaug::python::bind_pool(m);
#endif
#ifdef OBSAUG_WITH_ENGINE
  obsaug::python::bind_engine(m);
#endif
#ifdef OBSAUG_WITH_REPLAY
  obsaug::python::bind_replay(m);  // after the engine: sample(augment=Engine)
#endif
}

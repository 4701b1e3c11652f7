// obsaug._C: importing it loads libobsaug, whose static initialisers register
// the torch.ops.obsaug schemas and kernels. It also holds the op schema
// (always), the DistractorPool, the Engine and the ReplayBuffer (where their
// libraries are built: OBSAUG_WITH_*); only bindings/ sees pybind11.
#include <c10/util/Exception.h>
#include <pybind11/pybind11.h>

#include "bindings/math_bindings.h"
#include "bindings/schema_bindings.h"
#include "kernels/augment_cpu.h"

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
  // The classes' checks raise c10::TypeError / ValueError / IndexError (one type
  // per kind of bad input, README "Errors"); Python sees the matching built-in
  // exception with the message, not RuntimeError. std::invalid_argument and
  // std::out_of_range map to ValueError and IndexError by pybind11 itself.
  pybind11::register_local_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const c10::TypeError& e) {
      PyErr_SetString(PyExc_TypeError, e.what_without_backtrace());
    } catch (const c10::ValueError& e) {
      PyErr_SetString(PyExc_ValueError, e.what_without_backtrace());
    } catch (const c10::IndexError& e) {
      PyErr_SetString(PyExc_IndexError, e.what_without_backtrace());
    }
  });
#ifdef OBSAUG_WITH_CUDA
  m.attr("built_with_cuda") = true;
#else
  m.attr("built_with_cuda") = false;
#endif
  m.def(
      "cpu_loops",
      [] {
        const std::string problem = obsaug::cpu_loops_setting_problem();
        TORCH_CHECK_VALUE(problem.empty(), problem);
        return std::string(obsaug::cpu_loops_name(obsaug::cpu_loops()));
      },
      "Which of the CPU ops' hand-written loops run: 'avx512', 'avx2' or 'baseline', the widest "
      "the CPU has, capped by OBSAUG_CPU_LOOPS (read when the library loaded). Every set writes "
      "the same bits.");
  obsaug::python::bind_schema(m);
  obsaug::python::bind_float_math(m);
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

# obsaug_add_gtest(<name> SOURCES <file>... LIBS <target>... [LABELS <label>...]
#                  [SOURCE_DIR] [NO_TSAN_DISCOVERY] [BASELINE_LOOPS_TOO])
# One GoogleTest executable (gtest_main), registered with ctest.
#   - libstdc++ is linked first: libtorch.so exports its own copies of
#     std::filesystem::remove_all and a few more (its remove_all crashes on a
#     non-empty folder, e.g. a test's TempDir clean-up); libstdc++'s must win.
#     Harmless for the torch-free tests, so every test gets it.
#   - SOURCE_DIR: defines OBSAUG_SOURCE_DIR, the checkout, for tests that
#     read configs/ or data/photos from the source tree. Only there: the
#     absolute path is part of the compile command, so ccache cannot share
#     those objects between checkouts (a fresh clone recompiles them).
#   - NO_TSAN_DISCOVERY: under OBSAUG_TSAN the binary is built but not
#     registered (discovery would run it; scripts/sanitize.sh runs it itself,
#     without ASLR).
#   - LABELS: ctest labels of every test of the binary (ctest -L <label>).
#   - BASELINE_LOOPS_TOO: every test is registered a second time, named
#     baseline_loops.<test>, run with OBSAUG_CPU_LOOPS=baseline, so that the
#     CPU ops' baseline loops (kernels/augment_cpu.h) are tested on hosts
#     with AVX2 too; label baseline_loops (only: not the binary's LABELS).
include(GoogleTest)

function(obsaug_add_gtest name)
  cmake_parse_arguments(ARG "SOURCE_DIR;NO_TSAN_DISCOVERY;BASELINE_LOOPS_TOO" ""
                        "SOURCES;LIBS;LABELS" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "obsaug_add_gtest(${name}): SOURCES is empty")
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE "-Wl,--push-state,--no-as-needed" stdc++ "-Wl,--pop-state"
                        ${ARG_LIBS} GTest::gtest GTest::gtest_main)
  if(ARG_SOURCE_DIR)
    target_compile_definitions(${name} PRIVATE OBSAUG_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  endif()
  if(NOT (OBSAUG_TSAN AND ARG_NO_TSAN_DISCOVERY))
    if(ARG_LABELS)
      gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES LABELS "${ARG_LABELS}")
    else()
      gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60)
    endif()
    if(ARG_BASELINE_LOOPS_TOO)
      # one label: a list would reach set_tests_properties split in two
      gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 TEST_PREFIX "baseline_loops."
                           PROPERTIES ENVIRONMENT "OBSAUG_CPU_LOOPS=baseline" LABELS baseline_loops)
    endif()
  endif()
endfunction()

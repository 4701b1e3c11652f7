# Imports LibTorch from the Python environment's torch package as the target
# obsaug::torch (headers, libraries, ABI flag) without find_package(Torch),
# whose CUDA probing is slow and fragile on machines without a GPU.
execute_process(
  COMMAND "${Python3_EXECUTABLE}" -c
          "import os, torch; print(os.path.dirname(torch.__file__)); print(int(torch._C._GLIBCXX_USE_CXX11_ABI)); print(torch.__version__)"
  OUTPUT_VARIABLE _torch_info OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _torch_rc)
if(NOT _torch_rc EQUAL 0)
  message(FATAL_ERROR "obsaug needs PyTorch in ${Python3_EXECUTABLE}; run scripts/setup.sh")
endif()
string(REPLACE "\n" ";" _torch_info "${_torch_info}")
list(GET _torch_info 0 TORCH_PACKAGE_DIR)
list(GET _torch_info 1 TORCH_CXX11_ABI)
list(GET _torch_info 2 TORCH_VERSION)
message(STATUS "obsaug: torch ${TORCH_VERSION} at ${TORCH_PACKAGE_DIR}")
set(TORCH_LIB_DIR "${TORCH_PACKAGE_DIR}/lib")

add_library(obsaug_torch INTERFACE)
add_library(obsaug::torch ALIAS obsaug_torch)
# Installed (cmake/install.cmake) as obsaug::torch: the package config adds
# these include folders itself, as they may lie in the source tree (.venv/),
# which an export may not name.
set(TORCH_INCLUDE_DIRS
  "${TORCH_PACKAGE_DIR}/include" "${TORCH_PACKAGE_DIR}/include/torch/csrc/api/include")
target_include_directories(obsaug_torch SYSTEM INTERFACE "$<BUILD_INTERFACE:${TORCH_INCLUDE_DIRS}>")
target_compile_definitions(obsaug_torch INTERFACE _GLIBCXX_USE_CXX11_ABI=${TORCH_CXX11_ABI})
# at::parallel_for is an inline OpenMP region: compile with -fopenmp and link
# the libgomp torch ships, so one OpenMP runtime serves torch and obsaug.
# clang (the fuzzing build only) would emit libomp's __kmpc_* calls, which
# libgomp lacks: there the pragmas are left off and parallel_for runs serially.
target_compile_options(obsaug_torch INTERFACE
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<NOT:$<CXX_COMPILER_ID:Clang>>>:-fopenmp>)
target_link_libraries(obsaug_torch INTERFACE
  "${TORCH_LIB_DIR}/libtorch.so" "${TORCH_LIB_DIR}/libtorch_cpu.so"
  "${TORCH_LIB_DIR}/libc10.so" "${TORCH_LIB_DIR}/libgomp.so.1")
if(OBSAUG_WITH_CUDA)
  target_link_libraries(obsaug_torch INTERFACE
    "${TORCH_LIB_DIR}/libtorch_cuda.so" "${TORCH_LIB_DIR}/libc10_cuda.so" CUDA::cudart)
endif()

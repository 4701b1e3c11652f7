# `cmake --install build --prefix PREFIX`: obsaug as a CMake package for C++
# programs (README "C++"; examples/cpp is one, built against an install by
# scripts/cxx_package_check.sh):
#   find_package(obsaug REQUIRED)       # CMAKE_PREFIX_PATH=PREFIX
#   target_link_libraries(app PRIVATE obsaug::engine obsaug::replay)
# Targets, where this build has the component:
#   obsaug::obsaug   the ops (libobsaug.so, with the torch.library registrations)
#   obsaug::replay   ReplayBuffer                  obsaug::engine  Engine (config + pool)
#   obsaug::pool     DistractorPool                obsaug::config  the YAML config
#   obsaug::decode   JPEG/PNG decoding             obsaug::source  image sources
#   obsaug::files    bounded reads, the atomic write (what the others link)
#   obsaug::torch    the LibTorch obsaug was built against (from its Python
#                    environment; the package fails to load once it is gone)
# Layout: PREFIX/include/obsaug/{kernels,files,replay,engine}/... (included as
# "kernels/augment.h", as inside the repository), PREFIX/lib/libobsaug.so and
# the static libraries, PREFIX/lib/cmake/obsaug/. The wheel (SKBUILD) has its
# own layout and installs none of this.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(_obsaug_cmake_dir "${CMAKE_INSTALL_LIBDIR}/cmake/obsaug")
set(_obsaug_include_dir "${CMAKE_INSTALL_INCLUDEDIR}/obsaug")

# Each built component, as (target, exported name).
set(_obsaug_exported obsaug_torch torch obsaug obsaug)
foreach(_component IN ITEMS files replay source decode pool config engine)
  if(TARGET obsaug_${_component})
    list(APPEND _obsaug_exported obsaug_${_component} ${_component})
  endif()
endforeach()
set(_obsaug_targets "")
set(_obsaug_components "")
while(_obsaug_exported)
  list(POP_FRONT _obsaug_exported _target _name)
  set_target_properties(${_target} PROPERTIES EXPORT_NAME ${_name})
  list(APPEND _obsaug_targets ${_target})
  list(APPEND _obsaug_components ${_name})
  if(NOT TARGET obsaug::${_name})  # the same names inside this build
    add_library(obsaug::${_name} ALIAS ${_target})
  endif()
endwhile()

# libobsaug finds torch's libraries where it was built against them.
set_target_properties(obsaug PROPERTIES INSTALL_RPATH "${TORCH_LIB_DIR}")
install(TARGETS ${_obsaug_targets} EXPORT obsaugTargets
  LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}"
  ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}"
  INCLUDES DESTINATION "${_obsaug_include_dir}")
# Every header of the C++ API and of what it includes (none names a
# third-party header but LibTorch's).
foreach(_dir IN ITEMS kernels files replay engine)
  install(DIRECTORY "${PROJECT_SOURCE_DIR}/${_dir}/" DESTINATION "${_obsaug_include_dir}/${_dir}"
          FILES_MATCHING PATTERN "*.h")
endforeach()
install(EXPORT obsaugTargets NAMESPACE obsaug:: DESTINATION "${_obsaug_cmake_dir}")

set(OBSAUG_PACKAGE_COMPONENTS "${_obsaug_components}")
configure_package_config_file(cmake/obsaugConfig.cmake.in
  "${CMAKE_CURRENT_BINARY_DIR}/obsaugConfig.cmake" INSTALL_DESTINATION "${_obsaug_cmake_dir}")
write_basic_package_version_file("${CMAKE_CURRENT_BINARY_DIR}/obsaugConfigVersion.cmake"
  COMPATIBILITY SameMinorVersion)
install(FILES "${CMAKE_CURRENT_BINARY_DIR}/obsaugConfig.cmake"
              "${CMAKE_CURRENT_BINARY_DIR}/obsaugConfigVersion.cmake"
        DESTINATION "${_obsaug_cmake_dir}")

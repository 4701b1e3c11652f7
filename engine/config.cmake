# obsaug_config: the YAML configuration (engine/config.*, DESIGN.md section 6),
# the only code that sees yaml-cpp. Included from engine/CMakeLists.txt before
# its TurboJPEG/libpng check, so it does not depend on the decoders. Built only
# where yaml-cpp is found (Debian: libyaml-cpp-dev); elsewhere it is skipped.
find_package(yaml-cpp QUIET)
if(TARGET yaml-cpp::yaml-cpp)  # yaml-cpp >= 0.8
  set(_obsaug_yaml yaml-cpp::yaml-cpp)
elseif(TARGET yaml-cpp)        # yaml-cpp 0.6, 0.7 (Debian 12)
  set(_obsaug_yaml yaml-cpp)
endif()
if(NOT yaml-cpp_FOUND OR NOT _obsaug_yaml)
  message(STATUS "obsaug: config (YAML) skipped: missing yaml-cpp (Debian: libyaml-cpp-dev)")
  return()
endif()
message(STATUS "obsaug: config with yaml-cpp ${yaml-cpp_VERSION}")

add_library(obsaug_config STATIC "${CMAKE_CURRENT_LIST_DIR}/config.cpp")
target_include_directories(obsaug_config PUBLIC "${PROJECT_SOURCE_DIR}")
# obsaug for kernels/pipeline_spec.h (OpSpec, FrameGeometry, has_overlay);
# yaml-cpp stays private: config.h does not expose it.
target_link_libraries(obsaug_config PUBLIC obsaug PRIVATE ${_obsaug_yaml})

# obsaug_engine_api: obsaug::Engine (engine/engine.*), the configured pipeline
# with its distractor pool and step counter. Included at the end of
# engine/CMakeLists.txt, after the pool target; built where both the pool
# (TurboJPEG, libpng, Boost) and the config (yaml-cpp) are.
if(TARGET obsaug_pool AND TARGET obsaug_config)
  add_library(obsaug_engine_api STATIC "${CMAKE_CURRENT_LIST_DIR}/engine.cpp")
  target_include_directories(obsaug_engine_api PUBLIC "${PROJECT_SOURCE_DIR}")
  target_link_libraries(obsaug_engine_api PUBLIC obsaug_pool obsaug_config)
endif()

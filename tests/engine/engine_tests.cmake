# obsaug::Engine tests (engine/engine.*): their own executable, built where
# obsaug_engine_api is (the pool and yaml-cpp).
if(TARGET obsaug_engine_api)
  add_executable(obsaug_engine_api_tests "${CMAKE_CURRENT_LIST_DIR}/test_engine.cpp")
  # libstdc++ first: libtorch.so exports its own (here crashing) copies of
  # std::filesystem::remove_all and a few more, which would otherwise win.
  target_link_libraries(obsaug_engine_api_tests PRIVATE
                        "-Wl,--push-state,--no-as-needed" stdc++ "-Wl,--pop-state"
                        obsaug_engine_api GTest::gtest GTest::gtest_main)
  # configs/ and data/photos are found from the source tree.
  target_compile_definitions(obsaug_engine_api_tests PRIVATE
                             OBSAUG_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  if(NOT OBSAUG_TSAN)  # like the pool tests: a TSan binary is run by a script, not by ctest
    gtest_discover_tests(obsaug_engine_api_tests DISCOVERY_TIMEOUT 60)
  endif()
endif()

# The configuration tests (engine/config.*): their own executable, built where
# obsaug_config is (that is, where yaml-cpp is found).
if(TARGET obsaug_config)
  add_executable(obsaug_config_tests "${CMAKE_CURRENT_LIST_DIR}/test_config.cpp")
  # libstdc++ first: libtorch.so (through obsaug) exports its own copies of
  # std::filesystem::remove_all and a few more, and its remove_all crashes on
  # a non-empty folder (TempDir's clean-up); libstdc++'s must win.
  target_link_libraries(obsaug_config_tests PRIVATE "-Wl,--no-as-needed" stdc++ "-Wl,--as-needed"
                        obsaug_config GTest::gtest GTest::gtest_main)
  # The presets under configs/ and data/photos are found from the source tree.
  target_compile_definitions(obsaug_config_tests PRIVATE
                             OBSAUG_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  gtest_discover_tests(obsaug_config_tests DISCOVERY_TIMEOUT 60)
endif()

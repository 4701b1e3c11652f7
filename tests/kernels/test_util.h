// Helpers shared by the kernel tests (test_augment.cpp, test_hostile_inputs.cpp).
#pragma once

#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <functional>
#include <initializer_list>
#include <string>
#include <typeinfo>

namespace obsaug::test_util {

// The message of the E that `f` throws (without the C++ backtrace); a test
// failure when it throws something else or nothing.
template <typename E>
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what_without_backtrace();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected " << typeid(E).name() << ", got: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected " << typeid(E).name() << ", nothing was thrown";
  return "";
}

inline void expect_mentions(const std::string& message, std::initializer_list<const char*> parts) {
  for (const char* part : parts) {
    EXPECT_NE(message.find(part), std::string::npos)
        << "message does not mention \"" << part << "\":\n  " << message;
  }
}

}  // namespace obsaug::test_util

// Helpers shared by every C++ test (tests/kernels, tests/engine, tests/replay):
// the thrown error and its message, a self-deleting temporary folder, small
// file readers and writers, a file-size limit. Torch-free, so the engine tests that do not link
// torch include it too; a c10::Error's message is taken without its backtrace.
//
// Each kind of bad input has one exception type (README, "Errors"): in C++
// c10::TypeError / c10::ValueError / c10::IndexError where torch is linked,
// std::invalid_argument (a ValueError in Python) where it is not. A test names
// that exact type through error_of<E> and checks the message's key words with
// expect_mentions.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/resource.h>

#include <csignal>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

namespace obsaug::testing {

namespace detail {
template <typename E, typename = void>
struct has_what_without_backtrace : std::false_type {};
template <typename E>
struct has_what_without_backtrace<
    E, std::void_t<decltype(std::declval<const E&>().what_without_backtrace())>> : std::true_type {
};
}  // namespace detail

// The message of an exception: c10 errors without their C++ backtrace.
template <typename E>
std::string message_of(const E& e) {
  if constexpr (detail::has_what_without_backtrace<E>::value) {
    return e.what_without_backtrace();
  } else {
    return e.what();
  }
}

// The message of the E that `f` throws; a test failure (and "") when it throws
// something else or nothing. E is the exact documented type, never a base
// class that would also accept the wrong kind of error.
template <typename E>
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const E& e) {
    return message_of(e);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected " << typeid(E).name() << ", got " << typeid(e).name() << ": "
                  << e.what();
    return "";
  }
  ADD_FAILURE() << "expected " << typeid(E).name() << ", nothing was thrown";
  return "";
}

// Every one of `parts` occurs in `message`.
inline void expect_mentions(const std::string& message, std::initializer_list<const char*> parts) {
  for (const char* part : parts) {
    EXPECT_NE(message.find(part), std::string::npos)
        << "message does not mention \"" << part << "\":\n  " << message;
  }
}

// A fresh folder under the system's temporary directory, removed with its
// contents when the object goes out of scope.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "obsaug_test_XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string operator/(const std::string& rel) const { return (path_ / rel).string(); }

 private:
  std::filesystem::path path_;
};

// Sets an environment variable for the object's lifetime, then restores it
// (or unsets it when it was not set).
class ScopedEnv {
 public:
  ScopedEnv(std::string name, const std::string& value) : name_(std::move(name)) {
    if (const char* old = ::getenv(name_.c_str())) old_ = old;
    ::setenv(name_.c_str(), value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_.c_str(), old_->c_str(), 1);
    else
      ::unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// A file-size limit (RLIMIT_FSIZE, SIGXFSZ ignored: a write past it fails
// with EFBIG) for the object's lifetime, standing in for a full disk.
class ScopedFileSizeLimit {
 public:
  explicit ScopedFileSizeLimit(rlim_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &old_);
    old_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    struct rlimit small = old_;
    small.rlim_cur = bytes;
    ::setrlimit(RLIMIT_FSIZE, &small);
  }
  ~ScopedFileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &old_);
    std::signal(SIGXFSZ, old_handler_);
  }
  ScopedFileSizeLimit(const ScopedFileSizeLimit&) = delete;
  ScopedFileSizeLimit& operator=(const ScopedFileSizeLimit&) = delete;

 private:
  struct rlimit old_;
  void (*old_handler_)(int) = SIG_DFL;
};

// Writes `bytes` to `path`, creating its parent folders.
inline void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

inline void write_text(const std::string& path, const std::string& text) {
  write_file(path, std::vector<uint8_t>(text.begin(), text.end()));
}

// The whole file (empty when it cannot be read).
inline std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
}

}  // namespace obsaug::testing

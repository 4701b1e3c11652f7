// Bounded reads of user-named files (files/bounded_file.h), with POSIX I/O.
#include "files/bounded_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace obsaug::files {
namespace {

constexpr size_t kChunk = size_t{1} << 16;  // LineReader's read size

std::string too_large(const std::string& what, uint64_t size, uint64_t max_bytes) {
  return what + " of " + std::to_string(size) + " bytes, more than the limit of " +
         std::to_string(max_bytes);
}

}  // namespace

std::string kind_of(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "a special file";
}

RegularFile::RegularFile(const std::string& path, const std::string& what) : path_(path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused
  // below); for a regular file the flag changes nothing and is cleared.
  fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) throw FileError(path, "cannot open " + what + " (" + std::strerror(errno) + ")");
  struct stat st;
  if (::fstat(fd_, &st) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd_);
    throw FileError(path, "cannot stat (" + why + ")");
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    throw FileError(path, "is " + kind_of(st.st_mode) + ", not a regular file");
  }
  const int flags = ::fcntl(fd_, F_GETFL);
  if (flags >= 0) ::fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK);
  size_ = static_cast<uint64_t>(st.st_size);
}

RegularFile::~RegularFile() {
  if (fd_ >= 0) ::close(fd_);
}

RegularFile::RegularFile(RegularFile&& other) noexcept
    : path_(std::move(other.path_)), fd_(other.fd_), size_(other.size_) {
  other.fd_ = -1;
}

void RegularFile::read_at(uint64_t offset, void* data, size_t n) const {
  char* out = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t got = ::pread(fd_, out, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      throw FileError(path_, "cannot read at byte " + std::to_string(offset) + " (" +
                                 std::strerror(errno) + ")");
    }
    if (got == 0) {
      throw FileError(path_, "ends at byte " + std::to_string(offset) +
                                 ", before the size it had when opened (it shrank while read?)");
    }
    out += got;
    offset += static_cast<uint64_t>(got);
    n -= static_cast<size_t>(got);
  }
}

std::string read_bounded(const std::string& path, uint64_t max_bytes, const std::string& what) {
  const RegularFile file(path, what);
  if (file.size() > max_bytes) {
    throw FileError(path, too_large(what, file.size(), max_bytes));
  }
  std::string text(static_cast<size_t>(file.size()), '\0');
  file.read_at(0, text.data(), text.size());
  return text;
}

LineReader::LineReader(const std::string& path, uint64_t max_bytes, size_t max_line,
                       const std::string& what)
    : file_(path, what), max_line_(max_line), what_(what) {
  if (file_.size() > max_bytes) {
    throw FileError(path, too_large(what, file_.size(), max_bytes));
  }
}

bool LineReader::next(std::string* line) {
  line->clear();
  for (;;) {
    const size_t end = buffer_.find('\n', pos_);
    const size_t stop = end == std::string::npos ? buffer_.size() : end;
    if (line->size() + (stop - pos_) > max_line_) {
      throw FileError(file_.path(), "line " + std::to_string(line_number_ + 1) + " of " + what_ +
                                        " is longer than " + std::to_string(max_line_) +
                                        " bytes (not a list of paths?)");
    }
    line->append(buffer_, pos_, stop - pos_);
    if (end != std::string::npos) {
      pos_ = end + 1;
      ++line_number_;
      return true;
    }
    buffer_.clear();
    pos_ = 0;
    if (offset_ == file_.size()) {  // the size at open: a growing file is read that far
      if (line->empty()) return false;
      ++line_number_;
      return true;
    }
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kChunk, file_.size() - offset_));
    buffer_.resize(n);
    file_.read_at(offset_, buffer_.data(), n);
    offset_ += n;
  }
}

}  // namespace obsaug::files

// Checkpoint files (replay/checkpoint_io.h), with POSIX I/O so that every
// failure (ENOSPC, EIO) is seen and the data reaches the disk (fsync) before
// the rename that publishes it.
#include "replay/checkpoint_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <stdexcept>

namespace obsaug {
namespace {

constexpr uint64_t kPrime = 0x100000001b3ull;
constexpr size_t kBufferBytes = 1 << 20;

std::string errno_text() { return std::strerror(errno); }

}  // namespace

void Checksum::update(const void* data, size_t n) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  length_ += n;
  while (n > 0 && carried_ > 0) {
    carry_[carried_++] = *p++;
    --n;
    if (carried_ == 8) {
      uint64_t w;
      std::memcpy(&w, carry_, 8);
      state_ = (state_ ^ w) * kPrime;
      carried_ = 0;
    }
  }
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    state_ = (state_ ^ w) * kPrime;
  }
  for (; n > 0; --n) carry_[carried_++] = *p++;
}

uint64_t Checksum::value() const {
  uint64_t h = state_;
  if (carried_ > 0) {
    unsigned char tail[8] = {0};
    std::memcpy(tail, carry_, carried_);
    uint64_t w;
    std::memcpy(&w, tail, 8);
    h = (h ^ w) * kPrime;
  }
  return (h ^ length_) * kPrime;
}

CheckpointWriter::CheckpointWriter(const std::string& target) : path_(target + ".tmp.XXXXXX") {
  fd_ = ::mkostemp(path_.data(), O_CLOEXEC);
  if (fd_ < 0) {
    throw std::runtime_error("cannot create a temporary file beside " + target + ": " +
                             errno_text());
  }
  // Locked from now until publish() or death: remove_abandoned_temporaries
  // leaves locked files alone. (Where the file system has no flock, neither
  // side can lock, and the sweep removes nothing.)
  ::flock(fd_, LOCK_EX);
  ::fchmod(fd_, 0644);  // mkstemp's 0600 would hide the checkpoint from the user's group
  buffer_.reserve(kBufferBytes);
}

CheckpointWriter::~CheckpointWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(path_.c_str());
  }
}

void CheckpointWriter::flush() {
  size_t done = 0;
  while (done < buffer_.size()) {
    const ssize_t n = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error("cannot write " + path_ + ": " + errno_text());
    done += static_cast<size_t>(n);
  }
  buffer_.clear();
}

void CheckpointWriter::bytes(const void* data, size_t n) {
  checksum_.update(data, n);
  const unsigned char* p = static_cast<const unsigned char*>(data);
  while (n > 0) {
    const size_t room = kBufferBytes - buffer_.size();
    const size_t take = std::min(room, n);
    buffer_.insert(buffer_.end(), p, p + take);
    p += take;
    n -= take;
    if (buffer_.size() == kBufferBytes) flush();
  }
}

void CheckpointWriter::text(const std::string& s) {
  value<uint32_t>(static_cast<uint32_t>(s.size()));
  bytes(s.data(), s.size());
}

void CheckpointWriter::checksum_so_far() { value<uint64_t>(checksum_.value()); }

void CheckpointWriter::finish() {
  const uint64_t sum = checksum_.value();
  const unsigned char* p = reinterpret_cast<const unsigned char*>(&sum);
  buffer_.insert(buffer_.end(), p, p + sizeof(sum));
  flush();
  if (::fsync(fd_) != 0) throw std::runtime_error("cannot sync " + path_ + ": " + errno_text());
}

void CheckpointWriter::publish(const std::string& target, const std::string& dir) {
  rename_and_sync(path_, target, dir);
  // Written and synced before the rename: a late close error changes nothing on disk.
  ::close(fd_);
  fd_ = -1;
}

CheckpointReader::CheckpointReader(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw std::invalid_argument("cannot open " + path_ + ": " + errno_text());
  struct stat st;
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    throw std::invalid_argument(path_ + " is not a regular file");
  }
  size_ = static_cast<uint64_t>(st.st_size);
  buffer_.resize(kBufferBytes);
}

CheckpointReader::~CheckpointReader() {
  if (fd_ >= 0) ::close(fd_);
}

void CheckpointReader::corrupt(const std::string& what) const {
  throw std::invalid_argument("replay checkpoint " + path_ + " is corrupt or truncated: " + what);
}

void CheckpointReader::fill() {
  buffer_pos_ = 0;
  buffer_len_ = 0;
  for (;;) {
    const ssize_t n = ::read(fd_, buffer_.data(), buffer_.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::runtime_error("cannot read " + path_ + ": " + errno_text());
    buffer_len_ = static_cast<size_t>(n);
    return;
  }
}

void CheckpointReader::bytes(void* data, size_t n) {
  if (n > remaining()) corrupt("it ends " + std::to_string(n - remaining()) + " bytes early");
  unsigned char* out = static_cast<unsigned char*>(data);
  size_t left = n;
  while (left > 0) {
    if (buffer_pos_ == buffer_len_) {
      fill();
      if (buffer_len_ == 0) corrupt("the file shrank while it was read");
    }
    const size_t take = std::min(left, buffer_len_ - buffer_pos_);
    std::memcpy(out, buffer_.data() + buffer_pos_, take);
    buffer_pos_ += take;
    out += take;
    left -= take;
  }
  offset_ += n;
  checksum_.update(data, n);
}

std::string CheckpointReader::text(size_t max_length) {
  const uint32_t n = value<uint32_t>();
  if (n > max_length) corrupt("a text field of " + std::to_string(n) + " bytes");
  std::string s(n, '\0');
  bytes(s.data(), n);
  return s;
}

void CheckpointReader::expect(uint64_t n, const char* what) const {
  if (remaining() < sizeof(uint64_t) || n > remaining() - sizeof(uint64_t)) {
    corrupt(std::string(what) + " needs " + std::to_string(n) + " bytes, the file has " +
            std::to_string(remaining() < 8 ? 0 : remaining() - 8) + " left");
  }
}

void CheckpointReader::check_so_far(const char* what) {
  const uint64_t expected = checksum_.value();
  if (value<uint64_t>() != expected) {
    corrupt(std::string(what) + " checksum mismatch (the data was changed or damaged)");
  }
}

void CheckpointReader::finish() {
  const uint64_t expected = checksum_.value();
  uint64_t stored = 0;
  if (remaining() < sizeof(stored)) corrupt("the checksum is missing");
  unsigned char raw[sizeof(stored)];
  const uint64_t before = offset_;
  bytes(raw, sizeof(raw));
  std::memcpy(&stored, raw, sizeof(stored));
  if (stored != expected) corrupt("checksum mismatch (the data was changed or damaged)");
  if (offset_ != size_) {
    corrupt(std::to_string(size_ - before - sizeof(stored)) + " unexpected bytes after the data");
  }
}

void make_directory(const std::string& dir) {
  if (dir.empty()) throw std::invalid_argument("checkpoint directory is empty");
  std::string partial;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = dir.find('/', pos + 1);
    partial = dir.substr(0, pos);
    if (partial.empty()) continue;
    if (::mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
      throw std::runtime_error("cannot create directory " + partial + ": " + errno_text());
    }
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    throw std::runtime_error(dir + " is not a directory");
  }
}

void remove_abandoned_temporaries(const std::string& dir, const std::string& name) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  const std::string prefix = name + ".tmp";
  const auto now = ::time(nullptr);
  while (const dirent* e = ::readdir(d)) {
    const std::string entry = e->d_name;
    if (entry.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string path = dir + "/" + entry;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) continue;
    struct stat st;
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && now - st.st_mtime > 60 &&
        ::flock(fd, LOCK_EX | LOCK_NB) == 0) {
      ::unlink(path.c_str());
    }
    ::close(fd);
  }
  ::closedir(d);
}

void rename_and_sync(const std::string& from, const std::string& to, const std::string& dir) {
  if (::rename(from.c_str(), to.c_str()) != 0) {
    const std::string error = errno_text();
    ::unlink(from.c_str());
    throw std::runtime_error("cannot rename " + from + " to " + to + ": " + error);
  }
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {  // makes the rename itself durable
    ::fsync(fd);
    ::close(fd);
  }
}

}  // namespace obsaug

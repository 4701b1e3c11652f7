// Checkpoint files (replay/checkpoint_io.h): the checksum, buffered writes
// into files::AtomicFile, buffered reads of a files::RegularFile.
#include "replay/checkpoint_io.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
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

CheckpointWriter::CheckpointWriter(const std::string& target) : file_(target) {
  buffer_.reserve(kBufferBytes);
}

void CheckpointWriter::flush() {
  file_.write(buffer_.data(), buffer_.size());
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
}

void CheckpointWriter::publish() { file_.commit(); }

CheckpointReader::CheckpointReader(std::string path) : path_(std::move(path)) {
  try {
    file_.emplace(path_);
  } catch (const files::FileError& e) {  // a bad path is bad input, as a corrupt file is
    throw std::invalid_argument(std::string("replay checkpoint: ") + e.what());
  }
  size_ = file_->size();
  buffer_.resize(kBufferBytes);
}

CheckpointReader::~CheckpointReader() = default;

void CheckpointReader::corrupt(const std::string& what) const {
  throw std::invalid_argument("replay checkpoint " + path_ + " is corrupt or truncated: " + what);
}

void CheckpointReader::fill() {
  buffer_pos_ = 0;
  buffer_len_ = 0;
  for (;;) {
    const ssize_t n = ::read(file_->fd(), buffer_.data(), buffer_.size());
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

void make_checkpoint_directory(const std::string& dir) {
  if (dir.empty()) throw std::invalid_argument("checkpoint directory is empty");
  files::make_directory(dir);  // FileError: a std::runtime_error
}

}  // namespace obsaug

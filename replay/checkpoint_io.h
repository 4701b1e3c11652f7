// Checksummed binary files for replay checkpoints. The writer streams into
// a temporary of its own beside the target (files/atomic_file.h, obsaug's one
// atomic write) and finish() appends a 64-bit checksum of every byte before
// it, flushes and fsyncs; the reader opens regular files only
// (files/bounded_file.h: a FIFO or device is refused before any read),
// checks lengths against the bytes that are really there (a corrupt length
// never allocates) and finish() checks the checksum and that nothing trails
// it. Errors are std::runtime_error (I/O) or std::invalid_argument (corrupt
// or truncated data, or a path that is not a regular file), naming the file.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "files/atomic_file.h"
#include "files/bounded_file.h"

namespace obsaug {

// Word-wise FNV-1a style hash: every change to a single 8-byte word changes
// the result (each step is a bijection of the state).
class Checksum {
 public:
  void update(const void* data, size_t n);
  uint64_t value() const;

 private:
  uint64_t state_ = 0xcbf29ce484222325ull;
  uint64_t length_ = 0;
  unsigned char carry_[8];
  size_t carried_ = 0;
};

class CheckpointWriter {
 public:
  // Creates a new file of its own beside `target`: target.tmp.XXXXXX
  // (files::AtomicFile), so writers of the same target never share one; a
  // target that exists as anything but a regular file is refused
  // (std::runtime_error) and left alone.
  explicit CheckpointWriter(const std::string& target);
  // Unpublished: closes and removes the temporary, only it.
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  void bytes(const void* data, size_t n);
  template <typename T>
  void value(const T& v) {
    bytes(&v, sizeof(T));
  }
  void text(const std::string& s);
  // Writes the checksum of everything so far (a header's own check, read by
  // CheckpointReader::check_so_far before the reader allocates by its sizes).
  void checksum_so_far();
  void finish();  // checksum, flush (the file stays open and locked)
  // fsyncs the finished file and renames it over the target (and fsyncs
  // the folder): it is locked until it has its final name.
  void publish();
  const std::string& path() const { return file_.temporary(); }

 private:
  void flush();
  files::AtomicFile file_;
  std::vector<unsigned char> buffer_;
  Checksum checksum_;
};

class CheckpointReader {
 public:
  // std::invalid_argument when `path` cannot be opened or is not a regular
  // file (a FIFO is refused without waiting for a writer).
  explicit CheckpointReader(std::string path);
  ~CheckpointReader();
  CheckpointReader(const CheckpointReader&) = delete;
  CheckpointReader& operator=(const CheckpointReader&) = delete;

  void bytes(void* data, size_t n);  // invalid_argument "truncated" when fewer remain
  template <typename T>
  T value() {
    T v;
    bytes(&v, sizeof(T));
    return v;
  }
  std::string text(size_t max_length);
  uint64_t remaining() const { return size_ - offset_; }  // bytes before the end of the file
  // Throws unless `n` more bytes (plus the checksum) are in the file.
  void expect(uint64_t n, const char* what) const;
  void check_so_far(const char* what);  // reads and checks a checksum_so_far()
  void finish();                        // checksum matches, nothing trails it

  [[noreturn]] void corrupt(const std::string& what) const;
  const std::string& path() const { return path_; }

 private:
  void fill();
  std::string path_;
  std::optional<files::RegularFile> file_;
  uint64_t size_ = 0;
  uint64_t offset_ = 0;  // bytes consumed
  std::vector<unsigned char> buffer_;
  size_t buffer_pos_ = 0;
  size_t buffer_len_ = 0;
  Checksum checksum_;
};

// Writes `dir`/`name` atomically: `write(writer)` fills a temporary of its
// own (`name`.tmp.XXXXXX), which is then fsynced and renamed over `name` (and
// the directory fsynced). On any error the temporary is removed and the
// previous file stays as it was; of writers racing on one target, each
// publishes a whole file and the last rename wins. A writer killed before
// its rename leaves its temporary, which a write a minute later removes
// (files::remove_abandoned_temporaries). `dir` is made (mkdir -p) first:
// std::invalid_argument when it is empty, std::runtime_error when it cannot.
template <typename Write>
void write_atomically(const std::string& dir, const std::string& name, Write&& write);
void make_checkpoint_directory(const std::string& dir);

template <typename Write>
void write_atomically(const std::string& dir, const std::string& name, Write&& write) {
  make_checkpoint_directory(dir);
  CheckpointWriter writer(dir + "/" + name);
  files::remove_abandoned_temporaries(dir, name);
  write(writer);
  writer.finish();
  writer.publish();
}

}  // namespace obsaug

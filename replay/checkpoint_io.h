// Checksummed binary files for replay checkpoints. The writer streams into
// `path` and finish() appends a 64-bit checksum of every byte before it,
// flushes and fsyncs; the reader checks lengths against the bytes that are
// really there (a corrupt length never allocates) and finish() checks the
// checksum and that nothing trails it. Errors are std::runtime_error (I/O)
// or std::invalid_argument (corrupt or truncated data), naming the file.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

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
  // (mkstemp), so writers of the same target never share one.
  explicit CheckpointWriter(const std::string& target);
  ~CheckpointWriter();  // unpublished: closes and removes the file
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
  void finish();  // checksum, flush, fsync (the file stays open and locked)
  // Renames the finished file over `target` (rename_and_sync), then closes
  // it: it is locked until it has its final name.
  void publish(const std::string& target, const std::string& dir);
  const std::string& path() const { return path_; }

 private:
  void flush();
  std::string path_;
  int fd_ = -1;
  std::vector<unsigned char> buffer_;
  Checksum checksum_;
};

class CheckpointReader {
 public:
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
  int fd_ = -1;
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
// its rename leaves its temporary, which a write a minute later removes.
template <typename Write>
void write_atomically(const std::string& dir, const std::string& name, Write&& write);
void make_directory(const std::string& dir);  // mkdir -p
// Removes the temporaries (`name`.tmp*) in `dir` that writers killed before
// their rename left behind: those no live writer holds locked (a writer
// locks its file from creation to rename) and untouched for a minute (for
// file systems whose locks other hosts do not see).
void remove_abandoned_temporaries(const std::string& dir, const std::string& name);
void rename_and_sync(const std::string& from, const std::string& to, const std::string& dir);

template <typename Write>
void write_atomically(const std::string& dir, const std::string& name, Write&& write) {
  make_directory(dir);
  const std::string target = dir + "/" + name;
  CheckpointWriter writer(target);
  remove_abandoned_temporaries(dir, name);
  write(writer);
  writer.finish();
  writer.publish(target, dir);
}

}  // namespace obsaug

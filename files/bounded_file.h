// Reading a file a user names (a config, a .txt source list, a tar shard, a
// replay checkpoint), bounded, in one place every reader uses:
//   - regular files only: the path is opened without blocking (O_NONBLOCK)
//     and refused unless fstat says it is a regular file, so a FIFO, a
//     device (/dev/zero), a socket or a directory is refused by its kind
//     before any read, and opening a FIFO never waits for a writer;
//   - a size cap per kind of file: a file larger than its cap is refused
//     naming both sizes before anything is allocated for it;
//   - a length cap per line for line-based lists.
// Torch-free and std::filesystem-free (libtorch exports incompatible copies
// of its operations). Errors are FileError naming the path and what is
// wrong; each caller rethrows them as its own documented type (ConfigError,
// SourceError, std::invalid_argument for a checkpoint).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace obsaug::files {

// what(): "PATH: REASON"; reason() alone, for callers that name the path
// their own way ("cannot open (No such file or directory)", "is a FIFO, not
// a regular file", "a config file of N bytes, more than the limit of M").
class FileError : public std::runtime_error {
 public:
  FileError(const std::string& path, const std::string& reason)
      : std::runtime_error(path + ": " + reason), reason_(reason) {}
  const std::string& reason() const { return reason_; }

 private:
  std::string reason_;
};

// What a file of this st_mode is, for a message: "a regular file", "a
// directory", "a FIFO", "a character device", "a block device", "a socket",
// "a symbolic link" or "a special file".
std::string kind_of(mode_t mode);

// A regular file opened read-only: `path` opened with O_NONBLOCK (cleared
// again once fstat has shown a regular file) and O_CLOEXEC. FileError
// "PATH: cannot open WHAT (strerror)" or "PATH: is a FIFO, not a regular
// file" (`what` names the file's role in messages, e.g. "the config file").
class RegularFile {
 public:
  explicit RegularFile(const std::string& path, const std::string& what = "the file");
  ~RegularFile();
  RegularFile(RegularFile&& other) noexcept;
  RegularFile& operator=(RegularFile&&) = delete;
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;

  int fd() const { return fd_; }
  uint64_t size() const { return size_; }  // at open
  const std::string& path() const { return path_; }
  // Reads exactly `n` bytes at `offset`; FileError when the file ends first
  // (it shrank since it was opened) or the read fails.
  void read_at(uint64_t offset, void* data, size_t n) const;

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// The whole of regular file `path`, which must hold at most `max_bytes`:
// FileError "PATH: WHAT of N bytes, more than the limit of M" (`what` as for
// RegularFile). A file that grows while it is read is read up to the size it
// had when opened.
std::string read_bounded(const std::string& path, uint64_t max_bytes, const std::string& what);

// The lines of a regular text file, one at a time, without their '\n' (a
// final line without one counts). The file must hold at most `max_bytes`
// and each line at most `max_line` bytes: FileError naming the line number.
class LineReader {
 public:
  LineReader(const std::string& path, uint64_t max_bytes, size_t max_line, const std::string& what);
  // The next line into *line; false at the end of the file.
  bool next(std::string* line);
  uint64_t line_number() const { return line_number_; }  // of the last line read (1-based)

 private:
  RegularFile file_;
  size_t max_line_;
  std::string what_;
  uint64_t offset_ = 0;  // bytes of the file consumed into buffer_
  std::string buffer_;
  size_t pos_ = 0;
  uint64_t line_number_ = 0;
};

}  // namespace obsaug::files

// Writing a file so that whoever reads its path sees the old file or the
// whole new one, never a part, and so that a failed write leaves the path as
// it was: obsaug's one atomic write, used by replay checkpoints
// (replay/checkpoint_io.h) and the CLI's PNG previews (tools/png_writer.h).
//
// An AtomicFile creates a temporary of its own beside the target
// (TARGET.tmp.XXXXXX, mkostemp, so writers of one target never share one),
// locked (flock) until it is renamed; commit() fsyncs it, renames it over the
// target and fsyncs the folder. Until commit() the target is untouched; on
// any error, or when the object is destroyed uncommitted, the temporary, and
// only the temporary, is removed. obsaug replaces only regular files: a
// target that exists as anything else (a device such as /dev/full, a FIFO,
// a directory) is refused before the temporary is made, so it is never
// replaced or deleted; a symbolic link to a regular file is followed (the
// file it names is replaced, the link stays).
//
// Errors are FileError (files/bounded_file.h) naming the path and the reason.
#pragma once

#include <cstddef>
#include <string>

namespace obsaug::files {

class AtomicFile {
 public:
  explicit AtomicFile(const std::string& target);
  ~AtomicFile();  // uncommitted: closes and removes the temporary
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // The temporary's descriptor, for writers that write themselves (libpng
  // through fdopen(dup(fd()))).
  int fd() const { return fd_; }
  const std::string& temporary() const { return temporary_; }
  const std::string& target() const { return target_; }  // a link's file, when target was a link

  void write(const void* data, size_t n);  // all of it, or FileError
  // fsync, rename over target(), fsync of its folder; then closes. The
  // temporary is gone either way (renamed, or removed on failure).
  void commit();

 private:
  std::string target_;
  std::string folder_;
  std::string temporary_;
  int fd_ = -1;
};

// mkdir -p; FileError when a part of the path is not a directory.
void make_directory(const std::string& dir);

// Removes the temporaries of `dir`/`name` (name.tmp*) that writers killed
// before their rename left behind: regular files that no live writer holds
// locked (a writer locks its file from creation to rename) and untouched for
// a minute (for file systems whose locks other hosts do not see).
void remove_abandoned_temporaries(const std::string& dir, const std::string& name);

}  // namespace obsaug::files

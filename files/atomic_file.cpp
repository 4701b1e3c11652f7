// The atomic write (files/atomic_file.h), with POSIX I/O so that every
// failure (ENOSPC, EIO) is seen and the data reaches the disk (fsync) before
// the rename that publishes it.
#include "files/atomic_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "files/bounded_file.h"

namespace obsaug::files {
namespace {

std::string errno_text() { return std::strerror(errno); }

std::string folder_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// The file a write to `target` replaces: target itself, or the regular file
// a link names. FileError for anything but a regular file or a new name.
std::string resolved_target(const std::string& target) {
  struct stat st;
  if (::lstat(target.c_str(), &st) != 0) {
    if (errno == ENOENT) return target;  // a new file
    throw FileError(target, "cannot stat it (" + errno_text() + ")");
  }
  if (S_ISREG(st.st_mode)) return target;
  if (S_ISLNK(st.st_mode)) {
    char resolved[PATH_MAX];
    struct stat named;
    if (::realpath(target.c_str(), resolved) == nullptr || ::stat(resolved, &named) != 0) {
      throw FileError(target, "it is a symbolic link to nothing (" + errno_text() +
                                  "); obsaug writes only regular files");
    }
    if (!S_ISREG(named.st_mode)) {
      throw FileError(target, "it is a symbolic link to " + kind_of(named.st_mode) + " (" +
                                  resolved +
                                  "), not a regular file, which obsaug leaves alone; name a "
                                  "new file");
    }
    return resolved;
  }
  throw FileError(target, "it is " + kind_of(st.st_mode) +
                              ", not a regular file, which obsaug leaves alone; name a new file");
}

}  // namespace

AtomicFile::AtomicFile(const std::string& target)
    : target_(resolved_target(target)),
      folder_(folder_of(target_)),
      temporary_(target_ + ".tmp.XXXXXX") {
  fd_ = ::mkostemp(temporary_.data(), O_CLOEXEC);
  if (fd_ < 0) {
    throw FileError(target_, "cannot create a temporary file beside it (" + errno_text() + ")");
  }
  // Locked from now until commit() or death: remove_abandoned_temporaries
  // leaves locked files alone. (Where the file system has no flock, neither
  // side can lock, and the sweep removes nothing.)
  ::flock(fd_, LOCK_EX);
  ::fchmod(fd_, 0644);  // mkstemp's 0600 would hide the file from the user's group
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(temporary_.c_str());
  }
}

void AtomicFile::write(const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t done = ::write(fd_, p, n);
    if (done < 0 && errno == EINTR) continue;
    if (done <= 0) throw FileError(temporary_, "cannot write (" + errno_text() + ")");
    p += done;
    n -= static_cast<size_t>(done);
  }
}

void AtomicFile::commit() {
  if (::fsync(fd_) != 0) throw FileError(temporary_, "cannot sync (" + errno_text() + ")");
  if (::rename(temporary_.c_str(), target_.c_str()) != 0) {
    throw FileError(temporary_, "cannot rename to " + target_ + " (" + errno_text() + ")");
  }
  // Renamed: the temporary's name is the target's now, never to be removed.
  // Written and synced before the rename: a late close error changes nothing.
  ::close(fd_);
  fd_ = -1;
  const int dir = ::open(folder_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {  // makes the rename itself durable
    ::fsync(dir);
    ::close(dir);
  }
}

void make_directory(const std::string& dir) {
  if (dir.empty()) throw FileError(dir, "the directory name is empty");
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = dir.find('/', pos + 1);
    const std::string partial = dir.substr(0, pos);
    if (partial.empty()) continue;
    if (::mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
      throw FileError(partial, "cannot create the directory (" + errno_text() + ")");
    }
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    throw FileError(dir, "is not a directory");
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

}  // namespace obsaug::files

// files/atomic_file.h: a write reaches its target whole or not at all, and
// nothing obsaug did not create is ever deleted or replaced: an uncommitted
// or failed write leaves the target as it was and removes only its own
// temporary; a target that is not a regular file (a FIFO, a device, a
// directory, a link to /dev/full) is refused before a temporary exists and
// is still there afterwards; a link to a regular file is written through.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "files/atomic_file.h"
#include "files/bounded_file.h"
#include "tests/test_util.h"

namespace obsaug::files {
namespace {

using testing::error_of;
using testing::expect_mentions;
using testing::read_file;
using testing::TempDir;
using testing::write_text;

std::string text_of(const std::string& path) {
  const std::vector<uint8_t> bytes = read_file(path);
  return std::string(bytes.begin(), bytes.end());
}

std::vector<std::string> names_in(const TempDir& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(AtomicFile, ACommittedWriteReplacesTheTargetWhole) {
  TempDir tmp;
  const std::string target = tmp / "grid.png";
  write_text(target, "old");
  {
    AtomicFile f(target);
    EXPECT_EQ(f.temporary().rfind(target + ".tmp.", 0), 0u) << f.temporary();
    f.write("new contents", 12);
    EXPECT_EQ(text_of(target), "old");  // untouched until commit
    f.commit();
  }
  EXPECT_EQ(text_of(target), "new contents");
  EXPECT_EQ(names_in(tmp), std::vector<std::string>{"grid.png"});
  struct stat st;
  ASSERT_EQ(::stat(target.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
}

TEST(AtomicFile, AnUncommittedOrFailedWriteRemovesOnlyItsTemporary) {
  TempDir tmp;
  const std::string target = tmp / "replay.obsaug";
  write_text(target, "previous");
  {
    AtomicFile f(target);
    f.write("partial", 7);
  }  // destroyed uncommitted (an exception on the way)
  EXPECT_EQ(text_of(target), "previous");
  EXPECT_EQ(names_in(tmp), std::vector<std::string>{"replay.obsaug"});
  // A write the file system refuses (a 16-byte file-size limit for a full disk).
  std::string error;
  {
    const testing::ScopedFileSizeLimit full_disk(16);
    error = error_of<FileError>([&] {
      AtomicFile f(target);
      const std::string big(64, 'x');
      f.write(big.data(), big.size());
      f.commit();
    });
  }
  expect_mentions(error, {"replay.obsaug.tmp.", "cannot write (File too large)"});
  EXPECT_EQ(text_of(target), "previous");
  EXPECT_EQ(names_in(tmp), std::vector<std::string>{"replay.obsaug"});
}

// `target` is refused naming `kind`, and is still what it was; no temporary
// was made beside it.
void refused_and_kept(const TempDir& tmp, const std::string& target, const char* kind) {
  struct stat before;
  ASSERT_EQ(::lstat(target.c_str(), &before), 0);
  const auto names = names_in(tmp);
  expect_mentions(error_of<FileError>([&] { AtomicFile f(target); }),
                  {kind, "not a regular file, which obsaug leaves alone"});
  struct stat after;
  ASSERT_EQ(::lstat(target.c_str(), &after), 0) << target << " was deleted";
  EXPECT_EQ(after.st_ino, before.st_ino) << target << " was replaced";
  EXPECT_EQ(after.st_mode, before.st_mode);
  EXPECT_EQ(names_in(tmp), names);
}

TEST(AtomicFile, ATargetThatIsNotARegularFileIsRefusedAndLeftAlone) {
  TempDir tmp;
  const std::string fifo = tmp / "out.png";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  refused_and_kept(tmp, fifo, "it is a FIFO");
  const std::string dir = tmp / "folder.png";
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  refused_and_kept(tmp, dir, "it is a directory");
  const std::string link = tmp / "full.png";
  ASSERT_EQ(::symlink("/dev/full", link.c_str()), 0);
  refused_and_kept(tmp, link, "it is a symbolic link to a character device (/dev/full)");
  struct stat full;
  ASSERT_EQ(::stat("/dev/full", &full), 0);
  EXPECT_TRUE(S_ISCHR(full.st_mode));
  // A device node of its own where the system allows one (root).
  const std::string node = tmp / "node.png";
  if (::mknod(node.c_str(), S_IFCHR | 0600, makedev(1, 7)) == 0) {
    refused_and_kept(tmp, node, "it is a character device");
  }
  const std::string dangling = tmp / "dangling.png";
  ASSERT_EQ(::symlink((tmp / "nothing").c_str(), dangling.c_str()), 0);
  expect_mentions(error_of<FileError>([&] { AtomicFile f(dangling); }),
                  {"dangling.png: it is a symbolic link to nothing"});
}

TEST(AtomicFile, ALinkToARegularFileIsWrittenThroughAndKept) {
  TempDir tmp;
  const std::string real = tmp / "real.png";
  const std::string link = tmp / "latest.png";
  write_text(real, "old");
  ASSERT_EQ(::symlink("real.png", link.c_str()), 0);
  {
    AtomicFile f(link);
    f.write("new", 3);
    f.commit();
  }
  struct stat st;
  ASSERT_EQ(::lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_EQ(text_of(real), "new");
  EXPECT_EQ(names_in(tmp), (std::vector<std::string>{"latest.png", "real.png"}));
}

TEST(AtomicFile, AbandonedTemporariesGoOnlyWhenUnlockedAndAMinuteOld) {
  TempDir tmp;
  const std::string name = "replay.obsaug";
  const std::string old_unlocked = tmp / (name + ".tmp.dead01");
  const std::string fresh = tmp / (name + ".tmp.fresh1");
  const std::string other = tmp / "other.tmp.dead02";
  for (const std::string& p : {old_unlocked, fresh, other}) write_text(p, "x");
  const struct timespec times[2] = {{::time(nullptr) - 120, 0}, {::time(nullptr) - 120, 0}};
  for (const std::string& p : {old_unlocked, other})
    ASSERT_EQ(::utimensat(AT_FDCWD, p.c_str(), times, 0), 0);
  AtomicFile live(tmp / name);  // locked by this writer, and then made a minute old
  ASSERT_EQ(::utimensat(AT_FDCWD, live.temporary().c_str(), times, 0), 0);
  remove_abandoned_temporaries(tmp.path().string(), name);
  EXPECT_FALSE(std::filesystem::exists(old_unlocked));
  EXPECT_TRUE(std::filesystem::exists(fresh));
  EXPECT_TRUE(std::filesystem::exists(other));
  EXPECT_TRUE(std::filesystem::exists(live.temporary()));
}

TEST(MakeDirectory, MakesEveryPartAndRefusesAFileInTheWay) {
  TempDir tmp;
  make_directory(tmp / "a/b/c");
  EXPECT_TRUE(std::filesystem::is_directory(tmp / "a/b/c"));
  write_text(tmp / "file", "x");
  expect_mentions(error_of<FileError>([&] { make_directory(tmp / "file/d"); }),
                  {"file/d: cannot create the directory (Not a directory)"});
  expect_mentions(error_of<FileError>([&] { make_directory(tmp / "file"); }),
                  {"file: is not a directory"});
}

}  // namespace
}  // namespace obsaug::files

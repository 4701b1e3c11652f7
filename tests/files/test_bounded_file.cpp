// files/bounded_file.h: a user-named path is read only when it is a regular
// file, and only up to its cap. A FIFO is refused by its kind at once (no
// open waits for a writer, no read blocks), /dev/zero and links to it are
// refused before a byte is read, a file over its cap is refused naming both
// sizes, and a list's over-long line is refused naming the line.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <string>
#include <vector>

#include "files/bounded_file.h"
#include "tests/test_util.h"

namespace obsaug::files {
namespace {

using testing::error_of;
using testing::expect_mentions;
using testing::TempDir;
using testing::write_text;

// Runs `f` on another thread and fails the test (instead of hanging) when it
// has not returned within 10 s.
void returns_promptly(const std::function<void()>& f) {
  auto done = std::async(std::launch::async, f);
  ASSERT_EQ(done.wait_for(std::chrono::seconds(10)), std::future_status::ready)
      << "blocked (a FIFO opened or read without O_NONBLOCK?)";
  done.get();
}

TEST(RegularFile, AFifoIsRefusedByItsKindWithoutWaitingForAWriter) {
  TempDir tmp;
  const std::string fifo = tmp / "list.txt";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  returns_promptly([&] {
    expect_mentions(error_of<FileError>([&] { RegularFile f(fifo); }),
                    {"list.txt: is a FIFO, not a regular file"});
    expect_mentions(error_of<FileError>([&] { read_bounded(fifo, 100, "the config file"); }),
                    {"is a FIFO, not a regular file"});
    expect_mentions(error_of<FileError>([&] { LineReader r(fifo, 100, 10, "the image list"); }),
                    {"is a FIFO, not a regular file"});
  });
}

TEST(RegularFile, DevicesDirectoriesAndLinksToThemAreRefused) {
  TempDir tmp;
  const std::string link = tmp / "config.yaml";
  ASSERT_EQ(::symlink("/dev/zero", link.c_str()), 0);
  returns_promptly([&] {
    expect_mentions(error_of<FileError>([&] { read_bounded(link, 1 << 20, "the config file"); }),
                    {"config.yaml: is a character device, not a regular file"});
    expect_mentions(error_of<FileError>([&] { RegularFile f("/dev/zero"); }),
                    {"/dev/zero: is a character device"});
  });
  expect_mentions(error_of<FileError>([&] { RegularFile f(tmp.path().string()); }),
                  {"is a directory, not a regular file"});
  expect_mentions(error_of<FileError>([&] { RegularFile f(tmp / "gone", "the shard"); }),
                  {"gone: cannot open the shard (No such file or directory)"});
  const FileError e(tmp / "x", "why");
  EXPECT_EQ(e.reason(), "why");
  EXPECT_EQ(std::string(e.what()), tmp / "x" + ": why");
}

TEST(ReadBounded, AFileOverItsCapIsRefusedNamingBothSizes) {
  TempDir tmp;
  const std::string path = tmp / "c.yaml";
  write_text(path, std::string(100, 'a'));
  EXPECT_EQ(read_bounded(path, 100, "the config file"), std::string(100, 'a'));
  expect_mentions(error_of<FileError>([&] { read_bounded(path, 99, "the config file"); }),
                  {"c.yaml: the config file of 100 bytes, more than the limit of 99"});
  write_text(path, "");
  EXPECT_EQ(read_bounded(path, 0, "the config file"), "");
}

TEST(RegularFile, ReadAtReadsExactlyAndSaysWhenTheFileShrank) {
  TempDir tmp;
  const std::string path = tmp / "shard.tar";
  write_text(path, "0123456789");
  const RegularFile f(path);
  EXPECT_EQ(f.size(), 10u);
  char got[4];
  f.read_at(3, got, 4);
  EXPECT_EQ(std::string(got, 4), "3456");
  ASSERT_EQ(::truncate(path.c_str(), 5), 0);
  expect_mentions(error_of<FileError>([&] { f.read_at(3, got, 4); }),
                  {"shard.tar: ends at byte 5", "shrank"});
}

std::vector<std::string> lines_of(const std::string& path, size_t max_line) {
  LineReader r(path, 1 << 20, max_line, "the image list");
  std::vector<std::string> out;
  std::string line;
  while (r.next(&line)) {
    out.push_back(line);
    EXPECT_EQ(r.line_number(), out.size());
  }
  return out;
}

TEST(LineReader, SplitsLinesAndKeepsAFinalLineWithoutNewline) {
  TempDir tmp;
  const std::string path = tmp / "list.txt";
  write_text(path, "a.jpg\r\n\nsub/b.png\nlast");
  EXPECT_EQ(lines_of(path, 16), (std::vector<std::string>{"a.jpg\r", "", "sub/b.png", "last"}));
  write_text(path, "x\n");
  EXPECT_EQ(lines_of(path, 16), std::vector<std::string>{"x"});
  write_text(path, "");
  EXPECT_TRUE(lines_of(path, 16).empty());
  // lines across the reader's 64 KiB chunks
  std::string many;
  for (int i = 0; i < 30000; ++i) many += std::to_string(i) + "\n";
  write_text(path, many);
  const std::vector<std::string> got = lines_of(path, 16);
  ASSERT_EQ(got.size(), 30000u);
  EXPECT_EQ(got[12345], "12345");
}

TEST(LineReader, AnOverlongLineOrAnOversizedListIsRefusedNamingIt) {
  TempDir tmp;
  const std::string path = tmp / "list.txt";
  write_text(path, "ok.jpg\n" + std::string(200000, 'x') + "\n");
  LineReader r(path, 1 << 20, 4096, "the image list");
  std::string line;
  ASSERT_TRUE(r.next(&line));
  expect_mentions(error_of<FileError>([&] { r.next(&line); }),
                  {"list.txt: line 2 of the image list is longer than 4096 bytes"});
  expect_mentions(error_of<FileError>([&] { LineReader big(path, 1000, 4096, "the image list"); }),
                  {"the image list of 200008 bytes, more than the limit of 1000"});
}

}  // namespace
}  // namespace obsaug::files

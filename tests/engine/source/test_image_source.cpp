// Image sources (engine/source/image_source.h) and the tar reader
// (engine/source/tar_reader.h): directory scans in the Places365 and COCO layouts,
// .txt lists, WebDataset shards written here (and by GNU tar), malformed and
// truncated shards, combination and sharding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/source/image_source.h"
#include "engine/source/tar_reader.h"
#include "tests/test_util.h"

namespace obsaug {
namespace {

using testing::read_file;
using testing::TempDir;
using testing::write_file;
using testing::write_text;

std::vector<uint8_t> bytes_of(const std::string& s) {
  return std::vector<uint8_t>(s.begin(), s.end());
}

// A ustar writer, straightforward on purpose: the reference the reader must
// agree with.
struct TarEntry {
  std::string name;
  std::string data;
  char type = '0';
};

void put_octal(uint8_t* field, size_t len, uint64_t value) {
  std::snprintf(reinterpret_cast<char*>(field), len, "%0*llo", static_cast<int>(len - 1),
                static_cast<unsigned long long>(value));
}

std::vector<uint8_t> tar_header(const TarEntry& e) {
  std::vector<uint8_t> h(512, 0);
  std::memcpy(h.data(), e.name.data(), std::min<size_t>(e.name.size(), 100));
  put_octal(&h[100], 8, 0644);
  put_octal(&h[108], 8, 0);
  put_octal(&h[116], 8, 0);
  put_octal(&h[124], 12, e.data.size());
  put_octal(&h[136], 12, 1700000000);
  h[156] = static_cast<uint8_t>(e.type);
  std::memcpy(&h[257],
              "ustar\0"
              "00",
              8);
  std::memset(&h[148], ' ', 8);
  unsigned sum = 0;
  for (uint8_t c : h) sum += c;
  std::snprintf(reinterpret_cast<char*>(&h[148]), 8, "%06o", sum);  // "dddddd\0", then ' '
  h[155] = ' ';
  return h;
}

std::vector<uint8_t> make_tar(const std::vector<TarEntry>& entries, bool end_blocks = true) {
  std::vector<uint8_t> out;
  for (const TarEntry& e : entries) {
    const std::vector<uint8_t> h = tar_header(e);
    out.insert(out.end(), h.begin(), h.end());
    out.insert(out.end(), e.data.begin(), e.data.end());
    out.resize((out.size() + 511) / 512 * 512, 0);
  }
  if (end_blocks) out.resize(out.size() + 1024, 0);
  return out;
}

std::vector<TarEntry> webdataset_entries() {
  return {{"sample0000.jpg", "JPEGDATA-0"},
          {"sample0000.cls", "3"},
          {"sample0001.PNG", std::string(700, 'p')},  // spans two blocks
          {"sample0001.json", "{}"},
          {"dir/", "", '5'},
          {"dir/sample0002.jpeg", "J2"},
          {"empty.jpg", ""}};
}

// --- directories ---------------------------------------------------------

TEST(ImageSource, ExtensionMatchingIgnoresCase) {
  for (const char* name : {"a.jpg", "a.JPG", "a.Jpeg", "a.jpEG", "a.png", "x/y.PnG"}) {
    EXPECT_TRUE(has_image_extension(name)) << name;
  }
  for (const char* name : {"a.gif", "a.jpg.txt", "jpg", "a.pn", ".jpgx", "a.svg", ""}) {
    EXPECT_FALSE(has_image_extension(name)) << name;
  }
}

TEST(ImageSource, DirectoryInPlaces365LayoutIsScannedRecursivelyAndSorted) {
  TempDir tmp;
  const std::string root = tmp / "places365_standard";
  const std::vector<std::string> images = {
      "train/airfield/00000002.jpg",  "train/airfield/00000001.JPG", "train/abbey/00000001.jpeg",
      "train/abbey/sub/deeper/x.PNG", "val/zen_garden/00000001.Jpg", "val/abbey/00000007.png"};
  for (const std::string& rel : images) write_text(root + "/" + rel, "not decoded here");
  write_text(root + "/train/abbey/readme.txt", "skip me");
  write_text(root + "/train/abbey/icon.svg", "skip me");
  std::filesystem::create_directories(root + "/train/empty_class");

  const std::vector<ImageRef> refs = list_directory(root);
  std::vector<std::string> got;
  for (const ImageRef& r : refs) {
    got.push_back(r.path.substr(root.size() + 1));
    EXPECT_FALSE(r.in_archive());
    EXPECT_EQ(r.size, 16u);
  }
  std::vector<std::string> want = images;
  std::sort(want.begin(), want.end());
  EXPECT_EQ(got, want);
  // Deterministic: a second scan gives the same list.
  EXPECT_EQ(list_directory(root), refs);
}

TEST(ImageSource, FlatCocoDirectory) {
  TempDir tmp;
  for (int i = 0; i < 25; ++i) {
    char name[64];
    std::snprintf(name, sizeof(name), "train2017/%012d.jpg", 25 - i);
    write_text(tmp / name, "x");
  }
  const std::vector<ImageRef> refs = list_source(tmp / "train2017");
  ASSERT_EQ(refs.size(), 25u);
  EXPECT_TRUE(std::is_sorted(refs.begin(), refs.end(),
                             [](const ImageRef& a, const ImageRef& b) { return a.path < b.path; }));
  EXPECT_NE(refs.front().path.find("000000000001.jpg"), std::string::npos);
}

TEST(ImageSource, DirectoryLinkCycleTerminates) {
  TempDir tmp;
  write_text(tmp / "d/a.jpg", "x");
  std::filesystem::create_directory_symlink(tmp.path() / "d", tmp.path() / "d/loop");
  EXPECT_EQ(list_directory(tmp / "d").size(), 1u);
}

// A folder reachable under two names (a link to it beside it) is listed
// once, under the name first in byte order, whichever of the two is the link
// and whatever order the file system returns the names in. The smaller name
// is created first (tmpfs then returns it last), and eight name pairs make a
// hash-ordered file system (ext4) return the larger one first for some.
TEST(ImageSource, FolderReachableUnderTwoNamesIsListedUnderTheFirstInByteOrder) {
  TempDir tmp;
  for (int i = 0; i < 8; ++i) {
    const std::string root = tmp / ("tree" + std::to_string(i));
    const std::string first = "a" + std::to_string(i) + (i % 2 ? "_real" : "_link");
    const std::string second = "b" + std::to_string(i) + (i % 2 ? "_link" : "_real");
    const std::string& real = i % 2 ? first : second;
    const std::string& link = i % 2 ? second : first;
    std::filesystem::create_directories(root);
    if (real == first) {
      write_text(root + "/" + real + "/photo.jpg", "x");
      std::filesystem::create_directory_symlink(real, root + "/" + link);
    } else {
      std::filesystem::create_directory_symlink(real, root + "/" + link);
      write_text(root + "/" + real + "/photo.jpg", "x");
    }
    const std::vector<ImageRef> refs = list_directory(root);
    ASSERT_EQ(refs.size(), 1u) << root;
    EXPECT_EQ(refs[0].path, root + "/" + first + "/photo.jpg")
        << "real " << real << ", link " << link;
  }
}

TEST(ImageSource, EmptyOrMissingSourceIsAnErrorNamingIt) {
  TempDir tmp;
  write_text(tmp / "only_text/readme.txt", "no images");
  try {
    list_source(tmp / "only_text");
    FAIL() << "expected SourceError";
  } catch (const SourceError& e) {
    EXPECT_NE(std::string(e.what()).find(tmp / "only_text"), std::string::npos) << e.what();
  }
  EXPECT_THROW(list_source(tmp / "does_not_exist"), SourceError);
  write_text(tmp / "notes.doc", "x");
  EXPECT_THROW(list_source(tmp / "notes.doc"), SourceError);
  EXPECT_THROW(list_sources({}), SourceError);
}

// --- text lists ----------------------------------------------------------

TEST(ImageSource, TextListRelativeAbsoluteCommentsAndMissing) {
  TempDir tmp;
  write_text(tmp / "lists/imgs/a.jpg", "a");
  write_text(tmp / "elsewhere/b.png", "bb");
  write_text(tmp / "lists/c d.JPG", "ccc");
  const std::string list = tmp / "lists/files.txt";
  write_text(list, "# a comment\n\nimgs/a.jpg\n   " + (tmp / "elsewhere/b.png") +
                       "  \r\nc d.JPG\r\nimgs/missing.jpg\n   # indented comment\n");
  ListingReport report;
  const std::vector<ImageRef> refs = list_source(list, &report);
  ASSERT_EQ(refs.size(), 3u);
  EXPECT_EQ(refs[0].path, (tmp.path() / "lists" / "imgs/a.jpg").string());
  EXPECT_EQ(refs[1].path, tmp / "elsewhere/b.png");
  EXPECT_EQ(refs[2].path, (tmp.path() / "lists" / "c d.JPG").string());
  EXPECT_EQ(refs[1].size, 2u);
  EXPECT_EQ(report.failed, 1u);
  ASSERT_EQ(report.first_failures.size(), 1u);
  EXPECT_EQ(report.first_failures[0].path, (tmp.path() / "lists" / "imgs/missing.jpg").string());
  EXPECT_NE(report.first_failures[0].message.find(list + " line 6: "), std::string::npos)
      << report.first_failures[0].message;
  EXPECT_NE(report.first_failures[0].message.find("No such file or directory"), std::string::npos)
      << report.first_failures[0].message;

  write_text(tmp / "lists/none.txt", "# nothing\nnope.jpg\n");
  EXPECT_THROW(list_source(tmp / "lists/none.txt"), SourceError);
}

TEST(ImageSource, TextListReportsTheFirstMissingEntriesAndCountsAll) {
  TempDir tmp;
  write_text(tmp / "ok.jpg", "x");
  std::string lines = "ok.jpg\n";
  for (int i = 0; i < 8; ++i) lines += "gone" + std::to_string(i) + ".jpg\n";
  write_text(tmp / "list.txt", lines);
  ListingReport report;
  EXPECT_EQ(list_source(tmp / "list.txt", &report).size(), 1u);
  EXPECT_EQ(report.failed, 8u);
  ASSERT_EQ(report.first_failures.size(), static_cast<size_t>(kMaxReportedFailures));
  for (int i = 0; i < kMaxReportedFailures; ++i) {
    EXPECT_EQ(report.first_failures[i].path, tmp / ("gone" + std::to_string(i) + ".jpg"));
  }
}

TEST(ImageSource, TextListIgnoresAUtf8ByteOrderMark) {
  TempDir tmp;
  write_text(tmp / "a.jpg", "a");
  write_text(tmp / "b.jpg", "b");
  write_text(tmp / "bom.txt",
             "\xEF\xBB\xBF"
             "a.jpg\nb.jpg\n");
  ListingReport report;
  const std::vector<ImageRef> refs = list_source(tmp / "bom.txt", &report);
  ASSERT_EQ(refs.size(), 2u);
  EXPECT_EQ(refs[0].path, tmp / "a.jpg");
  EXPECT_EQ(refs[1].path, tmp / "b.jpg");
  EXPECT_EQ(report.failed, 0u);
  // Only at the start of the file: a BOM on a later line is part of the name.
  write_text(tmp / "bom2.txt",
             "a.jpg\n\xEF\xBB\xBF"
             "b.jpg\n");
  EXPECT_EQ(list_source(tmp / "bom2.txt", &report).size(), 1u);
  EXPECT_EQ(report.failed, 1u);
}

// --- tar shards ----------------------------------------------------------

TEST(TarReader, ListsImageMembersWithTheirByteRanges) {
  TempDir tmp;
  const std::string shard = tmp / "shard-000000.tar";
  const std::vector<TarEntry> entries = webdataset_entries();
  write_file(shard, make_tar(entries));

  const TarIndex index = read_tar_index(shard);
  const std::vector<TarMember>& members = index.members;
  EXPECT_EQ(index.truncation, "");
  ASSERT_EQ(members.size(), 6u);  // the directory is not a member with data
  const std::vector<ImageRef> refs = list_source(shard);
  ASSERT_EQ(refs.size(), 4u);
  const std::vector<std::string> want = {"sample0000.jpg", "sample0001.PNG", "dir/sample0002.jpeg",
                                         "empty.jpg"};
  for (size_t i = 0; i < refs.size(); ++i) {
    EXPECT_EQ(refs[i].member, want[i]);
    EXPECT_EQ(refs[i].path, shard);
    EXPECT_EQ(refs[i].display_name(), shard + "::" + want[i]);
    const auto it = std::find_if(entries.begin(), entries.end(),
                                 [&](const TarEntry& e) { return e.name == want[i]; });
    EXPECT_EQ(read_image_bytes(refs[i], 1 << 20), bytes_of(it->data)) << want[i];
  }
}

TEST(TarReader, GnuLongNamesPaxPathsAndPrefixes) {
  TempDir tmp;
  const std::string long_name = std::string(150, 'n') + "/photo.jpg";
  std::vector<TarEntry> entries = {{"././@LongLink", long_name + '\0', 'L'},
                                   {"truncated-name", "LONG", '0'}};
  const std::string pax_name = std::string(120, 'p') + ".png";
  const std::string record = " path=" + pax_name + "\n";
  // "LEN path=...\n" where LEN counts itself.
  std::string len = std::to_string(record.size() + 3);
  entries.push_back({"PaxHeaders/x", len + record, 'x'});
  entries.push_back({"short.png", "PAX", '0'});
  std::vector<uint8_t> tar = make_tar(entries);
  // A ustar prefix field on a third member (prefix "a/b", name "c.jpg").
  TarEntry prefixed{"c.jpg", "PRE", '0'};
  std::vector<uint8_t> more = make_tar({prefixed});
  std::memcpy(&more[345], "a/b", 3);
  std::memset(&more[148], ' ', 8);
  unsigned sum = 0;
  for (size_t i = 0; i < 512; ++i) sum += more[i];
  std::snprintf(reinterpret_cast<char*>(&more[148]), 8, "%06o", sum);
  more[155] = ' ';
  tar.resize(tar.size() - 1024);  // drop the end blocks before appending
  tar.insert(tar.end(), more.begin(), more.end());
  write_file(tmp / "long.tar", tar);

  const std::vector<ImageRef> refs = list_tar(tmp / "long.tar");
  ASSERT_EQ(refs.size(), 3u);
  EXPECT_EQ(refs[0].member, long_name);
  EXPECT_EQ(read_image_bytes(refs[0], 100), bytes_of("LONG"));
  EXPECT_EQ(refs[1].member, pax_name);
  EXPECT_EQ(read_image_bytes(refs[1], 100), bytes_of("PAX"));
  EXPECT_EQ(refs[2].member, "a/b/c.jpg");
}

TEST(TarReader, ReadsShardsWrittenByGnuTar) {
  if (std::system("tar --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "no tar program";
  TempDir tmp;
  const std::string long_dir = std::string(90, 'd');
  write_text(tmp / ("src/" + long_dir + "/" + std::string(40, 'f') + ".jpg"), "gnu long name");
  write_text(tmp / "src/a.png", std::string(1000, 'a'));
  write_text(tmp / "src/a.txt", "label");
  for (const char* format : {"gnu", "pax", "ustar"}) {
    const std::string shard = tmp / (std::string(format) + ".tar");
    const std::string cmd = "cd '" + (tmp / "src") + "' && tar --format=" + format + " -cf '" +
                            shard + "' a.png a.txt" +
                            (std::string(format) == "ustar" ? "" : " " + long_dir) + " 2>/dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    const std::vector<ImageRef> refs = list_tar(shard);
    const size_t want = std::string(format) == "ustar" ? 1 : 2;
    ASSERT_EQ(refs.size(), want) << format;
    EXPECT_EQ(refs[0].member, "a.png");
    EXPECT_EQ(read_image_bytes(refs[0], 1 << 20), bytes_of(std::string(1000, 'a')));
    if (want == 2) {
      EXPECT_EQ(refs[1].member, long_dir + "/" + std::string(40, 'f') + ".jpg") << format;
      EXPECT_EQ(read_image_bytes(refs[1], 1 << 20), bytes_of("gnu long name"));
    }
  }
}

void expect_source_error(const std::string& path, const std::string& fragment) {
  try {
    read_tar_index(path);
    FAIL() << "expected SourceError for " << path;
  } catch (const SourceError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path), std::string::npos) << what;
    EXPECT_NE(what.find(fragment), std::string::npos) << what;
  }
}

TEST(TarReader, RejectsMalformedHeaders) {
  TempDir tmp;
  const std::vector<uint8_t> good = make_tar(webdataset_entries());

  std::vector<uint8_t> bad_checksum = good;
  bad_checksum[10] ^= 0x20;  // a name byte: the stored checksum no longer matches
  write_file(tmp / "checksum.tar", bad_checksum);
  expect_source_error(tmp / "checksum.tar", "checksum");

  std::vector<TarEntry> entries = webdataset_entries();
  std::vector<uint8_t> bad_size = make_tar(entries);
  bad_size[124] = '9';  // not octal; fix the checksum so the size check is reached
  std::memset(&bad_size[148], ' ', 8);
  unsigned sum = 0;
  for (size_t i = 0; i < 512; ++i) sum += bad_size[i];
  std::snprintf(reinterpret_cast<char*>(&bad_size[148]), 8, "%06o", sum);
  bad_size[155] = ' ';
  write_file(tmp / "size.tar", bad_size);
  expect_source_error(tmp / "size.tar", "non-octal");

  write_file(tmp / "random.tar", std::vector<uint8_t>(2048, 0x5a));
  expect_source_error(tmp / "random.tar", "malformed header at byte 0");

  write_file(tmp / "empty.tar", {});
  expect_source_error(tmp / "empty.tar", "empty");

  // A text file renamed .tar.
  write_text(tmp / "text.tar", std::string(600, 'x'));
  expect_source_error(tmp / "text.tar", "checksum");
}

TEST(TarReader, TruncatedShardKeepsTheMembersBeforeTheCutAndReportsIt) {
  TempDir tmp;
  const std::vector<uint8_t> good = make_tar(webdataset_entries(), /*end_blocks=*/false);
  // Cut inside the PNG's data: its header is at byte 2048 (two members of a
  // header and a data block each before it), its 700 bytes follow.
  const std::string cut_data = tmp / "cut_data.tar";
  write_file(cut_data, std::vector<uint8_t>(good.begin(), good.begin() + 2048 + 512 + 600));
  const TarIndex index = read_tar_index(cut_data);
  ASSERT_EQ(index.members.size(), 2u);
  EXPECT_EQ(index.members[0].name, "sample0000.jpg");
  EXPECT_EQ(index.members[1].name, "sample0000.cls");
  EXPECT_EQ(index.truncated_member, "sample0001.PNG");
  EXPECT_EQ(index.truncation, "tar shard " + cut_data +
                                  ": truncated at the header at byte 2048: member data of 700 "
                                  "bytes runs past the end of the 3160-byte file (an interrupted "
                                  "download?)");
  ListingReport report;
  const std::vector<ImageRef> refs = list_source(cut_data, &report);
  ASSERT_EQ(refs.size(), 1u);
  EXPECT_EQ(refs[0].member, "sample0000.jpg");
  EXPECT_EQ(read_image_bytes(refs[0], 1 << 20), bytes_of("JPEGDATA-0"));
  EXPECT_EQ(report.failed, 1u);
  ASSERT_EQ(report.first_failures.size(), 1u);
  EXPECT_EQ(report.first_failures[0].path, cut_data + "::sample0001.PNG");
  EXPECT_EQ(report.first_failures[0].message,
            index.truncation + "; the 1 image members before it are used");

  // Cut inside a header: the members before it are whole.
  const std::string cut_header = tmp / "cut_header.tar";
  write_file(cut_header, std::vector<uint8_t>(good.begin(), good.begin() + 2048 + 100));
  ListingReport header_report;
  EXPECT_EQ(list_tar(cut_header, &header_report).size(), 1u);
  ASSERT_EQ(header_report.first_failures.size(), 1u);
  EXPECT_EQ(header_report.first_failures[0].path, cut_header);
  EXPECT_NE(header_report.first_failures[0].message.find(
                "truncated at the header at byte 2048: truncated header (100 bytes left)"),
            std::string::npos)
      << header_report.first_failures[0].message;

  // Cut before any image member is whole: the shard yields nothing, an error.
  const std::string cut_first = tmp / "cut_first.tar";
  write_file(cut_first, std::vector<uint8_t>(good.begin(), good.begin() + 512 + 4));
  try {
    list_source(cut_first);
    FAIL() << "expected SourceError";
  } catch (const SourceError& e) {
    EXPECT_EQ(std::string(e.what()),
              "tar shard " + cut_first +
                  ": truncated at the header at byte 0: member data of 10 bytes runs past the "
                  "end of the 516-byte file (an interrupted download?); no complete image member "
                  "before it");
  }
  // Without end-of-archive blocks but otherwise whole: accepted.
  write_file(tmp / "no_end.tar", good);
  EXPECT_EQ(list_tar(tmp / "no_end.tar").size(), 4u);
}

TEST(TarReader, NeverCrashesOnCorruptedShards) {
  TempDir tmp;
  const std::vector<uint8_t> good = make_tar(webdataset_entries());
  std::mt19937 rng(1234);
  int rejected = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::vector<uint8_t> bytes = good;
    if (trial % 2 == 0) {
      bytes.resize(rng() % bytes.size());
    } else {
      for (int k = 0; k < 4; ++k) bytes[rng() % bytes.size()] = static_cast<uint8_t>(rng());
    }
    const std::string path = tmp / "fuzz.tar";
    write_file(path, bytes);
    try {
      ListingReport report;
      for (const ImageRef& ref : list_tar(path, &report)) {
        const std::vector<uint8_t> data = read_image_bytes(ref, 1 << 20);
        EXPECT_EQ(data.size(), ref.size);
      }
      rejected += report.failed > 0;  // a cut shard listed up to the cut
    } catch (const SourceError&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 100);  // most corruptions are caught or reported, none crashes
}

TEST(ImageSource, ReadImageBytesGuards) {
  TempDir tmp;
  const std::string shard = tmp / "s.tar";
  write_file(shard, make_tar(webdataset_entries()));
  std::vector<ImageRef> refs = list_tar(shard);
  // The shard shrinks after listing: a clear error, not a short read.
  std::filesystem::resize_file(shard, 1024);
  EXPECT_THROW(read_image_bytes(refs[1], 1 << 20), SourceError);
  // Gone entirely.
  std::filesystem::remove(shard);
  EXPECT_THROW(read_image_bytes(refs[0], 1 << 20), SourceError);
  // Larger than the limit.
  write_text(tmp / "big.jpg", std::string(5000, 'b'));
  ImageRef big;
  big.path = tmp / "big.jpg";
  EXPECT_THROW(read_image_bytes(big, 4096), SourceError);
  EXPECT_EQ(read_image_bytes(big, 5000).size(), 5000u);
}

// --- combining and sharding ------------------------------------------------

TEST(ImageSource, SeveralSourcesCombineInOrder) {
  TempDir tmp;
  write_text(tmp / "dir/x/1.jpg", "1");
  write_text(tmp / "dir/2.png", "2");
  write_text(tmp / "list_imgs/3.jpg", "3");
  write_text(tmp / "list.txt", "list_imgs/3.jpg\n");
  write_file(tmp / "shard.tar", make_tar(webdataset_entries()));
  const std::vector<ImageRef> all =
      list_sources({tmp / "dir", tmp / "list.txt", tmp / "shard.tar", tmp / "dir/2.png"});
  ASSERT_EQ(all.size(), 2u + 1u + 4u + 1u);
  EXPECT_EQ(all[0].path, tmp / "dir/2.png");
  EXPECT_EQ(all[1].path, tmp / "dir/x/1.jpg");
  EXPECT_EQ(all[2].path, (tmp.path() / "list_imgs/3.jpg").string());
  EXPECT_EQ(all[3].member, "sample0000.jpg");
  EXPECT_EQ(all[7].path, tmp / "dir/2.png");
  // One bad source fails the whole listing, naming it.
  try {
    list_sources({tmp / "dir", tmp / "nowhere"});
    FAIL();
  } catch (const SourceError& e) {
    EXPECT_NE(std::string(e.what()).find("nowhere"), std::string::npos);
  }
}

TEST(ImageSource, ShardingIsDisjointAndCovers) {
  std::vector<ImageRef> all;
  for (int i = 0; i < 103; ++i) {
    ImageRef r;
    r.path = "img" + std::to_string(i) + ".jpg";
    all.push_back(r);
  }
  for (int world : {1, 2, 3, 4, 8, 103}) {
    std::multiset<std::string> seen;
    size_t smallest = all.size(), largest = 0;
    for (int rank = 0; rank < world; ++rank) {
      const std::vector<ImageRef> mine = shard_refs(all, rank, world);
      smallest = std::min(smallest, mine.size());
      largest = std::max(largest, mine.size());
      for (const ImageRef& r : mine) seen.insert(r.path);
    }
    EXPECT_EQ(seen.size(), all.size()) << world;
    for (const ImageRef& r : all) EXPECT_EQ(seen.count(r.path), 1u) << world << " " << r.path;
    EXPECT_LE(largest - smallest, 1u);
  }
  EXPECT_THROW(shard_refs(all, 4, 4), std::invalid_argument);
  EXPECT_THROW(shard_refs(all, -1, 4), std::invalid_argument);
  EXPECT_THROW(shard_refs(all, 0, 0), std::invalid_argument);
  EXPECT_THROW(shard_refs(all, 103, 104), SourceError);  // fewer images than ranks
}

}  // namespace
}  // namespace obsaug

// Image sources for the distractor pool (DESIGN.md section 4): where the
// photographs come from, listed once at start-up into ImageRefs that the
// decoder threads read later.
//
// A source is one of
//   - a directory, scanned recursively for .jpg / .jpeg / .png in any letter
//     case (Places365 `places365_standard/{train,val}/<class>/*.jpg`, COCO's
//     flat `train2017/`), listed in byte-wise sorted path order; links to
//     directories are followed, a directory reachable under several names
//     is listed once, under the name met first when each directory's
//     entries are walked in byte-wise name order;
//   - a `.txt` file of image paths (UTF-8, a leading byte-order mark ignored),
//     one per line, relative to the text file's folder or absolute; blank
//     lines and lines starting with '#' are skipped; entries that name no
//     regular file are left out and reported (ListingReport);
//   - a WebDataset `.tar` shard (POSIX ustar, GNU and pax extensions), whose
//     image members are listed in archive order and later read in place,
//     without extraction; a shard cut short (an interrupted download) keeps
//     the members before the cut and reports the cut (ListingReport);
//   - a single .jpg / .jpeg / .png file.
// Several sources combine in the order given. A source with no usable image
// is an error that names it. All functions here are pure (no shared state) and
// may be called from any thread.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace obsaug {

// Where one image's encoded bytes live: the whole file `path`, or for a tar
// member the `size` bytes at `offset` in the shard `path`.
struct ImageRef {
  std::string path;     // the image file, or the tar shard holding it
  std::string member;   // tar member name; empty for a plain file
  uint64_t offset = 0;  // first byte of the image in `path`
  uint64_t size = 0;    // bytes of the image (for plain files: at listing time)

  bool in_archive() const { return !member.empty(); }
  // "shard.tar::member.jpg" (archive_member_name) or the path: what error
  // messages, failure reports and Engine.pool_files() call the image.
  std::string display_name() const;
};

// How a tar member is named everywhere (messages, reports, pool_files()):
// "shard.tar::member.jpg".
std::string archive_member_name(const std::string& shard, const std::string& member);

bool operator==(const ImageRef& a, const ImageRef& b);

// A malformed source (bad tar header, unreadable list, no usable image).
class SourceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// How many failures a report keeps with their messages (the listing's and
// the pool's); the rest are only counted.
constexpr int kMaxReportedFailures = 5;

// An input that was skipped, and why.
struct SourceFailure {
  std::string path;     // what error messages call it (ImageRef::display_name() for images)
  std::string message;  // the reason, naming the path
};

// What a listing left out, for the caller to count and report (the pool adds
// it to its own failures). Not thread-safe: one report per listing call.
struct ListingReport {
  // .txt lines naming no regular file, and truncated .tar shards.
  uint64_t failed = 0;
  std::vector<SourceFailure> first_failures;  // the first kMaxReportedFailures of them

  void add(std::string path, std::string message);
};

// True when the name ends in .jpg, .jpeg or .png, any letter case.
bool has_image_extension(std::string_view name);

// The most a .txt image list may hold, and the longest line it may have
// (a path: PATH_MAX is 4096): a larger list, or a longer line, is refused
// naming the list before it is read further.
constexpr uint64_t kMaxImageListBytes = uint64_t{1} << 30;
constexpr size_t kMaxImageListLine = 4096;

std::vector<ImageRef> list_directory(const std::string& dir);
// A .txt list (files/bounded_file.h: a regular file only, of at most
// kMaxImageListBytes, lines of at most kMaxImageListLine bytes; SourceError
// otherwise): one path per line, relative to the list's folder, '#'
// comments; entries that are not regular files go to `report`.
std::vector<ImageRef> list_text_file(const std::string& txt_path, ListingReport* report = nullptr);
// Throws SourceError when the shard holds no complete image member; a shard
// cut short after some is a failure in `report` (see tar_reader.h).
std::vector<ImageRef> list_tar(const std::string& tar_path, ListingReport* report = nullptr);

// Lists one source of any kind (by what `path` is: a directory, a file ending
// in .txt or .tar, or an image file); throws SourceError naming `path` when it
// holds no image. What it skipped (missing list entries, a truncated shard)
// is added to `report` when given.
std::vector<ImageRef> list_source(const std::string& path, ListingReport* report = nullptr);

// The concatenation of list_source over `paths`, in order.
std::vector<ImageRef> list_sources(const std::vector<std::string>& paths,
                                   ListingReport* report = nullptr);

// This rank's share: the refs whose index i in `all` has i % world_size ==
// rank. Shares of ranks 0..world_size-1 are disjoint and cover `all`. Throws
// std::invalid_argument for a bad (rank, world_size) and SourceError when the
// share would be empty (fewer images than ranks).
std::vector<ImageRef> shard_refs(const std::vector<ImageRef>& all, int rank, int world_size);

// Reads the encoded bytes of `ref`. Throws SourceError naming the image when
// the file is unreadable or gone, not a regular file (a FIFO or device that
// replaced a photo: refused without blocking), shorter than the listing said
// (a shard that shrank), or larger than `max_bytes`.
std::vector<uint8_t> read_image_bytes(const ImageRef& ref, uint64_t max_bytes);

}  // namespace obsaug

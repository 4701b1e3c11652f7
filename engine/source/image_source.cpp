#include "engine/source/image_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <utility>

#include "engine/source/tar_reader.h"
#include "files/bounded_file.h"

namespace obsaug {

namespace fs = std::filesystem;

namespace {

bool ends_with_ci(std::string_view s, std::string_view suffix) {
  if (s.size() < suffix.size()) return false;
  const std::string_view tail = s.substr(s.size() - suffix.size());
  for (size_t i = 0; i < suffix.size(); ++i) {
    char c = tail[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != suffix[i]) return false;
  }
  return true;
}

// Size of a regular file (following links), or -1 when `path` is not one.
int64_t regular_file_size(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return -1;
  return static_cast<int64_t>(st.st_size);
}

// Why `path` is not a regular file: the stat error, or its kind.
std::string why_not_a_regular_file(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return std::strerror(errno);
  return S_ISDIR(st.st_mode) ? "a directory" : "not a regular file";
}

constexpr std::string_view kUtf8Bom = "\xEF\xBB\xBF";

ImageRef plain_ref(std::string path, uint64_t size) {
  ImageRef ref;
  ref.path = std::move(path);
  ref.size = size;
  return ref;
}

// Depth-first walk that follows directory links but visits each directory
// (device, inode) once, so a link cycle cannot loop. Each directory's entries
// are visited in byte-wise name order, so a folder reachable under several
// names (a link to it beside it) is listed under the same one, the first in
// that order, whatever order the file system returns them in. Unreadable
// subdirectories are skipped; an unreadable root is an error.
void walk_directory(const fs::path& dir, std::set<std::pair<dev_t, ino_t>>* visited,
                    std::vector<ImageRef>* out, bool is_root) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) {
    if (is_root) throw SourceError("image directory " + dir.string() + ": " + std::strerror(errno));
    return;
  }
  if (!visited->insert({st.st_dev, st.st_ino}).second) return;
  std::error_code ec;
  fs::directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec);
  if (ec) {
    if (is_root) throw SourceError("image directory " + dir.string() + ": " + ec.message());
    return;
  }
  std::vector<fs::path> entries;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) break;
    entries.push_back(it->path());
  }
  std::sort(entries.begin(), entries.end(), [](const fs::path& a, const fs::path& b) {
    return a.filename().native() < b.filename().native();
  });
  for (const fs::path& entry : entries) {
    struct stat est;
    if (::stat(entry.c_str(), &est) != 0) continue;  // dangling link
    if (S_ISDIR(est.st_mode)) {
      walk_directory(entry, visited, out, false);
    } else if (S_ISREG(est.st_mode) && has_image_extension(entry.filename().string())) {
      out->push_back(plain_ref(entry.string(), static_cast<uint64_t>(est.st_size)));
    }
  }
}

}  // namespace

void ListingReport::add(std::string path, std::string message) {
  ++failed;
  if (first_failures.size() < static_cast<size_t>(kMaxReportedFailures)) {
    first_failures.push_back({std::move(path), std::move(message)});
  }
}

std::string archive_member_name(const std::string& shard, const std::string& member) {
  return shard + "::" + member;
}

std::string ImageRef::display_name() const {
  return in_archive() ? archive_member_name(path, member) : path;
}

bool operator==(const ImageRef& a, const ImageRef& b) {
  return a.path == b.path && a.member == b.member && a.offset == b.offset && a.size == b.size;
}

bool has_image_extension(std::string_view name) {
  return ends_with_ci(name, ".jpg") || ends_with_ci(name, ".jpeg") || ends_with_ci(name, ".png");
}

std::vector<ImageRef> list_directory(const std::string& dir) {
  std::vector<ImageRef> out;
  std::set<std::pair<dev_t, ino_t>> visited;
  walk_directory(fs::path(dir), &visited, &out, true);
  std::sort(out.begin(), out.end(),
            [](const ImageRef& a, const ImageRef& b) { return a.path < b.path; });
  return out;
}

std::vector<ImageRef> list_text_file(const std::string& txt_path, ListingReport* report) {
  const fs::path base = fs::path(txt_path).parent_path();
  std::vector<ImageRef> out;
  try {
    files::LineReader lines(txt_path, kMaxImageListBytes, kMaxImageListLine, "the image list");
    std::string line;
    while (lines.next(&line)) {
      const uint64_t line_no = lines.line_number();
      if (line_no == 1 && line.rfind(kUtf8Bom, 0) == 0) line.erase(0, kUtf8Bom.size());
      // Trim surrounding whitespace (and a Windows '\r').
      const size_t first = line.find_first_not_of(" \t\r");
      if (first == std::string::npos || line[first] == '#') continue;
      const size_t last = line.find_last_not_of(" \t\r");
      const fs::path entry(line.substr(first, last - first + 1));
      const std::string resolved = entry.is_absolute() ? entry.string() : (base / entry).string();
      const int64_t size = regular_file_size(resolved);
      if (size < 0) {
        if (report) {
          report->add(resolved, "image list " + txt_path + " line " + std::to_string(line_no) +
                                    ": " + resolved + " is not a regular file (" +
                                    why_not_a_regular_file(resolved) + ")");
        }
        continue;
      }
      out.push_back(plain_ref(resolved, static_cast<uint64_t>(size)));
    }
  } catch (const files::FileError& e) {
    throw SourceError("image list " + txt_path + ": " + e.reason());
  }
  return out;
}

std::vector<ImageRef> list_tar(const std::string& tar_path, ListingReport* report) {
  const TarIndex index = read_tar_index(tar_path);
  std::vector<ImageRef> out;
  for (const TarMember& m : index.members) {
    if (!has_image_extension(m.name)) continue;
    ImageRef ref;
    ref.path = tar_path;
    ref.member = m.name;
    ref.offset = m.offset;
    ref.size = m.size;
    out.push_back(std::move(ref));
  }
  if (!index.truncation.empty()) {
    if (out.empty()) throw SourceError(index.truncation + "; no complete image member before it");
    if (report) {
      const std::string where = index.truncated_member.empty()
                                    ? tar_path
                                    : archive_member_name(tar_path, index.truncated_member);
      report->add(where, index.truncation + "; the " + std::to_string(out.size()) +
                             " image members before it are used");
    }
  }
  return out;
}

std::vector<ImageRef> list_source(const std::string& path, ListingReport* report) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    throw SourceError("image source " + path + ": " + std::strerror(errno) +
                      " (expected a directory, a .txt list, a .tar shard or an image file)");
  }
  std::vector<ImageRef> refs;
  std::string kind;
  if (S_ISDIR(st.st_mode)) {
    refs = list_directory(path);
    kind = "directory (searched recursively for .jpg/.jpeg/.png)";
  } else if (ends_with_ci(path, ".txt")) {
    refs = list_text_file(path, report);
    kind = "image list (no line names an existing file)";
  } else if (ends_with_ci(path, ".tar")) {
    refs = list_tar(path, report);
    kind = "tar shard (no .jpg/.jpeg/.png member)";
  } else if (S_ISREG(st.st_mode) && has_image_extension(path)) {
    refs.push_back(plain_ref(path, static_cast<uint64_t>(st.st_size)));
  } else {
    throw SourceError("image source " + path +
                      " is not a directory, a .txt list, a .tar shard or a .jpg/.jpeg/.png file");
  }
  if (refs.empty()) throw SourceError("image source " + path + " holds no image: empty " + kind);
  return refs;
}

std::vector<ImageRef> list_sources(const std::vector<std::string>& paths, ListingReport* report) {
  if (paths.empty()) throw SourceError("no image source given");
  std::vector<ImageRef> all;
  for (const std::string& path : paths) {
    std::vector<ImageRef> refs = list_source(path, report);
    all.insert(all.end(), std::make_move_iterator(refs.begin()),
               std::make_move_iterator(refs.end()));
  }
  return all;
}

std::vector<ImageRef> shard_refs(const std::vector<ImageRef>& all, int rank, int world_size) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    throw std::invalid_argument("shard_refs: need 0 <= rank < world_size, got rank " +
                                std::to_string(rank) + ", world_size " +
                                std::to_string(world_size));
  }
  std::vector<ImageRef> mine;
  mine.reserve(all.size() / world_size + 1);
  for (size_t i = static_cast<size_t>(rank); i < all.size(); i += static_cast<size_t>(world_size)) {
    mine.push_back(all[i]);
  }
  if (mine.empty()) {
    throw SourceError("rank " + std::to_string(rank) + " of " + std::to_string(world_size) +
                      " gets no image: the sources hold only " + std::to_string(all.size()));
  }
  return mine;
}

std::vector<uint8_t> read_image_bytes(const ImageRef& ref, uint64_t max_bytes) {
  const std::string name = ref.display_name();
  try {
    // A FIFO (or a device) that replaced a photo is refused without blocking
    // the decoder thread (files::RegularFile).
    const files::RegularFile file(ref.path);
    const uint64_t file_size = file.size();
    uint64_t offset = 0, size = file_size;
    if (ref.in_archive()) {
      offset = ref.offset;
      size = ref.size;
      if (offset > file_size || size > file_size - offset) {
        throw SourceError(name + ": member at bytes [" + std::to_string(offset) + ", " +
                          std::to_string(offset + size) + ") lies past the end of the " +
                          std::to_string(file_size) + "-byte shard (changed since listing?)");
      }
    }
    if (size > max_bytes) {
      throw SourceError(name + ": " + std::to_string(size) + " bytes, more than the limit of " +
                        std::to_string(max_bytes));
    }
    std::vector<uint8_t> bytes(size);
    file.read_at(offset, bytes.data(), bytes.size());
    return bytes;
  } catch (const files::FileError& e) {
    throw SourceError(name + ": " + e.reason());
  }
}

}  // namespace obsaug

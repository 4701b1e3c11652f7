#include "engine/source/tar_reader.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "engine/source/image_source.h"
#include "files/bounded_file.h"

namespace obsaug {

namespace {

constexpr uint64_t kBlock = 512;
// Long names and pax headers are metadata: a few KiB at most in practice.
constexpr uint64_t kMaxMetadataBytes = 1 << 20;

// Header field offsets and lengths (POSIX ustar).
constexpr size_t kNameOff = 0, kNameLen = 100;
constexpr size_t kSizeOff = 124, kSizeLen = 12;
constexpr size_t kChecksumOff = 148, kChecksumLen = 8;
constexpr size_t kTypeOff = 156;
constexpr size_t kMagicOff = 257;
constexpr size_t kPrefixOff = 345, kPrefixLen = 155;

uint64_t round_up_to_block(uint64_t n) { return (n + kBlock - 1) / kBlock * kBlock; }

class TarScanner {
 public:
  explicit TarScanner(const std::string& path) : path_(path) {}

  TarIndex scan() {
    try {  // a FIFO or device named as a shard is refused without blocking
      file_.emplace(path_, "the shard");
    } catch (const files::FileError& e) {
      fail_plain(e.reason());
    }
    file_size_ = file_->size();
    if (file_size_ == 0) fail_plain("empty file, not a tar archive");

    TarIndex index;
    std::string long_name, pax_path;
    int64_t pax_size = -1;
    uint64_t pos = 0;
    unsigned char header[kBlock];
    while (true) {
      if (pos == file_size_) break;  // no end-of-archive blocks: tolerated
      if (file_size_ - pos < kBlock) {
        index.truncation = truncated(
            pos, "truncated header (" + std::to_string(file_size_ - pos) + " bytes left)");
        break;
      }
      read_at(pos, header, kBlock);
      if (all_zero(header)) break;  // end of archive
      check_checksum(header, pos);

      const char type = static_cast<char>(header[kTypeOff]);
      uint64_t size = parse_number(header + kSizeOff, kSizeLen, pos, "size");
      if (type == 'x' || type == 'g' || type == 'L' || type == 'K') {
        // Metadata entries: their size field is authoritative.
      } else if (pax_size >= 0) {
        size = static_cast<uint64_t>(pax_size);
      }
      const uint64_t data = pos + kBlock;
      // Hard links, symlinks, devices, directories and FIFOs carry no data.
      const bool has_data =
          !(type == '1' || type == '2' || type == '3' || type == '4' || type == '5' || type == '6');
      if (!has_data) size = 0;
      const bool regular = type == '0' || type == '\0' || type == '7';
      const std::string name = !pax_path.empty()    ? pax_path
                               : !long_name.empty() ? long_name
                                                    : header_name(header);
      if (size > file_size_ - data) {
        index.truncation = truncated(pos, "member data of " + std::to_string(size) +
                                              " bytes runs past the end of the " +
                                              std::to_string(file_size_) + "-byte file");
        if (regular) index.truncated_member = name;
        break;
      }

      if (type == 'L') {
        long_name = read_metadata(data, size, pos, "GNU long name");
        long_name = long_name.substr(0, long_name.find('\0'));
      } else if (type == 'x') {
        parse_pax(read_metadata(data, size, pos, "pax header"), pos, &pax_path, &pax_size);
      } else if (type == 'g' || type == 'K') {
        // Global pax header, GNU long link name: nothing we use.
      } else {
        if (regular) {
          if (name.empty()) fail(pos, "member with an empty name");
          index.members.push_back(TarMember{name, data, size});
        }
        long_name.clear();
        pax_path.clear();
        pax_size = -1;
      }
      // The last member's padding may be missing; the next header check
      // catches anything else.
      pos = std::min(data + round_up_to_block(size), file_size_);
    }
    return index;
  }

 private:
  // TarIndex::truncation's text for a cut at or after the header at `header_pos`.
  std::string truncated(uint64_t header_pos, const std::string& what) const {
    return "tar shard " + path_ + ": truncated at the header at byte " +
           std::to_string(header_pos) + ": " + what + " (an interrupted download?)";
  }

  [[noreturn]] void fail_plain(const std::string& what) const {
    throw SourceError("tar shard " + path_ + ": " + what);
  }
  [[noreturn]] void fail(uint64_t header_pos, const std::string& what) const {
    throw SourceError("tar shard " + path_ + ": malformed header at byte " +
                      std::to_string(header_pos) + ": " + what);
  }

  void read_at(uint64_t pos, void* buffer, uint64_t n) {
    try {
      file_->read_at(pos, buffer, n);
    } catch (const files::FileError& e) {
      fail_plain(e.reason());
    }
  }

  static bool all_zero(const unsigned char* block) {
    for (uint64_t i = 0; i < kBlock; ++i)
      if (block[i] != 0) return false;
    return true;
  }

  void check_checksum(const unsigned char* h, uint64_t pos) const {
    const uint64_t stored = parse_number(h + kChecksumOff, kChecksumLen, pos, "checksum");
    uint64_t unsigned_sum = 0;
    int64_t signed_sum = 0;
    for (uint64_t i = 0; i < kBlock; ++i) {
      const bool in_field = i >= kChecksumOff && i < kChecksumOff + kChecksumLen;
      const unsigned char c = in_field ? ' ' : h[i];
      unsigned_sum += c;
      signed_sum += static_cast<signed char>(c);
    }
    if (stored != unsigned_sum && static_cast<int64_t>(stored) != signed_sum) {
      fail(pos, "checksum " + std::to_string(stored) + " does not match the header's " +
                    std::to_string(unsigned_sum) + " (not a tar archive, or corrupt)");
    }
  }

  // Octal digits, optionally space-padded in front and NUL/space terminated;
  // or GNU base-256 (high bit of the first byte set, positive values only).
  uint64_t parse_number(const unsigned char* field, size_t len, uint64_t pos,
                        const char* what) const {
    if (field[0] & 0x80) {
      if (field[0] & 0x40) fail(pos, std::string("negative base-256 ") + what + " field");
      uint64_t v = field[0] & 0x3f;
      for (size_t i = 1; i < len; ++i) {
        if (v >> 55) fail(pos, std::string(what) + " field overflows 64 bits");
        v = (v << 8) | field[i];
      }
      return v;
    }
    size_t i = 0;
    while (i < len && field[i] == ' ') ++i;
    uint64_t v = 0;
    size_t digits = 0;
    for (; i < len && field[i] >= '0' && field[i] <= '7'; ++i, ++digits) {
      if (v >> 60) fail(pos, std::string(what) + " field overflows 64 bits");
      v = v * 8 + (field[i] - '0');
    }
    for (; i < len; ++i) {
      if (field[i] != ' ' && field[i] != '\0') {
        fail(pos, std::string("non-octal byte ") + std::to_string(field[i]) + " in the " + what +
                      " field");
      }
    }
    if (digits == 0) fail(pos, std::string("empty ") + what + " field");
    return v;
  }

  std::string read_metadata(uint64_t data, uint64_t size, uint64_t pos, const char* what) {
    if (size > kMaxMetadataBytes) {
      fail(pos, std::string(what) + " of " + std::to_string(size) + " bytes is implausibly large");
    }
    std::string s(size, '\0');
    if (size) read_at(data, s.data(), size);
    return s;
  }

  // Records "LEN key=value\n" where LEN counts the whole record.
  void parse_pax(const std::string& text, uint64_t pos, std::string* path, int64_t* size) const {
    size_t at = 0;
    while (at < text.size()) {
      if (text[at] == '\0') break;  // padding
      size_t len = 0, i = at;
      while (i < text.size() && text[i] >= '0' && text[i] <= '9' && len < kMaxMetadataBytes) {
        len = len * 10 + static_cast<size_t>(text[i++] - '0');
      }
      if (i == at || i >= text.size() || text[i] != ' ' || len <= i - at + 1 ||
          len > text.size() - at || text[at + len - 1] != '\n') {
        fail(pos, "malformed pax record at offset " + std::to_string(at));
      }
      const std::string record = text.substr(i + 1, at + len - 1 - (i + 1));
      const size_t eq = record.find('=');
      if (eq == std::string::npos) fail(pos, "pax record without '='");
      const std::string key = record.substr(0, eq), value = record.substr(eq + 1);
      if (key == "path") {
        *path = value;
      } else if (key == "size") {
        if (value.empty() || value.size() > 19 ||
            value.find_first_not_of("0123456789") != std::string::npos) {
          fail(pos, "pax size record '" + value + "' is not a decimal number");
        }
        *size = static_cast<int64_t>(std::stoull(value));
      }
      at += len;
    }
  }

  static std::string field_string(const unsigned char* field, size_t len) {
    size_t n = 0;
    while (n < len && field[n] != '\0') ++n;
    return std::string(reinterpret_cast<const char*>(field), n);
  }

  static std::string header_name(const unsigned char* h) {
    std::string name = field_string(h + kNameOff, kNameLen);
    if (std::memcmp(h + kMagicOff, "ustar\0", 6) == 0) {  // POSIX: prefix field
      const std::string prefix = field_string(h + kPrefixOff, kPrefixLen);
      if (!prefix.empty()) name = prefix + "/" + name;
    }
    return name;
  }

  std::string path_;
  std::optional<files::RegularFile> file_;
  uint64_t file_size_ = 0;
};

}  // namespace

TarIndex read_tar_index(const std::string& path) { return TarScanner(path).scan(); }

}  // namespace obsaug

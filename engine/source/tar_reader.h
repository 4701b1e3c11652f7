// A small, defensive reader of tar archives (WebDataset shards): lists the
// regular-file members with the byte range of their data, so that members
// can later be read in place (read_image_bytes) without extraction.
//
// Accepted: POSIX ustar and pre-POSIX (v7) headers, GNU long names ('L'),
// pax extended headers ('x', the `path` and `size` records; 'g' is skipped),
// GNU base-256 size fields. Every header is validated before use: its
// checksum (unsigned or, as some old tars wrote it, signed), its octal
// fields, and the member's data range against the file size. Anything
// malformed raises SourceError naming the shard and the header's byte
// offset; the reader never reads out of bounds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace obsaug {

struct TarMember {
  std::string name;
  uint64_t offset = 0;  // first byte of the member's data in the shard
  uint64_t size = 0;
};

// Regular-file members of the tar at `path`, in archive order. Throws
// SourceError when the file cannot be read or a header is malformed.
std::vector<TarMember> read_tar_index(const std::string& path);

}  // namespace obsaug

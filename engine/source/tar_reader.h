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
//
// Truncation is not malformation: a shard that ends inside a header or
// inside a member's data (an interrupted download) is listed up to the cut,
// and the cut is returned in TarIndex::truncation for the caller to count
// (list_tar in image_source.h reports it, and refuses the shard only when
// nothing complete precedes the cut). A shard without end-of-archive blocks
// is complete.
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

struct TarIndex {
  std::vector<TarMember> members;  // complete regular-file members, in archive order
  // Empty, or the message (naming the shard and the byte offset of the cut
  // header) saying that the archive ends inside a header or a member's data.
  std::string truncation;
  std::string truncated_member;  // the member cut short, when its header was whole
};

// The members of the tar at `path`. Throws SourceError when the file cannot
// be read or is empty, or a header is malformed.
TarIndex read_tar_index(const std::string& path);

}  // namespace obsaug

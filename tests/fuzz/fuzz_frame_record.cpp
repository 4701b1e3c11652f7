// libFuzzer target: the frame codecs' decoder (kernels/codecs/frame_codec.h)
// on arbitrary records. Any record must decode or be refused with a status
// (std::invalid_argument from decode); the decoders of every ISA the CPU has
// (portable, BMI2, AVX-512) must agree on the status, the failing tile and
// the frame; a crash, a sanitizer report or a disagreement is a finding.
//
// Input: byte 0 flags, bytes 1..3 the frame shape (C 1..4, H and W 1..48),
// then either (flags bit 2 clear) the record itself, or (bit 2 set) a frame
// and a reference (the next bytes, repeated as needed) that one of the
// codecs encodes, followed by (position, value) pairs written over the
// record: records with a valid structure for the fuzzer to break.
//   bit 0  decode with a reference (a delta record needs one)
//   bit 1  refresh the checksum after the changes (else most changes stop there)
//   bit 2  encode first
//   bits 3..5  the codec: packed-1, packed-3, packed-4, packed-255, stored,
//              lz4, zstd-1, packed-4 (intra)
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "kernels/codecs/frame_codec.h"

namespace {

using obsaug::codecs::CodecIsa;
using obsaug::codecs::DecodeOutcome;
using obsaug::codecs::FrameDecoder;
using obsaug::codecs::FrameEncoder;
using obsaug::codecs::FrameShape;

const char* const kCodecs[8] = {"packed-1", "packed-3", "packed-4", "packed-255",
                                "stored",   "lz4",      "zstd-1",   "packed-4"};

void refresh_checksum(std::vector<uint8_t>& record) {
  using namespace obsaug::codecs;
  if (static_cast<int64_t>(record.size()) < kRecordHeaderBytes) return;
  store_u32(record.data() + kChecksumOffset,
            finish_checksum(checksum_terms(record.data(), record.size(), 0, 1), record.size()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  const uint8_t flags = data[0];
  const FrameShape shape{1 + data[1] % 4, 1 + data[2] % 48, 1 + data[3] % 48};
  const size_t n = static_cast<size_t>(shape.bytes());
  const uint8_t* rest = data + 4;
  const size_t rest_size = size - 4;
  std::vector<uint8_t> reference(n);
  for (size_t i = 0; i < n; ++i) reference[i] = rest_size ? rest[(i * 7 + 3) % rest_size] : 0;
  std::vector<uint8_t> record;
  if ((flags & 4) == 0) {
    record.assign(rest, rest + rest_size);  // exactly its size: ASan sees a read past it
  } else {
    if (rest_size == 0) return 0;
    std::vector<uint8_t> frame(n);
    for (size_t i = 0; i < n; ++i)
      frame[i] = static_cast<uint8_t>(rest[i % rest_size] + (i / rest_size));
    const int codec = (flags >> 3) & 7;
    FrameEncoder enc(obsaug::codecs::parse_codec_spec(kCodecs[codec]), shape);
    const obsaug::codecs::RecordBytes r =
        enc.encode(frame.data(), (flags & 1) && codec != 7 ? reference.data() : nullptr);
    record.assign(r.data, r.data + r.size);
    for (size_t k = n % rest_size; k + 1 < rest_size && !record.empty(); k += 2)
      record[(rest[k] * 31u + k) % record.size()] = rest[k + 1];
    if (rest_size % 5 == 0) record.resize(record.size() - rest_size % record.size() % 16);
  }
  if (flags & 2) refresh_checksum(record);
  const uint8_t* ref = (flags & 1) ? reference.data() : nullptr;
  // Every ISA this CPU has gives the portable decoder's outcome and frame.
  std::vector<uint8_t> want(n), out(n);
  FrameDecoder portable(shape, CodecIsa::kPortable);
  const DecodeOutcome a =
      portable.try_decode(record.data(), static_cast<int64_t>(record.size()), ref, want.data());
  for (CodecIsa isa : obsaug::codecs::available_codec_isas()) {
    FrameDecoder dec(shape, isa);
    const DecodeOutcome b =
        dec.try_decode(record.data(), static_cast<int64_t>(record.size()), ref, out.data());
    if (a.status != b.status || a.tile != b.tile) __builtin_trap();
    if (a.status == obsaug::codecs::RecordStatus::kOk && out != want) __builtin_trap();
  }
  try {
    portable.decode(record.data(), static_cast<int64_t>(record.size()), ref, out.data());
    if (a.status != obsaug::codecs::RecordStatus::kOk) __builtin_trap();
  } catch (const std::invalid_argument&) {
    if (a.status == obsaug::codecs::RecordStatus::kOk) __builtin_trap();
  }
  return 0;
}

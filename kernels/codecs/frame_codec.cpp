// kernels/codecs/frame_codec.h: the codecs behind one API, the records'
// checks and their messages.
#include "kernels/codecs/frame_codec.h"

#include <lz4.h>
#include <lz4hc.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "kernels/cpu_clones.h"

namespace obsaug {
namespace codecs {
namespace {

constexpr int kLz4AccelerationMax = 65537;  // LZ4_ACCELERATION_MAX, defined in lz4.c only

struct CodecInfo {
  Codec codec;
  const char* name;
  int default_level;
  int min_level;
  int max_level;  // for zstd: ZSTD_maxCLevel() at run time
  const char* level_means;
};
// One table: names, default levels and ranges.
const CodecInfo kCodecs[] = {
    {Codec::kStored, "stored", 0, 0, 0, "no level"},
    {Codec::kPacked, "packed", kDefaultTileRows, 1, 255, "rows per tile"},
    {Codec::kLz4, "lz4", 1, 1, kLz4AccelerationMax, "acceleration"},
    {Codec::kLz4Hc, "lz4hc", 9, 1, LZ4HC_CLEVEL_MAX, "level"},
    {Codec::kZstd, "zstd", 3, 1, 22, "level"},
};
constexpr const char* kPlainSuffix = "-plain";
constexpr const char* kGrammar =
    "stored, packed[-<rows per tile 1..255>], lz4[-<acceleration>], lz4hc[-<level 1..12>] or "
    "zstd[-<level 1..22>], the last three optionally followed by -plain";

const CodecInfo& info(Codec codec) {
  for (const CodecInfo& c : kCodecs)
    if (c.codec == codec) return c;
  throw std::invalid_argument("unknown codec id " + std::to_string(static_cast<int>(codec)));
}
int max_level(const CodecInfo& c) {
  return c.codec == Codec::kZstd ? std::min(c.max_level, ZSTD_maxCLevel()) : c.max_level;
}
bool has_plain(Codec codec) {
  return codec == Codec::kLz4 || codec == Codec::kLz4Hc || codec == Codec::kZstd;
}

std::string shape_text(FrameShape s) {
  return std::to_string(s.channels) + "x" + std::to_string(s.height) + "x" +
         std::to_string(s.width);
}

void check_shape(FrameShape s, const char* who) {
  const bool sides = s.channels >= 1 && s.channels <= 0xFFFF && s.height >= 1 &&
                     s.height <= 0xFFFF && s.width >= 1 && s.width <= 0xFFFF;
  if (!sides || s.bytes() > kMaxFrameBytes)
    throw std::invalid_argument(
        std::string(who) + ": a frame shape must have C, H and W in 1..65535 " + "and at most " +
        std::to_string(kMaxFrameBytes) + " bytes, got " + shape_text(s));
}

void check_codec_isa(CodecIsa isa, const char* who) {
  const std::vector<CodecIsa> have = available_codec_isas();
  if (std::find(have.begin(), have.end(), isa) == have.end())
    throw std::invalid_argument(std::string(who) + ": this CPU (or build) has no " +
                                codec_isa_name(isa) + " loops; the widest it has are " +
                                codec_isa_name(widest_codec_isa()));
}

const char* status_text(RecordStatus s) {
  switch (s) {
    case RecordStatus::kOk:
      return "no error";
    case RecordStatus::kTooShort:
      return "it is shorter than the 16-byte record header (truncated)";
    case RecordStatus::kVersion:
      return "its format version is not the one this build reads";
    case RecordStatus::kCodec:
      return "its codec byte names no codec this decoder has";
    case RecordStatus::kMode:
      return "its mode byte is not a mode its codec has";
    case RecordStatus::kShape:
      return "its frame shape is not the decoder's";
    case RecordStatus::kHeaderField:
      return "a header field (tile rows, offset bytes, reserved) is out of range for its codec";
    case RecordStatus::kChecksum:
      return "its checksum does not match its bytes (corrupt or truncated)";
    case RecordStatus::kNoReference:
      return "it is a delta record and no reference frame was given";
    case RecordStatus::kPayloadSize:
      return "its payload's size does not fit its codec (truncated or corrupt)";
    case RecordStatus::kTableEnd:
      return "its last tile does not end where the record ends (truncated or corrupt)";
    case RecordStatus::kTileModes:
      return "its tile modes mark tiles past the last one";
    case RecordStatus::kTileSpan:
      return "a tile's span in the tile table runs backwards or past the data";
    case RecordStatus::kTileShort:
      return "a tile's bitmap, fields, masks or values run past its span";
    case RecordStatus::kTileLong:
      return "a tile's span holds bytes after its values";
    case RecordStatus::kTileBitmap:
      return "a tile's bitmap marks blocks past its last block";
    case RecordStatus::kTilePadding:
      return "a tile has a non-zero code past a row's end or in the padding of its fields or "
             "values";
    case RecordStatus::kTileMask:
      return "a sparse block's mask is empty or marks codes past its row's end";
    case RecordStatus::kLibrary:
      return "the codec's library refused its payload";
    case RecordStatus::kDecodedSize:
      return "its payload decodes to another size than the frame's";
    case RecordStatus::kCount:
      break;
  }
  return "an unknown status";
}

[[noreturn]] void throw_record_error(RecordStatus status, const uint8_t* record, int64_t size,
                                     FrameShape expect, int64_t tile,
                                     const std::string& detail = "") {
  // The header's fields only where the record is at least a header long.
  std::string message = record_error_message(status, size, expect, tile);
  if (record != nullptr && size >= kRecordHeaderBytes) {
    const RecordHeader h = read_header(record);
    std::ostringstream fields;
    fields << " (header: version " << int{h.version} << ", codec "
           << int{static_cast<uint8_t>(h.codec)} << ", mode " << int{static_cast<uint8_t>(h.mode)}
           << ", tile rows " << int{h.tile_rows} << ", shape " << shape_text(h.shape)
           << ", offset bytes " << int{h.offset_bytes} << ")";
    message += fields.str();
  }
  if (!detail.empty()) message += ": " + detail;
  throw std::invalid_argument(message);
}

OBSAUG_CLONES uint32_t record_checksum(const uint8_t* record, int64_t size) {
  return finish_checksum(checksum_terms(record, static_cast<uint64_t>(size), 0, 1),
                         static_cast<uint64_t>(size));
}

}  // namespace

CodecSpec resolved(const CodecSpec& spec) {
  const CodecInfo& c = info(spec.codec);
  CodecSpec out = spec;
  if (out.level == 0) out.level = c.default_level;
  if (out.level < c.min_level || out.level > max_level(c))
    throw std::invalid_argument(std::string("codec ") + c.name + ": " + c.level_means + " " +
                                std::to_string(spec.level) + " is out of range " +
                                std::to_string(c.min_level) + ".." + std::to_string(max_level(c)));
  if (!out.predict_intra && !has_plain(out.codec))
    throw std::invalid_argument(std::string("codec ") + c.name +
                                " has no plain variant (only lz4, lz4hc and zstd do)");
  return out;
}

CodecSpec parse_codec_spec(const std::string& name) {
  std::string rest = name;
  CodecSpec spec;
  const size_t suffix = std::strlen(kPlainSuffix);
  if (rest.size() > suffix && rest.compare(rest.size() - suffix, suffix, kPlainSuffix) == 0) {
    spec.predict_intra = false;
    rest.resize(rest.size() - suffix);
  }
  const size_t dash = rest.find('-');
  const std::string base = rest.substr(0, dash);
  const CodecInfo* found = nullptr;
  for (const CodecInfo& c : kCodecs)
    if (base == c.name) found = &c;
  if (found == nullptr)
    throw std::invalid_argument("unknown codec '" + name + "': expected " + kGrammar);
  spec.codec = found->codec;
  if (dash != std::string::npos) {
    const std::string level = rest.substr(dash + 1);
    const bool digits =
        !level.empty() && level.size() <= 6 &&
        std::all_of(level.begin(), level.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
    if (!digits || found->codec == Codec::kStored)
      throw std::invalid_argument("codec '" + name + "': '" + level + "' is not a " +
                                  found->level_means + " of " + found->name + "; expected " +
                                  kGrammar);
    spec.level = std::stoi(level);
    if (spec.level == 0)
      throw std::invalid_argument("codec '" + name + "': " + found->level_means +
                                  " 0 is out of range; expected " + kGrammar);
  }
  return resolved(spec);
}

std::string codec_spec_name(const CodecSpec& spec) {
  const CodecSpec s = resolved(spec);
  const CodecInfo& c = info(s.codec);
  std::string name = c.name;
  if (s.codec != Codec::kStored) name += "-" + std::to_string(s.level);
  if (!s.predict_intra) name += kPlainSuffix;
  return name;
}

RecordInfo read_record_info(const uint8_t* record, int64_t size) {
  if (size < kRecordHeaderBytes)
    throw_record_error(RecordStatus::kTooShort, record, size, FrameShape{}, -1);
  const RecordHeader h = read_header(record);
  const RecordStatus s = check_header(h, h.shape);
  if (s != RecordStatus::kOk) throw_record_error(s, record, size, h.shape, -1);
  return RecordInfo{h.codec, h.mode, h.shape};
}

std::string record_error_message(RecordStatus status, int64_t record_size, FrameShape expect,
                                 int64_t tile) {
  std::string m = "frame record of " + std::to_string(record_size) + " bytes for a " +
                  shape_text(expect) + " frame does not decode: " + status_text(status);
  if (tile >= 0) m += " (tile " + std::to_string(tile) + ")";
  return m;
}

OBSAUG_CLONES void residual_codes(FrameShape shape, const uint8_t* __restrict frame,
                                  const uint8_t* __restrict reference, uint8_t* __restrict codes) {
  const int64_t n = shape.bytes();
  if (reference != nullptr) {
    for (int64_t i = 0; i < n; ++i)
      codes[i] = zigzag_byte(static_cast<uint8_t>(frame[i] - reference[i]));
    return;
  }
  const int64_t w = shape.width;
  for (int64_t row = 0; row < n; row += w) {
    const bool plane_top = (row / w) % shape.height == 0;  // a plane is one tile
    codes[row] = zigzag_byte(static_cast<uint8_t>(frame[row] - (plane_top ? 0 : frame[row - w])));
    for (int64_t x = 1; x < w; ++x)
      codes[row + x] = zigzag_byte(static_cast<uint8_t>(frame[row + x] - frame[row + x - 1]));
  }
}

OBSAUG_CLONES void undo_residual_codes(FrameShape shape, const uint8_t* __restrict reference,
                                       uint8_t* __restrict frame) {
  const int64_t n = shape.bytes();
  if (reference != nullptr) {
    for (int64_t i = 0; i < n; ++i)
      frame[i] = static_cast<uint8_t>(reference[i] + unzigzag_byte(frame[i]));
    return;
  }
  const int64_t w = shape.width;
  for (int64_t row = 0; row < n; row += w) {
    uint8_t left = (row / w) % shape.height == 0 ? 0 : frame[row - w];
    for (int64_t x = 0; x < w; x += kBlockCodes) {
      const int k = static_cast<int>(std::min<int64_t>(kBlockCodes, w - x));
      const uint64_t px = prefix_lanes(unzigzag_lanes(load_lanes(frame + row + x, k)), left);
      store_lanes(frame + row + x, px, k);
      left = static_cast<uint8_t>(px >> (8 * (k - 1)));
    }
  }
}

// --- FrameEncoder -------------------------------------------------------------

struct FrameEncoder::Libraries {
  ZSTD_CCtx* zstd = nullptr;
  std::vector<char> lz4_state;
  ~Libraries() { ZSTD_freeCCtx(zstd); }
};

FrameEncoder::FrameEncoder(const CodecSpec& spec, FrameShape shape, CodecIsa isa)
    : spec_(resolved(spec)), shape_(shape), isa_(isa), libraries_(new Libraries) {
  check_shape(shape, "FrameEncoder");
  check_codec_isa(isa, "FrameEncoder");
  const int64_t n = shape.bytes();
  int64_t capacity = kRecordHeaderBytes + n;
  switch (spec_.codec) {
    case Codec::kStored:
      break;
    case Codec::kPacked:
      capacity = packed_bound(shape, spec_.level);
      break;
    case Codec::kLz4:
      libraries_->lz4_state.resize(static_cast<size_t>(LZ4_sizeofState()));
      capacity = kRecordHeaderBytes + LZ4_compressBound(static_cast<int>(n));
      break;
    case Codec::kLz4Hc:
      libraries_->lz4_state.resize(static_cast<size_t>(LZ4_sizeofStateHC()));
      capacity = kRecordHeaderBytes + LZ4_compressBound(static_cast<int>(n));
      break;
    case Codec::kZstd: {
      libraries_->zstd = ZSTD_createCCtx();
      if (libraries_->zstd == nullptr) throw std::bad_alloc();
      ZSTD_CCtx_setParameter(libraries_->zstd, ZSTD_c_compressionLevel, spec_.level);
      ZSTD_CCtx_setParameter(libraries_->zstd, ZSTD_c_checksumFlag, 0);  // the record has its own
      ZSTD_CCtx_setParameter(libraries_->zstd, ZSTD_c_dictIDFlag, 0);
      capacity =
          kRecordHeaderBytes + static_cast<int64_t>(ZSTD_compressBound(static_cast<size_t>(n)));
      break;
    }
  }
  record_.resize(static_cast<size_t>(std::max(capacity, kRecordHeaderBytes + n)));
  if (spec_.codec != Codec::kStored && spec_.codec != Codec::kPacked)
    residual_.resize(static_cast<size_t>(n));
}

FrameEncoder::~FrameEncoder() = default;

int64_t FrameEncoder::max_record_bytes() const { return kRecordHeaderBytes + shape_.bytes(); }

RecordBytes FrameEncoder::finish(int64_t size) {
  store_u32(record_.data() + kChecksumOffset, record_checksum(record_.data(), size));
  return RecordBytes{record_.data(), size};
}

RecordBytes FrameEncoder::store(const uint8_t* frame) {
  RecordHeader h{};
  h.version = kRecordVersion;
  h.codec = RecordCodec::kStored;
  h.mode = RecordMode::kPlain;
  h.shape = shape_;
  write_header(record_.data(), h);
  std::memcpy(record_.data() + kRecordHeaderBytes, frame, static_cast<size_t>(shape_.bytes()));
  return finish(max_record_bytes());
}

RecordBytes FrameEncoder::encode(const uint8_t* frame, const uint8_t* reference) {
  const int64_t n = shape_.bytes();
  if (spec_.codec == Codec::kStored) return store(frame);
  if (spec_.codec == Codec::kPacked) {
    const int64_t size =
        encode_packed(isa_, shape_, frame, reference, spec_.level, packed_, record_.data());
    return size == 0 || size >= max_record_bytes() ? store(frame) : finish(size);
  }
  const bool residual = reference != nullptr || spec_.predict_intra;
  const uint8_t* input = frame;
  if (residual) {
    residual_codes(shape_, frame, reference, residual_.data());
    input = residual_.data();
  }
  uint8_t* payload = record_.data() + kRecordHeaderBytes;
  const int64_t capacity = static_cast<int64_t>(record_.size()) - kRecordHeaderBytes;
  int64_t payload_size = 0;
  RecordCodec codec = RecordCodec::kLz4;
  switch (spec_.codec) {
    case Codec::kLz4:
      payload_size = LZ4_compress_fast_extState(
          libraries_->lz4_state.data(), reinterpret_cast<const char*>(input),
          reinterpret_cast<char*>(payload), static_cast<int>(n), static_cast<int>(capacity),
          spec_.level);
      break;
    case Codec::kLz4Hc:
      payload_size = LZ4_compress_HC_extStateHC(
          libraries_->lz4_state.data(), reinterpret_cast<const char*>(input),
          reinterpret_cast<char*>(payload), static_cast<int>(n), static_cast<int>(capacity),
          spec_.level);
      break;
    default: {
      codec = RecordCodec::kZstd;
      const size_t r = ZSTD_compress2(libraries_->zstd, payload, static_cast<size_t>(capacity),
                                      input, static_cast<size_t>(n));
      payload_size = ZSTD_isError(r) ? 0 : static_cast<int64_t>(r);
      break;
    }
  }
  if (payload_size <= 0 || kRecordHeaderBytes + payload_size >= max_record_bytes())
    return store(frame);
  RecordHeader h{};
  h.version = kRecordVersion;
  h.codec = codec;
  h.mode = reference != nullptr ? RecordMode::kDelta
                                : (residual ? RecordMode::kIntra : RecordMode::kPlain);
  h.shape = shape_;
  write_header(record_.data(), h);
  return finish(kRecordHeaderBytes + payload_size);
}

// --- FrameDecoder -------------------------------------------------------------

struct FrameDecoder::Libraries {
  ZSTD_DCtx* zstd = nullptr;
  ~Libraries() { ZSTD_freeDCtx(zstd); }
};

FrameDecoder::FrameDecoder(FrameShape shape, CodecIsa isa)
    : shape_(shape), isa_(isa), libraries_(new Libraries) {
  check_shape(shape, "FrameDecoder");
  check_codec_isa(isa, "FrameDecoder");
}

FrameDecoder::~FrameDecoder() = default;

DecodeOutcome FrameDecoder::try_decode(const uint8_t* record, int64_t size,
                                       const uint8_t* reference, uint8_t* out) {
  const int64_t n = shape_.bytes();
  if (size < kRecordHeaderBytes) return {RecordStatus::kTooShort};
  const RecordHeader h = read_header(record);
  RecordStatus s = check_header(h, shape_);
  if (s != RecordStatus::kOk) return {s};
  if (record_checksum(record, size) != h.checksum) return {RecordStatus::kChecksum};
  const bool delta = h.mode == RecordMode::kDelta;
  if (delta && reference == nullptr) return {RecordStatus::kNoReference};
  const uint8_t* payload = record + kRecordHeaderBytes;
  const int64_t payload_size = size - kRecordHeaderBytes;
  switch (h.codec) {
    case RecordCodec::kStored:
      if (payload_size != n) return {RecordStatus::kPayloadSize};
      std::memcpy(out, payload, static_cast<size_t>(n));
      return {};
    case RecordCodec::kPacked: {
      PackedLayout layout;
      s = packed_layout(record, static_cast<uint64_t>(size), h, &layout);
      if (s != RecordStatus::kOk) return {s};
      const TileStatus t = decode_packed(isa_, layout, reference, out, scratch_);
      return {t.status, t.tile};
    }
    case RecordCodec::kLz4: {
      if (payload_size > std::numeric_limits<int>::max()) return {RecordStatus::kPayloadSize};
      const int r =
          LZ4_decompress_safe(reinterpret_cast<const char*>(payload), reinterpret_cast<char*>(out),
                              static_cast<int>(payload_size), static_cast<int>(n));
      if (r < 0) return {RecordStatus::kLibrary, -1, "LZ4_decompress_safe failed"};
      if (r != n) return {RecordStatus::kDecodedSize, -1, "LZ4 decoded fewer bytes"};
      break;
    }
    case RecordCodec::kZstd: {
      if (libraries_->zstd == nullptr) {
        libraries_->zstd = ZSTD_createDCtx();
        if (libraries_->zstd == nullptr) throw std::bad_alloc();
      }
      const size_t r = ZSTD_decompressDCtx(libraries_->zstd, out, static_cast<size_t>(n), payload,
                                           static_cast<size_t>(payload_size));
      if (ZSTD_isError(r)) return {RecordStatus::kLibrary, -1, ZSTD_getErrorName(r)};
      if (static_cast<int64_t>(r) != n)
        return {RecordStatus::kDecodedSize, -1, "zstd decoded fewer bytes"};
      break;
    }
  }
  if (h.mode != RecordMode::kPlain) undo_residual_codes(shape_, delta ? reference : nullptr, out);
  return {};
}

void FrameDecoder::decode(const uint8_t* record, int64_t size, const uint8_t* reference,
                          uint8_t* out) {
  const DecodeOutcome o = try_decode(record, size, reference, out);
  if (o.status != RecordStatus::kOk)
    throw_record_error(o.status, record, size, shape_, o.tile, o.detail ? o.detail : "");
}

}  // namespace codecs
}  // namespace obsaug

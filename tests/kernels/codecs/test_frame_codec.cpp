// kernels/codecs/frame_codec.h round trips, bit for bit: the committed real
// frames (always) and data/frames (where benchmarks/capture_frames.py wrote
// them), intra and delta (against the predecessor and against a key), every
// codec, both instruction sets of the packed codec (the same records and the
// same frames); noise stored; constant frames; edge sizes; the names of the
// codecs and the checks of shapes.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/codecs/frame_codec.h"
#include "kernels/codecs/packed.h"
#include "tests/kernels/codecs/codec_test_util.h"

namespace obsaug {
namespace codecs {
namespace {

using testing::FrameSet;

// Encodes frames[i] against `reference` (or intra), checks that every
// decoder of every ISA gives the frame back, and returns the record.
std::vector<uint8_t> round_trip(const std::string& codec, CodecIsa isa, FrameShape shape,
                                const uint8_t* frame, const uint8_t* reference,
                                const std::string& what) {
  FrameEncoder enc(parse_codec_spec(codec), shape, isa);
  const std::vector<uint8_t> record = testing::to_vector(enc.encode(frame, reference));
  EXPECT_LE(static_cast<int64_t>(record.size()), enc.max_record_bytes()) << what;
  for (CodecIsa dec_isa : testing::isas()) {
    FrameDecoder dec(shape, dec_isa);
    std::vector<uint8_t> out(static_cast<size_t>(shape.bytes()), 0xA5);
    dec.decode(record.data(), static_cast<int64_t>(record.size()), reference, out.data());
    EXPECT_EQ(0, std::memcmp(out.data(), frame, out.size()))
        << what << " decoded by " << codec_isa_name(dec_isa);
  }
  return record;
}

void round_trip_sequence(const FrameSet& f, const std::string& codec, CodecIsa isa, int key_every) {
  for (int64_t i = 0; i < f.count; ++i) {
    const std::string what =
        f.name + " frame " + std::to_string(i) + " " + codec + " " + codec_isa_name(isa);
    const int64_t key = i / key_every * key_every;
    round_trip(codec, isa, f.shape, f.frame(i), nullptr, what + " intra");
    if (i > 0) round_trip(codec, isa, f.shape, f.frame(i), f.frame(i - 1), what + " delta prev");
    if (i != key) round_trip(codec, isa, f.shape, f.frame(i), f.frame(key), what + " delta key");
  }
}

TEST(FrameCodec, FixtureFramesRoundTripInEveryCodecAndMode) {
  const std::vector<FrameSet> sets = testing::fixture_frames();
  ASSERT_EQ(sets.size(), 4u) << "tests/kernels/codecs/data holds walker, cartpole, Pong, MsPacman";
  for (const FrameSet& f : sets)
    for (const std::string& codec : testing::all_codec_names())
      for (CodecIsa isa : testing::isas()) round_trip_sequence(f, codec, isa, 2);
}

TEST(FrameCodec, CapturedFramesRoundTrip) {
  const std::vector<std::string> files = testing::captured_frame_files();
  if (files.empty()) GTEST_SKIP() << "no data/frames (benchmarks/capture_frames.py writes them)";
  for (const std::string& path : files) {
    const FrameSet f = testing::load_frames(path);
    for (const char* codec : {"packed-4", "lz4", "zstd-3"})
      for (CodecIsa isa : testing::isas()) {
        if (isa == CodecIsa::kPortable && std::string(codec) != "packed-4") continue;
        round_trip_sequence(f, codec, isa, 8);
      }
  }
}

// The packed encoders of every ISA write the same bytes (pext against the
// shift loop), on real and synthetic frames.
TEST(FrameCodec, PackedRecordsAreTheSameFromEveryIsa) {
  if (testing::isas().size() < 2) GTEST_SKIP() << "this CPU has only the portable loops";
  std::vector<testing::FrameSet> sets = testing::fixture_frames();
  testing::FrameSet scene{"scene", FrameShape{3, 17, 63}, 2, {}};
  for (int t = 0; t < 2; ++t) {
    const std::vector<uint8_t> f = testing::scene_frame(scene.shape, t, 8);
    scene.bytes.insert(scene.bytes.end(), f.begin(), f.end());
  }
  sets.push_back(scene);
  for (const testing::FrameSet& f : sets)
    for (int64_t i = 0; i < f.count; ++i) {
      const uint8_t* ref = i > 0 ? f.frame(i - 1) : nullptr;
      FrameEncoder portable(parse_codec_spec("packed-4"), f.shape, CodecIsa::kPortable);
      const std::vector<uint8_t> want = testing::to_vector(portable.encode(f.frame(i), ref));
      for (CodecIsa isa : testing::isas()) {
        FrameEncoder enc(parse_codec_spec("packed-4"), f.shape, isa);
        EXPECT_EQ(want, testing::to_vector(enc.encode(f.frame(i), ref)))
            << f.name << " frame " << i << " " << codec_isa_name(isa);
      }
    }
}

// Real frames compress: the packed codec's delta records of the fixture are
// smaller than intra ones, and both far smaller than the frame (a codec
// that silently stored everything would pass the round trips).
TEST(FrameCodec, RealFramesCompress) {
  for (const FrameSet& f : testing::fixture_frames()) {
    FrameEncoder enc(parse_codec_spec("packed-4"), f.shape);
    const int64_t intra = enc.encode(f.frame(1), nullptr).size;
    const int64_t delta = enc.encode(f.frame(1), f.frame(0)).size;
    EXPECT_LT(intra, f.shape.bytes() * 3 / 4) << f.name;
    EXPECT_LT(delta, intra) << f.name;
    EXPECT_EQ(enc.encode(f.frame(1), f.frame(0)).data[1],
              static_cast<uint8_t>(RecordCodec::kPacked));
  }
}

// Noise does not compress: every codec stores it, at 16 bytes over the frame.
TEST(FrameCodec, NoiseIsStoredAtTheCostOfTheHeader) {
  for (FrameShape shape : {FrameShape{3, 84, 84}, FrameShape{1, 84, 84}, FrameShape{1, 1, 5}}) {
    const std::vector<uint8_t> a = testing::noise_frame(shape, 1);
    const std::vector<uint8_t> b = testing::noise_frame(shape, 2);
    for (const std::string& codec : testing::all_codec_names())
      for (const uint8_t* ref : {static_cast<const uint8_t*>(nullptr), b.data()}) {
        const std::vector<uint8_t> rec = round_trip(codec, widest_codec_isa(), shape, a.data(), ref,
                                                    codec + " noise " + testing::shape_name(shape));
        EXPECT_EQ(static_cast<int64_t>(rec.size()), kRecordHeaderBytes + shape.bytes()) << codec;
        EXPECT_EQ(rec[1], static_cast<uint8_t>(RecordCodec::kStored)) << codec;
        const RecordInfo info = read_record_info(rec.data(), static_cast<int64_t>(rec.size()));
        EXPECT_FALSE(info.needs_reference()) << codec;
      }
  }
}

// A frame equal to its reference is the header, the tile table and the tile
// modes (all tiles empty); a constant frame compresses far; all-0 intra is
// empty too (no tile modes in an intra record).
TEST(FrameCodec, ConstantFramesAndUnchangedFrames) {
  const FrameShape shape{3, 84, 84};
  const int64_t tiles = 3 * 21;  // packed-4: 84 / 4 tiles per plane
  for (int value : {0, 77, 255}) {
    const std::vector<uint8_t> f(static_cast<size_t>(shape.bytes()), static_cast<uint8_t>(value));
    const std::vector<uint8_t> same =
        round_trip("packed-4", widest_codec_isa(), shape, f.data(), f.data(), "unchanged");
    EXPECT_EQ(static_cast<int64_t>(same.size()), kRecordHeaderBytes + 2 * tiles + (tiles + 7) / 8);
    const std::vector<uint8_t> intra =
        round_trip("packed-4", widest_codec_isa(), shape, f.data(), nullptr, "constant");
    if (value == 0) {
      EXPECT_EQ(static_cast<int64_t>(intra.size()), kRecordHeaderBytes + 2 * tiles);
    } else {  // the first code of every row is the value itself
      EXPECT_LT(static_cast<int64_t>(intra.size()), shape.bytes() / 8);
    }
    for (const std::string& codec : testing::all_codec_names()) {
      if (codec == "stored") continue;
      const std::vector<uint8_t> r =
          round_trip(codec, widest_codec_isa(), shape, f.data(), nullptr, codec + " constant");
      EXPECT_LT(static_cast<int64_t>(r.size()), shape.bytes() / 6) << codec << " value " << value;
    }
  }
}

// A frame unrelated to its reference (a new scene, an episode's reset): each
// delta tile costs more than the tile on its own, so the delta record holds
// intra tiles and costs no more than the intra record plus its tile modes.
TEST(FrameCodec, DeltaRecordsFallBackToIntraTiles) {
  const FrameShape shape{3, 84, 84};
  const std::vector<uint8_t> frame = testing::scene_frame(shape, 0, 21);
  const std::vector<uint8_t> unrelated = testing::noise_frame(shape, 22);
  for (CodecIsa isa : testing::isas()) {
    const std::vector<uint8_t> intra =
        round_trip("packed-4", isa, shape, frame.data(), nullptr, "intra");
    const std::vector<uint8_t> delta =
        round_trip("packed-4", isa, shape, frame.data(), unrelated.data(), "delta on noise");
    ASSERT_EQ(delta[2], static_cast<uint8_t>(RecordMode::kDelta));
    EXPECT_LE(delta.size(), intra.size() + (63 + 7) / 8) << codec_isa_name(isa);
  }
}

// Every width 1..8: a delta whose blocks have largest codes 1, 3, 7, ..., 255.
TEST(FrameCodec, EveryBlockWidthRoundTrips) {
  const FrameShape shape{1, 4, 8 * 9 + 3};
  std::vector<uint8_t> ref(static_cast<size_t>(shape.bytes()), 100);
  std::vector<uint8_t> f = ref;
  for (int32_t y = 0; y < shape.height; ++y)
    for (int w = 1; w <= 9; ++w) {  // block w - 1 of the row: a difference whose code needs w bits
      const int code = w == 9 ? 0 : (1 << w) - 1;
      const int diff = code % 2 ? -(code + 1) / 2 : code / 2;  // unzigzag
      f[static_cast<size_t>(y * shape.width + (w - 1) * 8 + (y + w) % 8)] =
          static_cast<uint8_t>(100 + diff);
    }
  for (const std::string& codec : testing::all_codec_names())
    for (CodecIsa isa : testing::isas()) round_trip(codec, isa, shape, f.data(), ref.data(), codec);
}

// Blocks of every width with 1 to 8 non-zero codes, so that the encoder
// lists some (sparse) and packs the others (dense), mixed within the
// AVX-512 loop's steps of 8 blocks and at rows' partial last blocks.
TEST(FrameCodec, SparseAndDenseBlocksRoundTrip) {
  const FrameShape shape{2, 6, 8 * 9 + 5};
  const std::vector<uint8_t> ref = testing::scene_frame(shape, 0, 31);
  std::vector<uint8_t> f = ref;
  for (int32_t row = 0; row < shape.channels * shape.height; ++row)
    for (int32_t j = 0; j * 8 < shape.width; ++j) {
      const int w = 1 + (row + j) % 8, nonzero = 1 + (row * 3 + j) % 8;
      for (int k = 0; k < nonzero && j * 8 + k < shape.width; ++k) {
        const int code = k == 0 ? (1 << w) - 1 : 1 + (k * 5) % ((1 << w) - 1);  // the first sets w
        const int diff = code % 2 ? -(code + 1) / 2 : code / 2;
        const size_t at = static_cast<size_t>(row * shape.width + j * 8 + (k * 3) % 8);
        if (j * 8 + (k * 3) % 8 < shape.width) f[at] = static_cast<uint8_t>(ref[at] + diff);
      }
    }
  for (CodecIsa isa : testing::isas()) {
    const std::vector<uint8_t> rec = round_trip("packed-4", isa, shape, f.data(), ref.data(), "mixed");
    ASSERT_EQ(rec[1], static_cast<uint8_t>(RecordCodec::kPacked));
    PackedLayout l{};
    ASSERT_EQ(packed_layout(rec.data(), rec.size(), read_header(rec.data()), &l), RecordStatus::kOk);
    int sparse = 0, dense = 0;
    for (int64_t t = 0; t < l.tiles; ++t) {
      TilePlan plan{};
      ASSERT_EQ(tile_plan(l, t, &plan), RecordStatus::kOk);
      if (plan.bitmap == nullptr) continue;
      for (const uint8_t* p = plan.fields; p < plan.masks; ++p)
        for (int half = 0; half < 2; ++half) {
          const int field = (*p >> (4 * half)) & 0xF;
          sparse += (field & 8) != 0;
          dense += (field & 8) == 0 && field != 0;
        }
    }
    EXPECT_GT(sparse, 10);
    EXPECT_GT(dense, 10);
  }
}

TEST(FrameCodec, EdgeSizesRoundTrip) {
  const FrameShape shapes[] = {{1, 1, 1},   {1, 1, 7},   {1, 3, 8},     {2, 5, 9},   {1, 7, 15},
                               {3, 17, 63}, {4, 9, 65},  {3, 100, 100}, {1, 84, 84}, {4, 84, 84},
                               {1, 1, 300}, {1, 300, 1}, {3, 255, 33},  {2, 256, 17}};
  for (const FrameShape& shape : shapes) {
    const std::vector<uint8_t> a = testing::scene_frame(shape, 0, 3);
    const std::vector<uint8_t> b = testing::scene_frame(shape, 1, 3);
    for (const std::string& codec : testing::all_codec_names())
      for (CodecIsa isa : testing::isas()) {
        const std::string what = codec + " " + testing::shape_name(shape);
        round_trip(codec, isa, shape, a.data(), nullptr, what + " intra");
        round_trip(codec, isa, shape, b.data(), a.data(), what + " delta");
      }
  }
}

// A frame whose packed tiles take more than 64 KiB: 4-byte tile ends.
TEST(FrameCodec, LargeFramesUseFourByteTileEnds) {
  const FrameShape shape{3, 300, 300};
  const std::vector<uint8_t> a = testing::scene_frame(shape, 0, 5);
  const std::vector<uint8_t> rec =
      round_trip("packed-4", widest_codec_isa(), shape, a.data(), nullptr, "3x300x300");
  ASSERT_EQ(rec[1], static_cast<uint8_t>(RecordCodec::kPacked));
  EXPECT_EQ(rec[10], 4);  // offset_bytes
  const std::vector<uint8_t> small = round_trip(
      "packed-4", widest_codec_isa(), FrameShape{3, 84, 84}, a.data(), nullptr, "3x84x84");
  EXPECT_EQ(small[10], 2);
}

TEST(FrameCodec, EncodingTheSameFrameAgainGivesTheSameBytes) {
  const FrameSet f = testing::fixture_frames().front();
  for (const std::string& codec : testing::all_codec_names()) {
    FrameEncoder enc(parse_codec_spec(codec), f.shape);
    const std::vector<uint8_t> first = testing::to_vector(enc.encode(f.frame(1), f.frame(0)));
    enc.encode(f.frame(0), nullptr);
    EXPECT_EQ(first, testing::to_vector(enc.encode(f.frame(1), f.frame(0)))) << codec;
  }
}

TEST(FrameCodec, RecordInfoReadsTheHeader) {
  const FrameSet f = testing::fixture_frames().front();
  FrameEncoder enc(parse_codec_spec("zstd-3"), f.shape);
  const RecordBytes delta = enc.encode(f.frame(1), f.frame(0));
  RecordInfo info = read_record_info(delta.data, delta.size);
  EXPECT_EQ(info.codec, RecordCodec::kZstd);
  EXPECT_EQ(info.mode, RecordMode::kDelta);
  EXPECT_TRUE(info.needs_reference());
  EXPECT_EQ(info.shape, f.shape);
  FrameEncoder plain(parse_codec_spec("zstd-3-plain"), f.shape);
  const RecordBytes p = plain.encode(f.frame(1), nullptr);
  EXPECT_EQ(read_record_info(p.data, p.size).mode, RecordMode::kPlain);
  try {
    read_record_info(p.data, 15);
    FAIL() << "a 15-byte record was read";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("shorter than the 16-byte record header"),
              std::string::npos)
        << e.what();
  }
}

TEST(CodecSpec, NamesParseToTheirCodecAndLevel) {
  struct Case {
    const char* name;
    Codec codec;
    int level;
    bool predict;
    const char* canonical;
  };
  const Case cases[] = {
      {"stored", Codec::kStored, 0, true, "stored"},
      {"packed", Codec::kPacked, kDefaultTileRows, true, "packed-4"},
      {"packed-16", Codec::kPacked, 16, true, "packed-16"},
      {"lz4", Codec::kLz4, 1, true, "lz4-1"},
      {"lz4-8-plain", Codec::kLz4, 8, false, "lz4-8-plain"},
      {"lz4hc", Codec::kLz4Hc, 9, true, "lz4hc-9"},
      {"zstd", Codec::kZstd, 3, true, "zstd-3"},
      {"zstd-19-plain", Codec::kZstd, 19, false, "zstd-19-plain"},
  };
  for (const Case& c : cases) {
    const CodecSpec s = parse_codec_spec(c.name);
    EXPECT_EQ(s.codec, c.codec) << c.name;
    EXPECT_EQ(s.level, c.level) << c.name;
    EXPECT_EQ(s.predict_intra, c.predict) << c.name;
    EXPECT_EQ(codec_spec_name(s), c.canonical);
    EXPECT_EQ(codec_spec_name(parse_codec_spec(c.canonical)), c.canonical);
  }
}

void expect_invalid(const std::function<void()>& f, const std::string& words) {
  try {
    f();
    FAIL() << "no exception; expected one saying '" << words << "'";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

TEST(CodecSpec, BadNamesAndLevelsAreRefusedWithTheGrammar) {
  for (const char* name :
       {"", "gzip", "packed-", "packed-x", "zstd-3x", "stored-1", "-plain", "lz4--1"})
    expect_invalid([&] { parse_codec_spec(name); },
                   "expected stored, packed[-<rows per tile 1..255>]");
  expect_invalid([] { parse_codec_spec("packed-256"); },
                 "rows per tile 256 is out of range 1..255");
  expect_invalid([] { parse_codec_spec("packed-0"); }, "rows per tile 0 is out of range");
  expect_invalid([] { parse_codec_spec("zstd-23"); }, "level 23 is out of range 1..22");
  expect_invalid([] { parse_codec_spec("lz4hc-13"); }, "level 13 is out of range 1..12");
  expect_invalid(
      [] {
        resolved(CodecSpec{Codec::kPacked, 4, false});
      },
      "packed has no plain variant");
  expect_invalid([] { parse_codec_spec("packed-plain"); }, "packed has no plain variant");
}

TEST(FrameCodec, ShapesOutsideTheRecordAreRefused) {
  for (FrameShape s : {FrameShape{0, 84, 84}, FrameShape{3, 0, 84}, FrameShape{3, 84, 65536},
                       FrameShape{-1, 2, 2}, FrameShape{65535, 65535, 2}}) {
    expect_invalid([&] { FrameEncoder(parse_codec_spec("packed"), s); },
                   "FrameEncoder: a frame shape must have C, H and W in 1..65535");
    expect_invalid([&] { FrameDecoder d(s); }, "FrameDecoder: a frame shape must have C, H and W");
  }
}

TEST(FrameCodec, ARecordOfAnotherShapeOrWithoutItsReferenceIsRefused) {
  const FrameSet f = testing::fixture_frames().front();
  FrameEncoder enc(parse_codec_spec("packed"), f.shape);
  const std::vector<uint8_t> delta = testing::to_vector(enc.encode(f.frame(1), f.frame(0)));
  std::vector<uint8_t> out(static_cast<size_t>(f.shape.bytes()));
  FrameDecoder other(FrameShape{f.shape.channels, f.shape.height, f.shape.width + 1});
  std::vector<uint8_t> big(out.size() + 84 * 3);
  expect_invalid([&] { other.decode(delta.data(), delta.size(), f.frame(0), big.data()); },
                 "its frame shape is not the decoder's");
  FrameDecoder dec(f.shape);
  expect_invalid([&] { dec.decode(delta.data(), delta.size(), nullptr, out.data()); },
                 "it is a delta record and no reference frame was given");
}

}  // namespace
}  // namespace codecs
}  // namespace obsaug

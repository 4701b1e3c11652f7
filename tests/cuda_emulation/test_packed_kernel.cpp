// The packed codec's CUDA decode kernel (kernels/codecs/packed_cuda_kernel.cuh)
// under the CPU emulation of the CUDA execution model, against the CPU's
// FrameDecoder, bit for bit and outcome for outcome (status and failing
// tile), under several block and thread orders: real frames (the committed
// fixture), synthetic scenes of edge sizes, noise (stored records), tiles of
// 1 to 255 rows (more tiles than threads, so threads stride), a grid smaller
// than the batch (blocks stride), lz4 records (the kernel has no decoder for
// them), and corrupt records behind a refreshed checksum.
#include "tests/cuda_emulation/cuda_emulation.h"
// The kernel header after the emulation.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/codecs/frame_codec.h"
#include "kernels/codecs/packed_cuda_kernel.cuh"
#include "tests/kernels/codecs/codec_test_util.h"

namespace obsaug {
namespace codecs {
namespace {

using Bytes = std::vector<uint8_t>;
constexpr uint64_t kOrders[] = {cuda_emu::kForward, cuda_emu::kReverse, 0x5eed};

// A frame to decode: its record and the reference it was coded against.
struct Item {
  Bytes record;
  const uint8_t* reference;
  std::string what;
};

// Runs the kernel over `items` (one frame shape) with `grid` blocks under
// every order and checks every outcome and frame against the CPU's.
void check_against_cpu(const std::vector<Item>& items, FrameShape shape, unsigned grid) {
  const int64_t n = shape.bytes();
  std::vector<Bytes> want(items.size(), Bytes(static_cast<size_t>(n)));
  std::vector<DecodeOutcome> want_outcome(items.size());
  FrameDecoder cpu(shape, CodecIsa::kPortable);
  for (size_t i = 0; i < items.size(); ++i)
    want_outcome[i] =
        cpu.try_decode(items[i].record.data(), static_cast<int64_t>(items[i].record.size()),
                       items[i].reference, want[i].data());
  for (uint64_t order : kOrders) {
    std::vector<Bytes> out(items.size(), Bytes(static_cast<size_t>(n), 0xEE));
    std::vector<PackedDecodeJob> jobs;
    for (size_t i = 0; i < items.size(); ++i)
      jobs.push_back({items[i].record.data(), static_cast<int64_t>(items[i].record.size()),
                      items[i].reference, out[i].data()});
    std::vector<int32_t> status(items.size(), -7), tile(items.size(), -7);
    cuda_emu::launch({dim3(grid), dim3(kPackedDecodeThreads), 0, order}, packed_decode_kernel,
                     jobs.data(), static_cast<int64_t>(jobs.size()), shape, status.data(),
                     tile.data());
    for (size_t i = 0; i < items.size(); ++i) {
      const std::string what = items[i].what + " order " + std::to_string(order);
      const RecordStatus cpu_status = want_outcome[i].status;
      // The kernel has no lz4 or zstd decoder: those records are kCodec there.
      const RecordCodec codec = items[i].record.size() >= 2
                                    ? static_cast<RecordCodec>(items[i].record[1])
                                    : RecordCodec::kStored;
      const bool library = cpu_status == RecordStatus::kOk &&
                           (codec == RecordCodec::kLz4 || codec == RecordCodec::kZstd);
      EXPECT_EQ(status[i], static_cast<int32_t>(library ? RecordStatus::kCodec : cpu_status))
          << what;
      if (!library) {
        EXPECT_EQ(tile[i], want_outcome[i].tile) << what;
      }
      if (cpu_status == RecordStatus::kOk && !library) {
        EXPECT_EQ(out[i], want[i]) << what;
      }
    }
  }
}

TEST(PackedKernel, RealFramesDecodeAsOnTheCpu) {
  for (const testing::FrameSet& f : testing::fixture_frames()) {
    std::vector<Item> items;
    for (const char* codec : {"packed-1", "packed-4", "packed-255", "stored", "lz4"}) {
      FrameEncoder enc(parse_codec_spec(codec), f.shape);
      for (int64_t i = 0; i < f.count; ++i) {
        items.push_back({testing::to_vector(enc.encode(f.frame(i), nullptr)), nullptr,
                         f.name + " " + codec + " intra " + std::to_string(i)});
        if (i > 0)
          items.push_back({testing::to_vector(enc.encode(f.frame(i), f.frame(i - 1))),
                           f.frame(i - 1), f.name + " " + codec + " delta " + std::to_string(i)});
      }
    }
    check_against_cpu(items, f.shape, 3);  // fewer blocks than frames: blocks stride
  }
}

TEST(PackedKernel, EdgeSizesAndNoiseDecodeAsOnTheCpu) {
  const FrameShape shapes[] = {{1, 1, 1},   {1, 3, 8},  {2, 5, 9},
                               {3, 17, 63}, {4, 9, 65}, {1, 300, 5}};
  for (const FrameShape& shape : shapes) {
    const Bytes a = testing::scene_frame(shape, 0, 11), b = testing::scene_frame(shape, 1, 11);
    const Bytes noise = testing::noise_frame(shape, 12);
    std::vector<Item> items;
    for (const char* codec : {"packed-1", "packed-3", "packed-4"}) {
      FrameEncoder enc(parse_codec_spec(codec), shape);
      items.push_back({testing::to_vector(enc.encode(a.data(), nullptr)), nullptr, codec});
      items.push_back({testing::to_vector(enc.encode(b.data(), a.data())), a.data(), codec});
      items.push_back({testing::to_vector(enc.encode(noise.data(), a.data())), a.data(), codec});
    }
    check_against_cpu(items, shape, 2);
  }
}

TEST(PackedKernel, CorruptRecordsFailAsOnTheCpu) {
  const testing::FrameSet f = testing::fixture_frames().at(3);  // walker
  std::mt19937 rng(3);
  std::vector<Item> items;
  for (const char* codec : {"packed-1", "packed-4", "stored"}) {
    FrameEncoder enc(parse_codec_spec(codec), f.shape);
    for (bool delta : {false, true}) {
      const Bytes rec = testing::to_vector(enc.encode(f.frame(1), delta ? f.frame(0) : nullptr));
      for (int k = 0; k < 40; ++k) {
        Bytes r = rec;
        if (k % 4 == 0) {
          r.resize(rng() % r.size());  // truncated
        } else {
          for (int c = 0; c < 1 + k % 3; ++c)
            r[rng() % std::min<size_t>(r.size(), 200)] = static_cast<uint8_t>(rng());
        }
        if (k % 8 != 7) testing::refresh_checksum(r);  // else: the checksum catches it
        items.push_back({r, delta ? f.frame(0) : nullptr,
                         std::string(codec) + " corrupt " + std::to_string(k)});
      }
    }
    items.push_back(
        {testing::to_vector(enc.encode(f.frame(1), f.frame(0))), nullptr, "no reference"});
  }
  check_against_cpu(items, f.shape, 5);
}

}  // namespace
}  // namespace codecs
}  // namespace obsaug

// The packed codec's CUDA decode (kernels/codecs/packed_cuda.h) on a GPU,
// against the CPU's FrameDecoder: the committed real frames, intra and
// delta, packed and stored, one launch for all of them; a corrupt record's
// status. Skips where no GPU is (the kernel body runs on every CI run under
// the emulation: tests/cuda_emulation/test_packed_kernel.cpp).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "kernels/codecs/frame_codec.h"
#include "kernels/codecs/packed_cuda.h"
#include "tests/kernels/codecs/codec_test_util.h"

namespace obsaug {
namespace codecs {
namespace {

#define CUDA_OK(call) ASSERT_EQ(cudaSuccess, (call)) << #call

bool have_gpu() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

TEST(PackedCuda, DecodesAsTheCpuDoes) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  for (const testing::FrameSet& f : testing::fixture_frames()) {
    const int64_t n = f.shape.bytes();
    std::vector<std::vector<uint8_t>> records;
    std::vector<int64_t> reference;  // frame index, or -1
    for (const char* codec : {"packed-4", "packed-1", "stored"}) {
      FrameEncoder enc(parse_codec_spec(codec), f.shape);
      for (int64_t i = 0; i < f.count; ++i) {
        records.push_back(testing::to_vector(enc.encode(f.frame(i), nullptr)));
        reference.push_back(-1);
        if (i == 0) continue;
        records.push_back(testing::to_vector(enc.encode(f.frame(i), f.frame(0))));
        reference.push_back(0);
      }
    }
    std::vector<uint8_t> bad = records[1];
    bad[bad.size() / 2] ^= 1;  // the checksum no longer matches
    records.push_back(bad);
    reference.push_back(reference[1]);

    uint8_t *frames = nullptr, *outs = nullptr, *bytes = nullptr;
    PackedDecodeJob* jobs_device = nullptr;
    int32_t *status = nullptr, *tile = nullptr;
    size_t total = 0;
    for (const auto& r : records) total += r.size();
    const size_t count = records.size();
    CUDA_OK(cudaMalloc(&frames, static_cast<size_t>(f.count * n)));
    CUDA_OK(cudaMalloc(&outs, count * static_cast<size_t>(n)));
    CUDA_OK(cudaMalloc(&bytes, total));
    CUDA_OK(cudaMalloc(&jobs_device, count * sizeof(PackedDecodeJob)));
    CUDA_OK(cudaMalloc(&status, count * sizeof(int32_t)));
    CUDA_OK(cudaMalloc(&tile, count * sizeof(int32_t)));
    CUDA_OK(cudaMemcpy(frames, f.bytes.data(), f.bytes.size(), cudaMemcpyHostToDevice));
    std::vector<PackedDecodeJob> jobs;
    size_t at = 0;
    for (size_t k = 0; k < count; ++k) {
      CUDA_OK(cudaMemcpy(bytes + at, records[k].data(), records[k].size(), cudaMemcpyHostToDevice));
      jobs.push_back({bytes + at, static_cast<int64_t>(records[k].size()),
                      reference[k] < 0 ? nullptr : frames + reference[k] * n, outs + k * n});
      at += records[k].size();
    }
    CUDA_OK(cudaMemcpy(jobs_device, jobs.data(), count * sizeof(PackedDecodeJob),
                       cudaMemcpyHostToDevice));
    ASSERT_EQ(0, launch_packed_decode(jobs_device, static_cast<int64_t>(count), f.shape, status,
                                      tile, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<uint8_t> out(count * static_cast<size_t>(n));
    std::vector<int32_t> got(count), got_tile(count);
    CUDA_OK(cudaMemcpy(out.data(), outs, out.size(), cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(got.data(), status, count * sizeof(int32_t), cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(got_tile.data(), tile, count * sizeof(int32_t), cudaMemcpyDeviceToHost));
    FrameDecoder cpu(f.shape);
    for (size_t k = 0; k < count; ++k) {
      std::vector<uint8_t> want(static_cast<size_t>(n));
      const DecodeOutcome o =
          cpu.try_decode(records[k].data(), static_cast<int64_t>(records[k].size()),
                         reference[k] < 0 ? nullptr : f.frame(reference[k]), want.data());
      EXPECT_EQ(got[k], static_cast<int32_t>(o.status)) << f.name << " record " << k;
      EXPECT_EQ(got_tile[k], o.tile) << f.name << " record " << k;
      if (o.status == RecordStatus::kOk) {
        EXPECT_EQ(0, std::memcmp(out.data() + k * n, want.data(), static_cast<size_t>(n)))
            << f.name << " record " << k;
      }
    }
    EXPECT_EQ(got.back(), static_cast<int32_t>(RecordStatus::kChecksum));
    for (void* p :
         {static_cast<void*>(frames), static_cast<void*>(outs), static_cast<void*>(bytes),
          static_cast<void*>(jobs_device), static_cast<void*>(status), static_cast<void*>(tile)})
      CUDA_OK(cudaFree(p));
  }
}

}  // namespace
}  // namespace codecs
}  // namespace obsaug

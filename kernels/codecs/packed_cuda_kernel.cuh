// The CUDA kernel that decodes records of kernels/codecs (packed and
// stored; lz4 and zstd records are reported as kCodec: the device has no
// decoder of its own for them), in a header that both nvcc
// (packed_cuda.cu, the real launch) and the host compiler (the CPU emulation
// of the CUDA execution model in tests/cuda_emulation/, DESIGN.md section 8)
// compile. Everything here has internal linkage. The host compiler needs the
// CUDA built-ins first: include tests/cuda_emulation/cuda_emulation.h.
//
// One block per frame (grid-stride over the jobs): every thread checks the
// header (the same answer in all), the block sums the checksum's terms
// (record.h: independent terms, a thread each word in kPackedDecodeThreads)
// in shared memory, then thread k decodes tiles k, k + blockDim.x, ... with
// packed.h's decode_packed_tile, the CPU's own code. The frame's status is
// the CPU's: the first check that fails, else the failure of its lowest
// failing tile (the same under any thread order), written by thread 0.
#pragma once

#if !defined(__CUDACC__) && !defined(CUDA_EMULATION)
#error "packed_cuda_kernel.cuh needs nvcc or tests/cuda_emulation/cuda_emulation.h"
#endif

#include <cstdint>

#include "kernels/codecs/packed.h"
#include "kernels/codecs/packed_cuda.h"
#include "kernels/codecs/record.h"

namespace obsaug {
namespace codecs {
namespace {

constexpr int kPackedDecodeThreads = 128;  // a power of two: the reductions halve it

// A frame's outcome: its status and the packed tile it failed in (-1: none).
struct BlockOutcome {
  RecordStatus status;
  int32_t tile;
};

// The outcome of one frame's record, every thread of the block returning the
// same; thread t checks words and tiles t, t + blockDim.x, ... The outcome is
// the CPU's (FrameDecoder::try_decode): a check before the tiles, else the
// failing tile of the lowest index.
__device__ BlockOutcome decode_record_in_block(const PackedDecodeJob& job, FrameShape shape,
                                               uint32_t* sums, int32_t* statuses, int32_t* tiles) {
  const unsigned tid = threadIdx.x;
  const uint64_t size = job.record_size < 0 ? 0 : static_cast<uint64_t>(job.record_size);
  RecordStatus s = size < kRecordHeaderBytes ? RecordStatus::kTooShort : RecordStatus::kOk;
  RecordHeader h{};
  if (s == RecordStatus::kOk) {
    h = read_header(job.record);
    s = check_header(h, shape);
  }
  sums[tid] = s == RecordStatus::kOk ? checksum_terms(job.record, size, tid, blockDim.x) : 0;
  __syncthreads();
  for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (tid < stride) sums[tid] += sums[tid + stride];
    __syncthreads();
  }
  if (s == RecordStatus::kOk && finish_checksum(sums[0], size) != h.checksum)
    s = RecordStatus::kChecksum;
  if (s == RecordStatus::kOk && h.mode == RecordMode::kDelta && job.reference == nullptr)
    s = RecordStatus::kNoReference;
  int32_t failed_tile = -1;
  if (s == RecordStatus::kOk) {
    const int64_t n = shape.bytes();
    if (h.codec == RecordCodec::kStored) {
      if (static_cast<int64_t>(size) - kRecordHeaderBytes != n) {
        s = RecordStatus::kPayloadSize;
      } else {
        const uint8_t* payload = job.record + kRecordHeaderBytes;
        for (int64_t i = tid; i < n; i += blockDim.x) job.out[i] = payload[i];
      }
    } else if (h.codec == RecordCodec::kPacked) {
      PackedLayout layout;
      s = packed_layout(job.record, size, h, &layout);
      for (int64_t t = tid; s == RecordStatus::kOk && t < layout.tiles; t += blockDim.x) {
        s = decode_packed_tile<PortableUnpack>(layout, t, job.reference, job.out);
        if (s != RecordStatus::kOk) failed_tile = static_cast<int32_t>(t);
      }
    } else {
      s = RecordStatus::kCodec;
    }
  }
  statuses[tid] = static_cast<int32_t>(s);
  tiles[tid] = failed_tile;
  __syncthreads();
  for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
    // the failure of the lower tile (-1, a check before the tiles, lowest)
    if (tid < stride && statuses[tid + stride] != 0 &&
        (statuses[tid] == 0 || tiles[tid + stride] < tiles[tid])) {
      statuses[tid] = statuses[tid + stride];
      tiles[tid] = tiles[tid + stride];
    }
    __syncthreads();
  }
  const BlockOutcome outcome{static_cast<RecordStatus>(statuses[0]), tiles[0]};
  __syncthreads();  // statuses[0], tiles[0] read by all before the next frame writes them
  return outcome;
}

__global__ void __launch_bounds__(kPackedDecodeThreads)
    packed_decode_kernel(const PackedDecodeJob* jobs, int64_t count, FrameShape shape,
                         int32_t* status, int32_t* failed_tile) {
  __shared__ uint32_t sums[kPackedDecodeThreads];
  __shared__ int32_t statuses[kPackedDecodeThreads];
  __shared__ int32_t tiles[kPackedDecodeThreads];
  for (int64_t j = blockIdx.x; j < count; j += gridDim.x) {
    const BlockOutcome o = decode_record_in_block(jobs[j], shape, sums, statuses, tiles);
    if (threadIdx.x == 0) {
      status[j] = static_cast<int32_t>(o.status);
      if (failed_tile != nullptr) failed_tile[j] = o.tile;
    }
  }
}

}  // namespace
}  // namespace codecs
}  // namespace obsaug

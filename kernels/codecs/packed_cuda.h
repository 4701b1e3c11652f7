// The CUDA decode of kernels/codecs records (packed and stored) into device
// frames: the launcher of packed_cuda_kernel.cuh. Built where CUDA is
// (obsaug_codecs_cuda); the kernel body runs under the CPU emulation in the
// tests everywhere.
#pragma once

#include <cstdint>

#include "kernels/codecs/record.h"

// cudaStream_t without the CUDA headers: the runtime's own typedef.
typedef struct CUstream_st* cudaStream_t;

namespace obsaug {
namespace codecs {

// One frame to decode; every pointer is device memory.
struct PackedDecodeJob {
  const uint8_t* record;     // the record's bytes
  int64_t record_size;       // its size
  const uint8_t* reference;  // the reference frame of a delta record, else null
  uint8_t* out;              // the frame written (shape.bytes()); must overlap no other job's
                             // frame, record or reference
};

// Decodes jobs[0, count) (a device array) of frames of `shape` on `stream`:
// status[i] (device int32) receives the RecordStatus of job i, kOk or why
// its record does not decode, and failed_tile[i] (device int32, or null) the
// packed tile it failed in (-1: none): FrameDecoder::try_decode's outcome,
// which record_error_message words. A frame whose status is not kOk holds
// unspecified bytes. Asynchronous; returns the launch's cudaError_t
// (0 = cudaSuccess). count = 0 launches nothing.
int launch_packed_decode(const PackedDecodeJob* jobs, int64_t count, FrameShape shape,
                         int32_t* status, int32_t* failed_tile, cudaStream_t stream);

}  // namespace codecs
}  // namespace obsaug

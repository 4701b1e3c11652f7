// Host/device qualifiers for the math shared by the CPU loops and the CUDA kernels.
#pragma once

#if defined(__CUDACC__)
#define OBSAUG_HD __host__ __device__ __forceinline__
#else
#define OBSAUG_HD inline
#endif

// ASSAY_HD marks arithmetic that host code and device code both run (bound
// helpers, per-element reference steps): __host__ __device__ under nvcc, plain
// inline C++ elsewhere, so a host-only translation unit needs no CUDA header.
#pragma once

#if defined(__CUDACC__)
#define ASSAY_HD __host__ __device__
#else
#define ASSAY_HD
#endif

// Small helpers the vendor-comparison GPU tests share (conv vs cuDNN, the GEMM family vs
// cuBLASLt): a device buffer freed on scope exit, and host images of values in a dtype.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include <cuda_runtime.h>

#include "harness/dtype.h"

namespace assay::test_util {

/// A device allocation freed on scope exit; p is null when cudaMalloc failed.
struct DevBuf {
  void* p = nullptr;
  explicit DevBuf(size_t bytes) {
    if (cudaMalloc(&p, std::max<size_t>(bytes, 1)) != cudaSuccess) p = nullptr;
  }
  ~DevBuf() { cudaFree(p); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
};

/// `v` stored in dtype `t` (each value rounded to nearest even).
inline std::vector<unsigned char> encode(DType t, const std::vector<double>& v) {
  std::vector<unsigned char> b(v.size() * dtype_size(t));
  for (size_t i = 0; i < v.size(); ++i) store_as(t, v[i], b.data() + i * dtype_size(t));
  return b;
}

/// The values of an image of dtype `t`, as doubles.
inline std::vector<double> decode_all(DType t, const std::vector<unsigned char>& b) {
  std::vector<double> v(b.size() / dtype_size(t));
  for (size_t i = 0; i < v.size(); ++i) v[i] = load_as_double(t, b.data() + i * dtype_size(t));
  return v;
}

}  // namespace assay::test_util

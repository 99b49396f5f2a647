// An input of a device reference as the engine hands it over (harness/op.h
// DevTensor): element [0] at `data`, the packed layout folded into rows of `cols`
// elements, row stride `ld` in elements (a padded row leaves a gap the reference
// never reads), stored as fp32, fp16 or bf16 (or fp64: a reference's own intermediate,
// such as the exact O a gradcheck differentiates from). Every such value is exact in fp64,
// so the references read them widened, as the host reference reads its decoded
// images (load_as_double); the element type is a field rather than a template
// parameter so that one kernel serves the three dtypes (the branch is uniform
// across a launch). No CUDA header (harness/dtype.h is plain C++17).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "harness/dtype.h"
#include "harness/host_device.h"

namespace assay::device_ref {

enum class InputType : uint8_t { kF32, kF16, kBF16, kF64 };

/// fp16 bits as a double, exactly; every NaN as the host decodes it (f16_bits_to_f32: CUDA's
/// canonical fp32 NaN 0x7FFFFFFF, sign dropped, widened), so that a NaN reaching a reference
/// has the host reference's bits too.
ASSAY_HD inline double f16_bits_to_double(uint16_t h) {
  const uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
  if (e == 31 && m != 0) {
    const uint64_t nan = 0x7FFFFFFFE0000000ull;  // (double)(float)0x7FFFFFFF
    double d;
    std::memcpy(&d, &nan, sizeof d);
    return d;
  }
  double mag;
  if (e == 0)
    mag = static_cast<double>(m) * 0x1p-24;  // subnormal (and zero): m * 2^-24, exact
  else if (e == 31)
    mag = HUGE_VAL;
  else  // (1024 + m) * 2^(e - 25): an 11-bit integer times a power of two, exact
    mag = static_cast<double>(m | 0x400u) * static_cast<double>(uint64_t{1} << e) * 0x1p-25;
  return (h & 0x8000u) != 0 ? -mag : mag;
}

/// bf16 bits as a double: the top half of an fp32, widened.
ASSAY_HD inline double bf16_bits_to_double(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return static_cast<double>(f);
}

struct InputRows {
  const void* data = nullptr;
  int64_t cols = 1, ld = 1;
  InputType type = InputType::kF32;
  /// Element `i` (an offset from `data` in elements, gaps included), widened to double.
  ASSAY_HD double at(int64_t i) const {
    if (type == InputType::kF32) return static_cast<double>(static_cast<const float*>(data)[i]);
    if (type == InputType::kF64) return static_cast<const double*>(data)[i];
    const uint16_t h = static_cast<const uint16_t*>(data)[i];
    return type == InputType::kF16 ? f16_bits_to_double(h) : bf16_bits_to_double(h);
  }
};

/// True for the dtypes the engine draws on the device and an InputRows reads (fp64 rows come
/// from a reference's scratch: f64_rows).
inline bool input_rows_support(DType t) {
  return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16;
}

/// An input at `data` (element [0]) of dtype `t` (input_rows_support), rows of `cols`, stride `ld`.
inline InputRows input_rows(const void* data, int64_t cols, int64_t ld, DType t) {
  return {data, cols, ld, t == DType::kF16 ? InputType::kF16 : t == DType::kBF16 ? InputType::kBF16 : InputType::kF32};
}

/// fp64 rows a reference wrote itself (dense or padded).
inline InputRows f64_rows(const double* data, int64_t cols, int64_t ld) {
  return {data, cols, ld, InputType::kF64};
}

/// Row `base` onwards of an input, indexable like a pointer (x[c] = at(base + c)): what the
/// shared per-row steps (references/host/attention.h) take on the device.
struct InputAt {
  InputRows t;
  int64_t base = 0;
  ASSAY_HD double operator[](int64_t c) const { return t.at(base + c); }
};

}  // namespace assay::device_ref

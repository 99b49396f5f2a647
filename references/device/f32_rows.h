// An fp32 input of a device reference as the engine hands it over (harness/op.h
// DevTensor): element [0] at `data`, the packed layout folded into rows of `cols`
// elements, row stride `ld` in elements (a padded row leaves a gap the
// reference never reads).
#pragma once

#include <cstdint>

namespace assay::device_ref {

struct F32Rows {
  const float* data = nullptr;
  int64_t cols = 1, ld = 1;
};

}  // namespace assay::device_ref

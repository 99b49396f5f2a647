// The bridge from the harness's ValueRecipe (C++20, harness/values.h) to the plain recipe the
// shared generator arithmetic takes (harness/value_core.h), for the host expander and the device
// materialiser alike.
#pragma once

#include "harness/dtype.h"
#include "harness/value_core.h"
#include "harness/values.h"

namespace assay {

/// `recipe` with the constants of `dtype` its classes read (largest finite, subnormal range).
value_core::Recipe core_recipe(const ValueRecipe& recipe, DType dtype);

}  // namespace assay

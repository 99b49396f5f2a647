// Case: a materialised test case, pure data. Everything needed to rebuild the
// inputs is here; replay needs neither RapidCheck nor the generator.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/status.h"
#include "harness/tensor.h"
#include "harness/values.h"

namespace assay {

/// Current case-file format; readers refuse newer ones with a clear error.
inline constexpr int kCaseFormat = 1;

enum class Role : uint8_t { kIn, kOut, kInOut };

struct TensorSpec {
  std::string name;  ///< [A-Za-z0-9_] only
  Role role = Role::kIn;
  TensorDesc desc;
  ValueRecipe values;  ///< ignored for kOut
};

struct Case {
  std::string op;
  std::string variant;    ///< the kernel variant this case is about; empty = all
  nlohmann::json params;  ///< op-specific scalars (m, n, k, alpha, ...), an object
  std::vector<TensorSpec> tensors;

  const TensorSpec* find(const std::string& name) const;
  TensorSpec* find(const std::string& name);

  nlohmann::json to_json() const;
  /// Parses and validates the generic part; `where` (a file name) prefixes errors.
  static StatusOr<Case> from_json(const nlohmann::json& j, const std::string& where = "case");
  /// Content id: 16 hex digits of a hash of the canonical JSON (variant included).
  std::string id() const;
  /// One-line human summary, e.g. "gemm[tiled] m=3 n=5 k=17 tA=0 tB=1 ...".
  std::string summary() const;
};

std::string_view role_name(Role r);

}  // namespace assay

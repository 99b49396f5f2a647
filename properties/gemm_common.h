// Plumbing the GEMM-like specs share (gemm_tc, gemm_int8 / gemm_fp8, gemm_bias_act(_bwd),
// gemm_batched): transposes as flag params, the A / B / C / D tensors of a (batched) GEMM,
// element access through op(X), the exact tier for small-integer inputs, and the BLAS
// beta = 0 convention.
//
// BLAS convention: with beta = 0, C is not read (0 * NaN would otherwise be NaN). Every
// GEMM-like op declares the convention "reads_c_when_beta0" (OpDef::conventions). Where a
// variant does not declare it, a beta = 0 case has its C filled with NaN by the op's prepare,
// and no NaN may reach the output; a variant that declares it
// (Contract().reads_c_when_beta0()) gets C's finite values instead. The engine puts the
// variant's conventions into params.conventions before prepare runs.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <rapidcheck.h>

#include "harness/bound_core.h"
#include "harness/generators.h"
#include "harness/op.h"
#include "harness/values.h"

namespace assay::gemm_common {

// ---- params and tensors -----------------------------------------------------------------------------

/// trans_a / trans_b: the operand is stored transposed (its tensor's two innermost dims swapped).
inline ParamDef trans_param(const char* name) {
  return ParamDef::flag(name).describe("operand stored transposed");
}

/// A GEMM operand or result [outer..., rows, cols] in `dtype`, stored transposed where the flag
/// param `trans` (may be empty) is true.
inline TensorDef matrix(std::string name, Role role, std::vector<std::string> outer, std::string rows,
                        std::string cols, std::string dtype, ValueSpec values = {}, std::string trans = "") {
  TensorDef t;
  t.name = std::move(name);
  t.role = role;
  t.dims = std::move(outer);
  t.dims.push_back(std::move(rows));
  t.dims.push_back(std::move(cols));
  t.dtype = std::move(dtype);
  t.values = std::move(values);
  t.transposed_by = std::move(trans);
  return t;
}

/// Element (r, q) of op(X) for a tensor viewed as rows x cols (one matrix, or entry `z` of a
/// batch of matrices of `rows_per_entry` stored rows each), transposed where `trans`.
inline double op_at(const HostTensor& x, bool trans, int64_t r, int64_t q, int64_t z = 0, int64_t rows_per_entry = 0) {
  const int64_t base = z * rows_per_entry;
  return trans ? x.at(base + q, r) : x.at(base + r, q);
}

/// The linear image index of element (r, q) of op(X) for tensor `t` of a case (entry `z` of a
/// rank-3 tensor).
inline int64_t op_index(const Case& c, size_t t, bool trans, int64_t r, int64_t q, int64_t z = 0) {
  const TensorDesc& d = c.tensors[t].desc;
  const View2D v = view_of(d);
  const int64_t entry = d.rank() >= 3 ? z * d.strides[0] : 0;
  return d.offset + entry + (trans ? q * v.ld + r : r * v.ld + q);
}

/// Where alpha * op(A) * op(B) may be evaluated with an operand scaled by alpha first (BLAS fixes
/// no order: cuBLAS and cuBLASLt do so, measured: NaN = (1.5 a) * 0 with a near FLT_MAX and B all
/// zeros), two things the other orders never do can happen to an output (i, j):
/// - |alpha a| can pass FLT_MAX although every product and sum stays finite: with |alpha| > 1,
///   where |alpha| times an element of row i of op(A) or column j of op(B) reaches FLT_MAX, the
///   output may be Inf or NaN (may_overflow);
/// - alpha a rounds on fp32's subnormal grid where it falls below the smallest normal (half a
///   subnormal spacing, absolute; measured: alpha = 1.5, A subnormal, B near FLT_MAX), and the
///   product carries it times |b|: with alpha not in {0, +-1}, at most half the smallest
///   subnormal times the larger of sum_q |op(A)(i, q)| and sum_q |op(B)(q, j)| (underflow_slack;
///   the relative part of that rounding is one of the ceiling's gamma_{k+2}).
struct AlphaScaledOperands {
  double alpha_abs = 0;
  std::vector<double> max_a, max_b, sum_a, sum_b;  // per row i of op(A), per column j of op(B)
  template <typename OpA, typename OpB>
  AlphaScaledOperands(double alpha, int64_t m, int64_t n, int64_t k, OpA op_a, OpB op_b) : alpha_abs(std::fabs(alpha)) {
    if (alpha_abs == 0 || alpha_abs == 1) return;  // no rounding of alpha x
    max_a.assign(static_cast<size_t>(m), 0.0), sum_a.assign(static_cast<size_t>(m), 0.0);
    max_b.assign(static_cast<size_t>(n), 0.0), sum_b.assign(static_cast<size_t>(n), 0.0);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t q = 0; q < k; ++q) {
        const double v = std::fabs(op_a(i, q));
        max_a[static_cast<size_t>(i)] = std::max(max_a[static_cast<size_t>(i)], v);
        sum_a[static_cast<size_t>(i)] += v;
      }
    for (int64_t j = 0; j < n; ++j)
      for (int64_t q = 0; q < k; ++q) {
        const double v = std::fabs(op_b(q, j));
        max_b[static_cast<size_t>(j)] = std::max(max_b[static_cast<size_t>(j)], v);
        sum_b[static_cast<size_t>(j)] += v;
      }
  }
  bool may_overflow(int64_t i, int64_t j) const {
    return !max_a.empty() &&
           alpha_scaled_overflows(alpha_abs, std::max(max_a[static_cast<size_t>(i)], max_b[static_cast<size_t>(j)]));
  }
  double underflow_slack(int64_t i, int64_t j) const {
    if (sum_a.empty()) return 0;
    return alpha_scaled_slack(std::max(sum_a[static_cast<size_t>(i)], sum_b[static_cast<size_t>(j)]));
  }
};

/// Dense copy of a host tensor's rows x cols elements.
inline std::vector<double> dense(const HostTensor& h) {
  std::vector<double> v(static_cast<size_t>(h.v.rows * h.v.cols));
  for (int64_t i = 0; i < h.v.rows; ++i)
    for (int64_t j = 0; j < h.v.cols; ++j) v[static_cast<size_t>(i * h.v.cols + j)] = h.at(i, j);
  return v;
}

/// Value classes of GEMM operands without special values.
inline std::vector<ValueClass> finite_classes(bool near_overflow) {
  std::vector<ValueClass> v = {ValueClass::kNormal,     ValueClass::kUniform,    ValueClass::kSameSign,
                               ValueClass::kSmallInt,   ValueClass::kLogUniform, ValueClass::kMeanSpread,
                               ValueClass::kSubnormal,  ValueClass::kSignedZero};
  if (near_overflow) v.push_back(ValueClass::kNearOverflow);
  return v;
}

// ---- the exact tier -------------------------------------------------------------------------------------

/// A recipe that draws small integers only (no special values laid over them).
inline bool small_int(const ValueRecipe& r) {
  return r.cls == ValueClass::kSmallInt && !r.inject.active();
}

/// The largest int_range of `recipes` when every one is small-integer, else -1.
inline int64_t int_range(const std::vector<const ValueRecipe*>& recipes) {
  int64_t r = 0;
  for (const ValueRecipe* x : recipes) {
    if (!small_int(*x)) return -1;
    r = std::max(r, x->int_range);
  }
  return r;
}

/// A small-integer recipe for `dt` (the generator's own choice of range), for OpDef::couple.
inline ValueRecipe draw_small_int(DType dt) {
  RecipeOptions o;
  o.classes = {ValueClass::kSmallInt};
  o.dtype = dt;
  return *gen_value_recipe(o);
}

/// For OpDef::couple: with weight 1 against `others`, an exact-tier case: the recipes at
/// `which` become small integers and the named real params take integer values (alpha from
/// `alphas`, beta from `betas`). Returns whether it did.
inline bool couple_exact_tier(nlohmann::json& p, std::vector<ValueRecipe>& recipes, const std::vector<size_t>& which,
                              const std::vector<DType>& dtypes, size_t others, const std::vector<double>& alphas,
                              const std::vector<double>& betas) {
  if (*gen_weighted_index({others, 1}) == 0) return false;
  for (size_t i = 0; i < which.size(); ++i) recipes[which[i]] = draw_small_int(dtypes[i]);
  if (!alphas.empty()) p["alpha"] = *gen_element(alphas);
  if (!betas.empty()) p["beta"] = *gen_element(betas);
  return true;
}

/// Clamps a log-uniform recipe's exponents into [lo, hi] (keeps partial sums away from overflow).
inline void clamp_exponents(ValueRecipe& r, int64_t lo, int64_t hi) {
  r.exp_min = std::clamp<int64_t>(r.exp_min, lo, hi);
  r.exp_max = std::clamp<int64_t>(r.exp_max, r.exp_min, hi);
}

// ---- the BLAS beta = 0 convention ------------------------------------------------------------------------

inline constexpr const char* kReadsCWhenBeta0 = "reads_c_when_beta0";

/// OpDef::conventions of a GEMM-like op.
inline std::map<std::string, std::string> blas_conventions() {
  return {{kReadsCWhenBeta0,
           "with beta = 0 the kernel may read C (computes 0 * C): C then holds finite values, not NaN"}};
}

/// m n max(k, 1), a GEMM case's multiply-adds (k == 0 still reads C and writes D): what the
/// device-reference thresholds and the generated size limits count.
inline int64_t gemm_work(const Params& p) {
  return p.i("m") * p.i("n") * std::max<int64_t>(p.i("k"), 1);
}

/// For an op's couple: halves the largest of params m, n and k until m n max(k, 1) <= limit;
/// `square` (a relation that needs m == n) keeps m and n equal.
inline void halve_to_work(nlohmann::json& j, int64_t limit, bool square = false) {
  auto at = [&](const char* key) { return j[key].get<int64_t>(); };
  while (at("m") * at("n") * std::max<int64_t>(at("k"), 1) > limit) {
    const char* big = at("m") >= at("n") && at("m") >= at("k") ? "m" : (at("n") >= at("k") ? "n" : "k");
    j[big] = at(big) / 2;
    if (square && std::string(big) != "k") j["m"] = j["n"] = at(big);
  }
}

/// Elements from tensor t's view pointer (its leading offset applied) to the end of its
/// allocation: what a device reference widens of an operand.
inline int64_t extent_from_view(const Case& c, size_t t) {
  return c.tensors[t].desc.extent() - c.tensors[t].desc.offset;
}

/// True where C must not be read: beta == 0 and the variant does not declare reads_c_when_beta0.
inline bool c_unread(const Params& p) {
  return p.r("beta", 0) == 0 && !p.convention(kReadsCWhenBeta0);
}

}  // namespace assay::gemm_common

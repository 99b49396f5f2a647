// The activation specs on the CPU: the tolerance (properties/activation.cpp) accepts both common
// fp32 implementations of each function and derivative -- the accurate forms the kernel uses and
// the textbook forms PyTorch uses -- over a dense sweep of fp32 inputs (subnormals, +-0, huge
// values, +-inf, NaN) and over every fp16 / bf16 input, while the planted bugs' formulas
// (gelu_tanh_wrong_const: 0.0447 for 0.044715; silu_bwd_missing_term: silu' = s) leave it on
// ordinary inputs in fp32 and bf16. Under a fast-math contract the ceiling admits an emulation of
// the intrinsics' documented worst case (__expf, __fdividef, __tanhf) and of flush-to-zero, which
// the IEEE ceiling rejects. The generator's cases validate and reach every value class; validate()
// rejects malformed ones with one line.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "harness/bounds.h"
#include "harness/executor.h"
#include "harness/exhaustive.h"
#include "harness/spec.h"
#include "harness/values.h"
#include "harness/op_model.h"
#include "properties/activation.h"

namespace assay::rowwise {
namespace {

// ---- fp32 implementations, host side (glibc's erff / erfcf / tanhf / expf) ---------------------------
constexpr float kSqrt1_2 = 0.707106781186547524401f;
constexpr float kInvSqrt2Pi = 0.398942280401432677940f;
constexpr float kSqrt2OverPi = 0.797884560802865355880f;
constexpr float kC = 0.044715f;
constexpr float kWrongC = 0.0447f;  // the planted bug

/// The arithmetic a form is evaluated in: glibc's functions and IEEE division, or an emulation of
/// the fast-math intrinsics' documented worst case.
struct Ieee {
  static float exp(float a) { return std::exp(a); }
  static float tanh(float a) { return std::tanh(a); }
  static float div(float a, float b) { return a / b; }
};
/// `n` ulps away from zero from v (stays finite only as far as the dtype goes).
float ulps_out(float v, int64_t n) {
  for (int64_t i = 0; i < n && std::isfinite(v) && v != 0; ++i) v = std::nextafter(v, std::copysign(INFINITY, v));
  return v;
}
struct FastWorst {
  // __expf: 2 + floor(1.173 |a|) ulps from the correctly rounded result, here all of them upward.
  static float exp(float a) {
    const float r = static_cast<float>(std::exp(static_cast<double>(a)));
    return ulps_out(r, 2 + static_cast<int64_t>(std::floor(1.173 * std::fabs(static_cast<double>(a)))));
  }
  // __tanhf: relative error 2^-11 (PTX tanh.approx.f32), toward zero (1 + t and 1 - t^2 then err
  // most near +-1).
  static float tanh(float a) {
    return static_cast<float>(std::tanh(static_cast<double>(a)) * (1 - 0x1p-11));
  }
  // __fdividef: 2 ulps from the correctly rounded quotient where it is inexact (an exact one,
  // such as 1 / 1 where 1 + e rounds to 1, comes back exact: x * rcp.approx(y) with y a power of 2).
  static float div(float a, float b) {
    const double q = static_cast<double>(a) / static_cast<double>(b);
    const float r = static_cast<float>(q);
    return static_cast<double>(r) == q ? r : ulps_out(r, 2);
  }
};

template <typename M = Ieee>
float x_sigmoid(float x, float z) {  // as kernels/rowwise/activations.cu
  const float e = M::exp(-std::fabs(z));
  return z >= 0.0f ? M::div(x, 1.0f + e) : M::div(x * e, 1.0f + e);
}
template <typename M = Ieee>
void sigmoid_pair(float z, float& s, float& sc) {
  const float e = M::exp(-std::fabs(z));
  const float big = M::div(1.0f, 1.0f + e);
  const float small = e * big;
  s = z >= 0.0f ? big : small;
  sc = z >= 0.0f ? small : big;
}

enum class Form { kAccurate, kTextbook };

template <typename M = Ieee>
float fwd32(Act a, Form f, float x, float c = kC) {
  switch (a) {
    case Act::kGeluErf:
      return f == Form::kAccurate ? x * 0.5f * std::erfc(-x * kSqrt1_2) : 0.5f * x * (1.0f + std::erf(x * kSqrt1_2));
    case Act::kGeluTanh: {
      if (f == Form::kAccurate) return x_sigmoid<M>(x, 2.0f * (kSqrt2OverPi * std::fma(c * x * x, x, x)));
      const float inner = kSqrt2OverPi * (x + c * (x * x * x));
      return 0.5f * x * (1.0f + M::tanh(inner));
    }
    case Act::kSilu:
      return f == Form::kAccurate ? x_sigmoid<M>(x, x) : M::div(x, 1.0f + M::exp(-x));
  }
  return NAN;
}

template <typename M = Ieee>
float grad32(Act a, Form f, float x) {
  switch (a) {
    case Act::kGeluErf: {
      if (f == Form::kAccurate) {
        const float cdf = 0.5f * std::erfc(-x * kSqrt1_2);
        const float pdf = kInvSqrt2Pi * M::exp(-0.5f * x * x);
        return std::fma(x, pdf, cdf);
      }
      // PyTorch GeluBackwardCUDAKernelImpl, approximate = 'none'.
      const float cdf = 0.5f * (1.0f + std::erf(x * kSqrt1_2));
      const float pdf = M::exp(-0.5f * x * x) * kInvSqrt2Pi;
      return cdf + x * pdf;
    }
    case Act::kGeluTanh: {
      if (f == Form::kAccurate) {
        const float x2 = x * x;
        const float u = kSqrt2OverPi * std::fma(kC * x2, x, x);
        float s, sc;
        sigmoid_pair<M>(2.0f * u, s, sc);
        const float w = s * sc;
        const float du = kSqrt2OverPi * std::fma(3.0f * kC, x2, 1.0f);
        if (w == 0.0f && std::isfinite(x)) return s;
        return std::fma(2.0f * w * x, du, s);
      }
      // PyTorch, approximate = 'tanh'.
      const float x_sq = x * x;
      const float x_cube = x_sq * x;
      const float inner = kSqrt2OverPi * (x + kC * x_cube);
      const float t = M::tanh(inner);
      const float left = 0.5f * x;
      const float right = 1.0f + t;
      const float left_derivative = 0.5f * right;
      const float tanh_derivative = 1.0f - t * t;
      const float inner_derivative = kSqrt2OverPi * (1.0f + 3.0f * kC * x_sq);
      const float right_derivative = left * tanh_derivative * inner_derivative;
      return left_derivative + right_derivative;
    }
    case Act::kSilu: {
      if (f == Form::kAccurate) {
        float s, sc;
        sigmoid_pair<M>(x, s, sc);
        return s * std::fma(x, sc, 1.0f);
      }
      const float s = M::div(1.0f, 1.0f + M::exp(-x));  // PyTorch silu_backward
      return s * (1.0f + x * (1.0f - s));
    }
  }
  return NAN;
}

/// The device check's rule for one element (harness/gpu/check_kernels.cu with overflow_mag = Inf).
bool accepted(double out, const ActivationPoint& p, DType dt) {
  if (std::isnan(p.ref)) return std::isnan(out);
  if (std::isinf(p.tol)) return true;  // no bound
  if (std::isinf(p.ref)) return std::isinf(out) && std::signbit(out) == std::signbit(p.ref);
  if (std::isnan(out)) return false;
  if (std::isinf(out)) return std::fabs(p.ref) + p.tol > max_finite(dt) && std::signbit(out) == std::signbit(p.ref);
  return std::fabs(out - p.ref) <= p.tol;
}

double round_to_dt(DType dt, float v) {
  return dt == DType::kF32 ? static_cast<double>(v) : static_cast<double>(round_to(dt, v));
}

/// Inputs: every 2^11-th fp32 bit pattern (2^21 values over every binade, both signs), the
/// regimes' edges, and specials.
std::vector<float> fp32_sweep() {
  std::vector<float> v;
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += uint64_t{1} << 11) {
    uint32_t u = static_cast<uint32_t>(b) | 0x5a5u;  // vary the low bits too
    float x;
    std::memcpy(&x, &u, 4);
    v.push_back(x);
  }
  const float fmax = std::numeric_limits<float>::max(), fmin = std::numeric_limits<float>::min(),
              fsub = std::numeric_limits<float>::denorm_min();
  for (float x :
       {0.0f,    -0.0f,  fsub,    -fsub,   fmin,     -fmin,   fmax,    -fmax,    INFINITY, -INFINITY, NAN,   1e-30f,
        -1e-30f, 88.72f, -88.72f, -87.33f, -103.97f, -104.0f, 16.64f,  17.0f,    9.01f,    -9.01f,    3.92f, -3.92f,
        5.3f,    -5.3f,  13.2f,   -13.2f,  14.2f,    -14.2f,  1.8e19f, -1.8e19f, 7e12f,    -7e12f})
    v.push_back(x);
  // Dense where every regime meets: [-110, 110] in steps of 2^-10.
  for (int i = -110 * 1024; i <= 110 * 1024; ++i) v.push_back(static_cast<float>(i) / 1024.0f);
  return v;
}

const Act kAllActs[] = {Act::kGeluErf, Act::kGeluTanh, Act::kSilu};

/// A failing input for the message.
std::string show(Act a, Form f, const char* what, double x, double out, const ActivationPoint& p) {
  return fmt::format("{} {} {}: x = {:.9g}: out {:.9g}, ref {:.9g}, tol {:.3g}", act_name(a),
                     f == Form::kAccurate ? "accurate" : "textbook", what, x, out, p.ref, p.tol);
}

TEST(ActivationTolerance, AcceptsBothFp32FormsOverADenseSweep) {
  const std::vector<float> xs = fp32_sweep();
  for (Act a : kAllActs)
    for (Form f : {Form::kAccurate, Form::kTextbook}) {
      int64_t bad_fwd = 0, bad_bwd = 0;
      double worst_fwd = 0, worst_bwd = 0;
      for (float x : xs) {
        const ActivationPoint p = activation_fwd_point(a, DType::kF32, x);
        const double y = fwd32(a, f, x);
        if (!accepted(y, p, DType::kF32) && bad_fwd++ < 3) ADD_FAILURE() << show(a, f, "forward", x, y, p);
        if (std::isfinite(y) && p.tol > 0) worst_fwd = std::max(worst_fwd, std::fabs(y - p.ref) / p.tol);
        for (float dy : {1.0f, -3.5f, 1e-3f}) {
          const ActivationPoint q = activation_bwd_point(a, DType::kF32, x, dy);
          const double g = static_cast<double>(dy * grad32(a, f, x));
          // PyTorch's textbook tanh backward: x^2 overflows past 1.8e19 and inf * 0 gives NaN (not accepted).
          if (a == Act::kGeluTanh && f == Form::kTextbook && std::fabs(x) > 1.8e19f) continue;
          if (!accepted(g, q, DType::kF32) && bad_bwd++ < 3) ADD_FAILURE() << show(a, f, "backward", x, g, q);
          if (std::isfinite(g) && q.tol > 0) worst_bwd = std::max(worst_bwd, std::fabs(g - q.ref) / q.tol);
        }
      }
      EXPECT_EQ(bad_fwd, 0) << act_name(a);
      EXPECT_EQ(bad_bwd, 0) << act_name(a);
      RecordProperty(fmt::format("{}_{}_max_ratio", act_name(a), f == Form::kAccurate ? "accurate" : "textbook"),
                     fmt::format("fwd {:.3g} bwd {:.3g}", worst_fwd, worst_bwd));
    }
}

TEST(ActivationTolerance, AcceptsBothFormsOnEveryHalfAndBfloatInput) {
  for (DType dt : {DType::kF16, DType::kBF16})
    for (Act a : kAllActs)
      for (Form f : {Form::kAccurate, Form::kTextbook}) {
        int64_t bad = 0;
        for (uint32_t b = 0; b < (1u << 16); ++b) {
          const auto bits = static_cast<uint16_t>(b);
          const float x = dt == DType::kF16 ? f16_bits_to_f32(bits) : bf16_bits_to_f32(bits);
          const ActivationPoint p = activation_fwd_point(a, dt, x);
          const double y = round_to_dt(dt, fwd32(a, f, x));
          if (!accepted(y, p, dt) && bad++ < 3)
            ADD_FAILURE() << dtype_name(dt) << " " << show(a, f, "forward", x, y, p);
          if (a == Act::kGeluTanh && f == Form::kTextbook && std::fabs(x) > 1.8e19f) continue;
          const ActivationPoint q = activation_bwd_point(a, dt, x, 1.0);
          const double g = round_to_dt(dt, grad32(a, f, x));
          if (!accepted(g, q, dt) && bad++ < 3)
            ADD_FAILURE() << dtype_name(dt) << " " << show(a, f, "backward", x, g, q);
        }
        EXPECT_EQ(bad, 0) << dtype_name(dt) << " " << act_name(a);
      }
}

TEST(ActivationTolerance, SpecialValues) {
  for (Act a : kAllActs) {
    EXPECT_TRUE(std::isnan(activation_fwd_point(a, DType::kF32, NAN).ref));
    EXPECT_EQ(activation_fwd_point(a, DType::kF32, INFINITY).ref, INFINITY);
    EXPECT_TRUE(std::isnan(activation_fwd_point(a, DType::kF32, -INFINITY).ref));  // -inf * 0, as PyTorch
    EXPECT_TRUE(std::isnan(activation_bwd_point(a, DType::kF32, INFINITY, 1).ref));
    EXPECT_TRUE(std::isnan(activation_bwd_point(a, DType::kF32, -INFINITY, 1).ref));
    EXPECT_TRUE(std::isnan(activation_bwd_point(a, DType::kBF16, 1, NAN).ref));
    // Zero in, zero out, and the signed zero is the reference's: any zero is within tol.
    const ActivationPoint z = activation_fwd_point(a, DType::kF32, -0.0);
    EXPECT_EQ(z.ref, 0.0);
    EXPECT_GE(z.tol, 0.0);
    // The forms' float results at +-inf agree with the reference's pattern.
    for (Form f : {Form::kAccurate, Form::kTextbook}) {
      EXPECT_EQ(fwd32(a, f, INFINITY), INFINITY) << act_name(a);
      EXPECT_TRUE(std::isnan(fwd32(a, f, -INFINITY))) << act_name(a);
    }
  }
  // silu at x = -100: the textbook form's expf(100) overflows to -0; the exact value is
  // -3.7e-42 (an fp32 subnormal), within the underflow floor.
  const ActivationPoint p = activation_fwd_point(Act::kSilu, DType::kF32, -100);
  EXPECT_EQ(fwd32(Act::kSilu, Form::kTextbook, -100.0f), 0.0f);
  EXPECT_LT(p.ref, 0.0);
  EXPECT_GE(p.tol, std::fabs(p.ref));
}

// ---- the planted bugs ------------------------------------------------------------------------------------

/// Inputs of `dt` in [lo, hi] (every representable one for fp16 / bf16, every 2^8-th for fp32).
std::vector<float> inputs_in(DType dt, float lo, float hi) {
  std::vector<float> v;
  if (dt == DType::kF32) {
    for (float x = lo; x <= hi; x = std::nextafter(x, INFINITY))
      if ((std::bit_cast<uint32_t>(x) & 0xff) == 0) v.push_back(x);
    return v;
  }
  for (uint32_t b = 0; b < (1u << 16); ++b) {
    const float x =
        dt == DType::kF16 ? f16_bits_to_f32(static_cast<uint16_t>(b)) : bf16_bits_to_f32(static_cast<uint16_t>(b));
    if (x >= lo && x <= hi) v.push_back(x);
  }
  return v;
}

TEST(ActivationMutants, GeluTanhWrongConstantIsCaughtOnTypicalInputs) {
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
    int64_t caught = 0, total = 0, correct_bad = 0;
    double worst = 0, worst_x = 0;
    std::string where;
    for (float lo : {0.5f, -4.0f}) {
      for (float x : inputs_in(dt, lo, lo + 3.5f)) {
        const ActivationPoint p = activation_fwd_point(Act::kGeluTanh, dt, x);
        const double m = round_to_dt(dt, fwd32(Act::kGeluTanh, Form::kAccurate, x, kWrongC));
        const double ok = round_to_dt(dt, fwd32(Act::kGeluTanh, Form::kAccurate, x));
        ++total;
        correct_bad += accepted(ok, p, dt) ? 0 : 1;
        if (!accepted(m, p, dt) && caught++ < 8) where += fmt::format(" {}", x);
        if (std::fabs(m - p.ref) / p.tol > worst) worst = std::fabs(m - p.ref) / p.tol, worst_x = x;
      }
    }
    EXPECT_EQ(correct_bad, 0) << dtype_name(dt);
    EXPECT_GT(caught, 0) << dtype_name(dt) << ": the wrong constant is never beyond the tolerance on " << total
                         << " inputs in +-[0.5, 4]; worst error/tol " << worst << " at x = " << worst_x;
    RecordProperty(fmt::format("wrong_const_{}", dtype_name(dt)),
                   fmt::format("{} of {} inputs caught (x ={}{}), worst error/tol {:.3g} at x = {}", caught, total,
                               where, caught > 8 ? " ..." : "", worst, worst_x));
  }
}

TEST(ActivationMutants, SiluBackwardMissingTermIsCaughtOnTypicalInputs) {
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
    int64_t caught = 0, total = 0;
    for (float lo : {0.5f, -4.0f})
      for (float x : inputs_in(dt, lo, lo + 3.5f)) {
        const ActivationPoint p = activation_bwd_point(Act::kSilu, dt, x, 1.0);
        const float s = 1.0f / (1.0f + std::exp(-x));
        ++total;
        if (!accepted(round_to_dt(dt, s), p, dt)) ++caught;
      }
    // silu'(x) - s = x s (1 - s) >= 0.5 * 0.62 * 0.38 = 0.12 here: every input is caught.
    EXPECT_EQ(caught, total) << dtype_name(dt);
  }
}

// ---- the comparison of the exhaustive sweep, on host-computed outputs -----------------------------------------

ExhaustiveSweep host_sweep(Act a, DType dt, bool backward) {
  ExhaustiveSweep s;
  s.name = fmt::format("host {} {}", act_name(a), dtype_name(dt));
  s.dtype = dt;
  s.backward = backward;
  s.reference = [=](double x, double dy) {
    const ActivationPoint p = backward ? activation_bwd_point(a, dt, x, dy) : activation_fwd_point(a, dt, x);
    return ExhaustiveRef{p.ref, p.tol};
  };
  return s;
}

std::vector<uint16_t> host_outputs(DType dt, const std::function<float(float)>& f) {
  std::vector<uint16_t> out(1u << 16);
  for (uint32_t b = 0; b < (1u << 16); ++b) {
    const float x =
        dt == DType::kF16 ? f16_bits_to_f32(static_cast<uint16_t>(b)) : bf16_bits_to_f32(static_cast<uint16_t>(b));
    const float y = f(x);
    out[b] = dt == DType::kF16 ? f32_to_f16_bits(y) : f32_to_bf16_bits(y);
  }
  return out;
}

TEST(ActivationExhaustive, HostFormsPassAndBudgetsAgreeWithTolerances) {
  for (DType dt : {DType::kF16, DType::kBF16})
    for (Act a : kAllActs) {
      const ExhaustiveReport r = compare_exhaustive(
          host_sweep(a, dt, false), host_outputs(dt, [a](float x) { return fwd32(a, Form::kAccurate, x); }));
      EXPECT_EQ(r.failures, 0) << r.text();
      EXPECT_EQ(r.inputs, 65536);
      EXPECT_EQ(r.histogram[0] + r.histogram[1] + r.histogram[2] + r.histogram[3] + r.nan_refs, 65536);
      EXPECT_LE(r.max_ulps, 2u) << r.text();
      EXPECT_EQ(r.spurious_naninf, 0);
      const ExhaustiveReport b = compare_exhaustive(
          host_sweep(a, dt, true), host_outputs(dt, [a](float x) { return grad32(a, Form::kAccurate, x); }));
      EXPECT_EQ(b.failures, 0) << b.text();
    }
}

TEST(ActivationExhaustive, ReportsFailuresAndSpuriousNaN) {
  // silu' = s (the planted bug), and a kernel that turns x = 1 into NaN.
  const ExhaustiveReport r = compare_exhaustive(
      host_sweep(Act::kSilu, DType::kBF16, true),
      host_outputs(DType::kBF16, [](float x) { return x == 1.0f ? NAN : 1.0f / (1.0f + std::exp(-x)); }));
  EXPECT_GT(r.failures, 1000);
  EXPECT_EQ(r.spurious_naninf, 1);
  ASSERT_EQ(r.spurious.size(), 1u);
  EXPECT_EQ(r.spurious[0].x, 1.0);
  EXPECT_GT(r.worst.ulps, r.worst.budget);
  EXPECT_EQ(r.to_json()["failures"], r.failures);
  EXPECT_NE(r.text().find("first failures"), std::string::npos);
}

// ---- generator and validation ---------------------------------------------------------------------------------

TEST(ActivationGenerator, CasesValidateAndReachEveryRegime) {
  for (const char* op : {"activation", "activation_bwd"}) {
    const OpSpec* spec = find_spec(op);
    ASSERT_NE(spec, nullptr) << op;
    const GenPlan plan{5, GenConfig{4096}};
    std::set<ValueClass> classes;
    std::set<std::string> acts, dtypes;
    std::set<uint8_t> specials;
    bool misaligned_in = false, misaligned_out_only = false, aligned = false, zero = false, edge = false;
    for (int64_t i = 0; i < 1500; ++i) {
      const Case c = generate_case(*spec, plan, i);
      ASSERT_TRUE(spec->validate(c).ok()) << spec->validate(c).message() << " in " << c.summary();
      classes.insert(c.tensors[0].values.cls);
      if (c.tensors[0].values.inject.active()) specials.insert(c.tensors[0].values.inject.kinds);
      acts.insert(c.params["act"].get<std::string>());
      dtypes.insert(c.params["dtype"].get<std::string>());
      const int64_t in_off = c.tensors[0].desc.offset, out_off = c.tensors.back().desc.offset;
      const int64_t es = static_cast<int64_t>(dtype_size(c.tensors[0].desc.dtype));
      misaligned_in |= (in_off * es) % 16 != 0;
      misaligned_out_only |= (in_off * es) % 16 == 0 && (out_off * es) % 16 != 0;
      aligned |= in_off == 0 && out_off == 0;
      const int64_t n = c.params["count"].get<int64_t>();
      zero |= n == 0;
      edge |= n == 255 || n == 257 || n == 7 || n == 9;
      if (std::string(op) == "activation_bwd") {
        const auto& dy = c.tensors[1].values;
        EXPECT_EQ(dy.inject.kinds & (kSpecialPosInf | kSpecialNegInf), 0) << "dY must not get infinities";
      }
    }
    for (ValueClass v : {ValueClass::kNormal, ValueClass::kUniform, ValueClass::kLogUniform, ValueClass::kNearOverflow,
                         ValueClass::kSubnormal, ValueClass::kSignedZero, ValueClass::kPareto, ValueClass::kSmallInt})
      EXPECT_TRUE(classes.count(v)) << op << ": " << value_class_name(v) << " never drawn";
    EXPECT_EQ(acts.size(), 3u) << op;
    EXPECT_EQ(dtypes.size(), 3u) << op;
    EXPECT_TRUE(specials.count(kSpecialAll) || specials.size() >= 3) << op;
    EXPECT_TRUE(misaligned_in && misaligned_out_only && aligned && zero && edge) << op;
  }
}

TEST(ActivationGenerator, ShrinksToValidSimplerCases) {
  const OpSpec* spec = find_spec("activation_bwd");
  ASSERT_NE(spec, nullptr);
  const GenPlan plan{11, GenConfig{2048}};
  int64_t shrunk = 0;
  for (int64_t i = 0; i < 200; ++i) {
    const Case c = generate_case(*spec, plan, i);
    for (const Case& s : spec->shrink(c)) {
      ASSERT_TRUE(spec->validate(s).ok()) << s.summary();
      ++shrunk;
    }
  }
  EXPECT_GT(shrunk, 0);
}

TEST(ActivationValidate, RejectsMalformedCasesWithOneLine) {
  const OpSpec* spec = find_spec("activation");
  const OpSpec* bwd = find_spec("activation_bwd");
  ASSERT_NE(spec, nullptr);
  ASSERT_NE(bwd, nullptr);
  const Case good = generate_case(*spec, GenPlan{3, GenConfig{64}}, 0);
  ASSERT_TRUE(spec->validate(good).ok());
  auto expect_bad = [&](const OpSpec& s, Case c, const std::string& needle) {
    const Status st = s.validate(c);
    EXPECT_FALSE(st.ok()) << needle;
    EXPECT_NE(st.message().find(needle), std::string::npos) << st.message();
    EXPECT_EQ(st.message().find('\n'), std::string::npos) << st.message();
  };
  Case c = good;
  c.params["act"] = "relu";
  expect_bad(*spec, c, "params.act");
  c = good;
  c.params["dtype"] = "fp64";
  expect_bad(*spec, c, "params.dtype");
  c = good;
  c.params["count"] = (int64_t{1} << 20) + 1;
  expect_bad(*spec, c, "params.count");
  c = good;
  c.params["x_scale"] = "wide";
  expect_bad(*spec, c, "params.x_scale");
  c = good;
  c.params["relation"] = "shift";
  expect_bad(*spec, c, "relation");
  c = good;
  c.tensors[1].desc.shape = {c.tensors[1].desc.shape[0] + 1};
  expect_bad(*spec, c, "tensor Y");
  c = good;
  c.tensors[0].name = "A";
  expect_bad(*spec, c, "'X'");
  c = good;
  c.tensors.pop_back();
  expect_bad(*spec, c, "tensors, expected");
  c = good;
  c.tensors[0].desc.dtype = c.tensors[0].desc.dtype == DType::kF32 ? DType::kF16 : DType::kF32;
  expect_bad(*spec, c, "tensor X");
  c = good;
  c.op = "activation_bwd";
  expect_bad(*bwd, c, "tensors, expected");  // a forward case has no dY
}

TEST(ActivationRegistry, FindsTheKernelVariantsByName) {
  for (const char* op : {"activation", "activation_bwd"}) {
    const VariantDef* v = find_variant(op, "elementwise");
    ASSERT_NE(v, nullptr) << op;
    EXPECT_TRUE(static_cast<bool>(v->launch));
    EXPECT_EQ(v->contract.arithmetic(), Arithmetic{}) << op << ": the kernel is built without fast-math";
    EXPECT_EQ(find_variant(op, "no_such_variant"), nullptr);
  }
  EXPECT_NE(find_variant("activation", "mutant_gelu_tanh_wrong_const"), nullptr);
  EXPECT_NE(find_variant("activation_bwd", "mutant_silu_bwd_missing_term"), nullptr);
  EXPECT_EQ(parse_act("gelu_tanh"), Act::kGeluTanh);
  EXPECT_FALSE(parse_act("gelu"));
  for (Act a : kAllActs) EXPECT_EQ(parse_act(act_name(a)), a);
}

// ---- the declared arithmetic: fast-math intrinsics and flush-to-zero ---------------------------------------

Arithmetic fast_math() {
  Arithmetic a;
  a.fast_math = a.ftz = true;
  return a;
}

TEST(ActivationFastMath, CeilingAdmitsTheIntrinsicsWorstCaseWhichTheIeeeCeilingRejects) {
  ASSERT_EQ(fast_math(), Contract().fast_math().arithmetic());
  // The table's __tanhf entry: tanh.approx.f32's documented 2^-11 relative.
  EXPECT_EQ(fast_tanh_rel(), 0x1p-11);
  const std::vector<float> xs = fp32_sweep();
  for (Act a : kAllActs) {
    int64_t ieee_bad = 0;
    for (Form f : {Form::kAccurate, Form::kTextbook}) {
      int64_t fast_bad = 0;
      for (float x : xs) {
        if (a == Act::kGeluTanh && f == Form::kTextbook && std::fabs(x) > 1.8e19f) continue;  // see above
        const double y = fwd32<FastWorst>(a, f, x);
        const double g = static_cast<double>(-3.5f * grad32<FastWorst>(a, f, x));
        const ActivationPoint pf = activation_fwd_point(a, DType::kF32, x, fast_math());
        const ActivationPoint qf = activation_bwd_point(a, DType::kF32, x, -3.5, fast_math());
        if (!accepted(y, pf, DType::kF32) && fast_bad++ < 3) ADD_FAILURE() << show(a, f, "fast forward", x, y, pf);
        if (!accepted(g, qf, DType::kF32) && fast_bad++ < 3) ADD_FAILURE() << show(a, f, "fast backward", x, g, qf);
        ieee_bad += !accepted(y, activation_fwd_point(a, DType::kF32, x), DType::kF32);
        ieee_bad += !accepted(g, activation_bwd_point(a, DType::kF32, x, -3.5), DType::kF32);
      }
      EXPECT_EQ(fast_bad, 0) << act_name(a) << (f == Form::kAccurate ? " accurate" : " textbook");
    }
    // gelu_erf has no intrinsic but the pdf's __expf, whose error stays inside the allowance for the
    // textbook cdf's cancellation: the IEEE ceiling admits it. The others' worst cases break it.
    if (a != Act::kGeluErf) {
      EXPECT_GT(ieee_bad, 0) << act_name(a) << ": the IEEE ceiling admits the fast-math worst case everywhere";
    }
    RecordProperty(fmt::format("{}_ieee_rejects", act_name(a)), std::to_string(ieee_bad));
  }
}

TEST(ActivationFastMath, FlushToZeroIsAdmittedOnlyUnderAnFtzContract) {
  Arithmetic ftz;
  ftz.ftz = true;
  // silu at x = -87.5: exp(-87.5) is subnormal, flushed, and y = x e / (1 + e) becomes 0, while
  // |y| = 87.5 e^-87.5 is about 75 min_normal, past the IEEE underflow floor.
  {
    const ActivationPoint i = activation_fwd_point(Act::kSilu, DType::kF32, -87.5);
    const ActivationPoint z = activation_fwd_point(Act::kSilu, DType::kF32, -87.5, ftz);
    EXPECT_GT(std::fabs(i.ref), 50 * min_normal(DType::kF32));
    EXPECT_FALSE(accepted(0.0, i, DType::kF32)) << i.tol;
    EXPECT_TRUE(accepted(0.0, z, DType::kF32)) << z.tol;
  }
  // silu' at x = -87.5: the sigmoid s = e / (1 + e) flushes and g = s (1 + x (1 - s)) becomes 0,
  // while |g| = 86.5 s is about 74 min_normal.
  {
    const ActivationPoint i = activation_bwd_point(Act::kSilu, DType::kF32, -87.5, 1.0);
    const ActivationPoint z = activation_bwd_point(Act::kSilu, DType::kF32, -87.5, 1.0, ftz);
    EXPECT_GT(std::fabs(i.ref), 50 * min_normal(DType::kF32));
    EXPECT_FALSE(accepted(0.0, i, DType::kF32)) << i.ref << " " << i.tol;
    EXPECT_TRUE(accepted(0.0, z, DType::kF32)) << z.ref << " " << z.tol;
  }
  // A subnormal input flushed: y = 0 (within both: the IEEE floor covers |y| < min_normal).
  for (Act a : kAllActs) {
    const ActivationPoint z = activation_fwd_point(a, DType::kF32, -1e-39, ftz);
    EXPECT_TRUE(accepted(0.0, z, DType::kF32)) << act_name(a);
    const ActivationPoint q = activation_bwd_point(a, DType::kF32, 1.0, 1e-39, ftz);
    EXPECT_TRUE(accepted(0.0, q, DType::kF32)) << act_name(a);
  }
}

// cuDNN's SiLU backward works from the saved output (convention silu_grad_from_output):
// g = y + s (1 - y), which cancels at large |x| (y ~ x, s (1 - y) ~ -x). Emulated in fp32 over the
// dense sweep, and in fp16 / bf16 over every finite input (y stored in the data type), it stays
// inside the ceiling under the convention and leaves the plain one at large |x|: measured on an
// H100, cuDNN gave 0 for dx = dy at x near FLT_MAX.
TEST(ActivationConvention, SiluGradFromTheSavedOutputHoldsItsCeiling) {
  const OpDef* op = find_op("activation_bwd");
  ASSERT_NE(op, nullptr);
  ASSERT_TRUE(op->conventions.count("silu_grad_from_output"));
  ASSERT_TRUE(op->vendor.contract.has_convention("silu_grad_from_output"));
  int64_t elements = 0, beyond_plain = 0;
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
    std::vector<float> inputs = dt == DType::kF32 ? fp32_sweep() : std::vector<float>();
    for (uint32_t b = 0; dt != DType::kF32 && b < 0x10000; ++b)
      inputs.push_back(dt == DType::kF16 ? f16_bits_to_f32(static_cast<uint16_t>(b))
                                         : bf16_bits_to_f32(static_cast<uint16_t>(b)));
    std::vector<double> xs, dys;
    for (float x : inputs) {
      const float xr = static_cast<float>(round_to_dt(dt, x));
      if (!std::isfinite(xr)) continue;
      for (float dy : {1.0f, -3.5f, 0.25f}) xs.push_back(xr), dys.push_back(dy);
    }
    const int64_t n = static_cast<int64_t>(xs.size());
    const nlohmann::json params = {{"dtype", std::string(dtype_name(dt))}, {"act", "silu"}, {"count", n}};
    auto c = build_case(*op, params, {ValueRecipe{}, ValueRecipe{}}, std::vector<Layout>(3));
    ASSERT_TRUE(c.ok()) << c.status().message();
    const std::vector<HostTensor> t = {{xs.data(), {1, n, n}}, {dys.data(), {1, n, n}}};
    std::vector<OutputRef> plain, conv;
    ASSERT_TRUE(op->reference(*c, t, plain).ok());
    conv = plain;
    ASSERT_TRUE(op->bound(*c, Arithmetic{}, t, plain).ok());
    Case cc = *c;
    cc.params["conventions"] = {"silu_grad_from_output"};
    ASSERT_TRUE(op->bound(cc, Arithmetic{}, t, conv).ok());
    for (int64_t i = 0; i < n; ++i) {
      const float x = static_cast<float>(xs[static_cast<size_t>(i)]), dy = static_cast<float>(dys[static_cast<size_t>(i)]);
      const float s = 1.0f / (1.0f + std::exp(-x));
      const float y = static_cast<float>(round_to_dt(dt, x * s));
      const float g = y + s * (1.0f - y);
      const double dx = round_to_dt(dt, dy * g);
      const double ref = conv[0].ref[static_cast<size_t>(i)], tol = conv[0].tol[static_cast<size_t>(i)];
      if (!std::isfinite(ref) || std::isinf(tol) || !std::isfinite(dx)) continue;
      ++elements;
      ASSERT_LE(std::fabs(dx - ref), tol) << dtype_name(dt) << " x = " << x << " dy = " << dy << ": dx " << dx;
      beyond_plain += std::fabs(dx - ref) > plain[0].tol[static_cast<size_t>(i)] ? 1 : 0;
    }
  }
  std::printf("[ measured ] SiLU' from the saved output: %lld elements inside the convention's ceiling, %lld "
              "beyond the plain one\n",
              static_cast<long long>(elements), static_cast<long long>(beyond_plain));
  EXPECT_GT(beyond_plain, 0) << "the emulation never leaves the plain ceiling: it does not exercise the model";
}

TEST(ActivationFastMath, VariantsDeclaringFastMathGetTheLooserCeilingThroughTheEngine) {
  // The op's bound reads the Arithmetic the engine passes from the variant's contract.
  const OpDef* op = find_op("activation");
  ASSERT_NE(op, nullptr);
  ASSERT_TRUE(static_cast<bool>(op->bound));
  const nlohmann::json params = {{"dtype", "fp32"}, {"act", "silu"}, {"count", 3}};
  auto c = build_case(*op, params, {ValueRecipe{}}, std::vector<Layout>(2));
  ASSERT_TRUE(c.ok()) << c.status().message();
  const std::vector<double> xs = {-80.0, 2.0, -87.5}, ys(3, 0.0);
  const std::vector<HostTensor> t = {{xs.data(), {1, 3, 3}}, {ys.data(), {1, 3, 3}}};
  std::vector<OutputRef> ieee, fast;
  ASSERT_TRUE(op->reference(*c, t, ieee).ok());
  fast = ieee;
  ASSERT_TRUE(op->bound(*c, Arithmetic{}, t, ieee).ok());
  ASSERT_TRUE(op->bound(*c, fast_math(), t, fast).ok());
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(ieee[0].tol[i], activation_fwd_point(Act::kSilu, DType::kF32, xs[i]).tol);
    EXPECT_EQ(fast[0].tol[i], activation_fwd_point(Act::kSilu, DType::kF32, xs[i], fast_math()).tol);
    EXPECT_GT(fast[0].tol[i], ieee[0].tol[i]) << xs[i];
  }
}

}  // namespace
}  // namespace assay::rowwise

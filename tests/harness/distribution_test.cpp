// The generators' real distribution against the nominal one the op declarations state:
// every weighted choice, dtype, flag and real param of every op is drawn as often as its
// weights say (a size-scaled draw once made attention draw fp32 2% of the time against a
// nominal 20%); each tensor draws its own padding; attention draws square and non-square
// problems; activation inputs reach the far tails where the functions' conditioning changes;
// triage sweeps each op's own extents.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "harness/executor.h"
#include "harness/op_model.h"
#include "harness/spec.h"
#include "harness/tensor.h"
#include "harness/triage.h"
#include "harness/values.h"

namespace assay {
namespace {

constexpr int64_t kCases = 3000;

std::vector<Case> draw(const OpSpec& spec, uint64_t seed, int64_t n = kCases) {
  std::vector<Case> out;
  out.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out.push_back(generate_case(spec, GenPlan{seed, GenConfig{}}, i));
  return out;
}

bool same_value(const nlohmann::json& a, const nlohmann::json& b) {
  if (a.is_number() && b.is_number()) return a.get<double>() == b.get<double>();
  return a == b;
}

// Params whose draws an op deliberately reshapes after drawing them (OpDef::couple), with
// the reason; their marginal frequencies are not the declared weights.
const std::map<std::string, std::string>& reshaped() {
  static const std::map<std::string, std::string> m = {
      {"gemm/alpha", "the exact tier ties alpha to integer inputs (couple)"},
      {"gemm/beta", "the exact tier ties beta to integer inputs (couple)"},
      {"gemm_tc/alpha", "the exact tier ties alpha to integer inputs (gemm_common couple)"},
      {"gemm_tc/beta", "the exact tier ties beta to integer inputs (gemm_common couple)"},
      {"gemm_batched/alpha", "the exact tier ties alpha to integer inputs (gemm_common couple)"},
      {"gemm_batched/beta", "the exact tier ties beta to integer inputs (gemm_common couple)"},
  };
  return m;
}

TEST(GeneratorDistribution, WeightedParamsAreDrawnAsDeclared) {
  int checked = 0;
  std::vector<std::string> off;
  for (const OpSpec* spec : all_specs()) {
    const OpDef* op = find_op(spec->name());
    ASSERT_NE(op, nullptr) << spec->name();
    const auto cases = draw(*spec, 11);
    for (const ParamDef& d : op->params) {
      // Unconditional params with a value list: conditional or optional ones are drawn
      // only where their condition holds, ints inside ranges and caps.
      if (d.kind == ParamKind::kInt || d.when || d.absent_weight > 0 || d.values.size() < 2) continue;
      if (reshaped().count(spec->name() + "/" + d.name)) continue;
      double total = 0;
      for (size_t k = 0; k < d.values.size(); ++k) total += k < d.weights.size() ? double(d.weights[k]) : 1.0;
      for (size_t k = 0; k < d.values.size(); ++k) {
        const double nominal = (k < d.weights.size() ? double(d.weights[k]) : 1.0) / total;
        int64_t hits = 0;
        for (const Case& c : cases) hits += c.params.contains(d.name) && same_value(c.params[d.name], d.values[k]);
        const double got = static_cast<double>(hits) / kCases;
        const double sigma = std::sqrt(nominal * (1 - nominal) / kCases);
        ++checked;
        if (std::fabs(got - nominal) > 5 * sigma + 0.02)
          off.push_back(fmt::format("{}.{} = {}: drawn {:.3f}, declared {:.3f}", spec->name(), d.name,
                                    d.values[k].dump(), got, nominal));
      }
    }
  }
  std::printf("[ measured ] %d declared frequencies checked over %lld cases per op\n", checked,
              static_cast<long long>(kCases));
  EXPECT_GT(checked, 100);
  for (const auto& line : off) ADD_FAILURE() << line;
}

TEST(GeneratorDistribution, EachTensorDrawsItsOwnPadding) {
  // A kernel that uses one tensor's leading dimension for another's is caught only where
  // their pads differ: in a good share of the cases of every op with two padded tensors.
  for (const OpSpec* spec : all_specs()) {
    const OpDef* op = find_op(spec->name());
    int padded = 0;
    for (const auto& t : op->tensors) padded += t.padded && (t.dims.size() >= 2 || t.shape);
    if (padded < 2) continue;
    int64_t differ = 0, n = 0;
    for (const Case& c : draw(*spec, 12, 600)) {
      std::vector<int64_t> pads;
      for (const auto& t : c.tensors) {
        const auto& d = t.desc;
        if (d.rank() >= 2) pads.push_back(d.strides[d.shape.size() - 2] - std::max<int64_t>(d.shape.back(), 1));
      }
      if (pads.size() < 2) continue;
      ++n;
      bool any = false;
      for (size_t i = 1; i < pads.size(); ++i) any |= pads[i] != pads[0];
      differ += any;
    }
    if (n == 0) continue;
    EXPECT_GT(static_cast<double>(differ) / static_cast<double>(n), 0.25)
        << spec->name() << ": tensors of a case differ in padding in " << differ << " of " << n;
  }
}

TEST(GeneratorDistribution, AttentionDrawsSquareAndNonSquareProblems) {
  const OpSpec* spec = find_spec("attention");
  ASSERT_NE(spec, nullptr);
  int64_t square = 0;
  const auto cases = draw(*spec, 13, 2000);
  for (const Case& c : cases) square += c.params.value("Sq", int64_t{0}) == c.params.value("Sk", int64_t{-1});
  const double share = static_cast<double>(square) / static_cast<double>(cases.size());
  std::printf("[ measured ] attention: Sq == Sk in %.1f%% of %zu cases\n", 100 * share, cases.size());
  EXPECT_GT(share, 0.1);
  EXPECT_LT(share, 0.9);
}

TEST(GeneratorDistribution, ActivationInputsReachTheFarTails) {
  // GELU's 1 + erf(x / sqrt 2) cancels for x < -3; silu's exp(-x) overflows beyond 88:
  // fp32 cases must put inputs there, not only near the origin.
  const OpSpec* spec = find_spec("activation");
  ASSERT_NE(spec, nullptr);
  int64_t fp32 = 0, below_minus3 = 0, beyond_88 = 0;
  for (const Case& c : draw(*spec, 14, 1500)) {
    const TensorSpec& x = c.tensors.front();
    if (x.desc.dtype != DType::kF32) continue;
    ++fp32;
    std::vector<unsigned char> img(static_cast<size_t>(x.desc.extent()) * 4 + 16);
    materialize(x.desc, x.values, fnv1a64(x.name.data(), x.name.size()), img.data());
    bool lo = false, hi = false;
    for (int64_t i = 0; i < x.desc.extent(); ++i) {
      const double v = load_as_double(DType::kF32, img.data() + static_cast<size_t>(i) * 4);
      lo |= v < -3, hi |= std::fabs(v) > 88 && std::isfinite(v);
    }
    below_minus3 += lo, beyond_88 += hi;
  }
  std::printf("[ measured ] activation fp32: x < -3 in %lld of %lld cases, |x| > 88 in %lld\n",
              static_cast<long long>(below_minus3), static_cast<long long>(fp32), static_cast<long long>(beyond_88));
  ASSERT_GT(fp32, 100);
  EXPECT_GT(below_minus3 * 4, fp32);  // a quarter of the fp32 cases at least
  EXPECT_GT(beyond_88 * 20, fp32);
}

// Triage sweeps each op's own extents: for every op they are found in its cases, and moving
// one by +-1 gives a valid case of the op (the sweep then has neighbours to run).
TEST(TriageSweep, EveryOpSweepsItsOwnExtents) {
  for (const OpSpec* spec : all_specs()) {
    int moved = 0, tried = 0;
    std::vector<std::string> keys;
    for (const Case& c : draw(*spec, 15, 20)) {
      keys = sweep_params(c);
      ASSERT_FALSE(keys.empty()) << spec->name() << ": no extent to sweep in " << c.summary();
      for (const auto& k : keys)
        for (int64_t d : {-1, 1}) {
          const int64_t v = c.params[k].get<int64_t>() + d * sweep_step(c, k);
          if (v < 1) continue;
          ++tried;
          moved += spec->with_param(c, k, v).ok();
        }
    }
    // Some neighbours leave the op's domain (a cap, an even head dimension); most must not.
    EXPECT_GT(moved * 2, tried) << spec->name() << ": " << moved << " of " << tried << " sweep steps valid; keys "
                                << fmt::format("{}", fmt::join(keys, ","));
  }
}

// A sweep step may leave a param's range (a conv stride of 0, a size of -1, a huge one): the
// moved case is refused with invalid_argument before any shape is computed from it (a conv
// stride of 0 once reached a division by zero in triage), and only an unknown param is
// "not variable".
TEST(TriageSweep, ValuesOutsideAParamsRangeAreRefusedNotComputed) {
  for (const OpSpec* spec : all_specs())
    for (const Case& c : draw(*spec, 3, 21))
      for (const auto& d : find_op(c.op)->params) {
        if (d.kind != ParamKind::kInt || !c.params.contains(d.name)) continue;
        const int64_t above = d.hi < std::numeric_limits<int64_t>::max() ? d.hi + 1 : d.lo - 1;
        for (int64_t v : {d.lo - 1, int64_t{0}, int64_t{-1}, above}) {
          if (v >= d.lo && v <= d.hi) continue;
          const auto moved = spec->with_param(c, d.name, v);
          ASSERT_FALSE(moved.ok()) << spec->name() << "." << d.name << " = " << v;
          EXPECT_EQ(moved.status().code(), StatusCode::kInvalidArgument) << moved.status().message();
        }
      }
  const OpSpec* conv = find_spec("conv2d");
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->with_param(draw(*conv, 1, 22).front(), "no_such_param", 1).status().code(),
            StatusCode::kUnavailable);
}

}  // namespace
}  // namespace assay

// The gemm generator's reach (CPU): every value class, special-value
// injection, each layout knob and the exact tier appear within a bounded
// number of draws; stored cases rebuild without any generator; launchers
// reject invalid shapes with an error.
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "harness/executor.h"
#include "harness/spec.h"
#include "harness/testbeds/gemm_f32.h"
#include "harness/values.h"
#include "kernels/gemm/gemm.h"

namespace assay {
namespace {

TEST(GemmGenerator, ReachesEveryClassLayoutAndSpecial) {
  const OpSpec& spec = *find_spec("gemm");
  const GenPlan plan{99, GenConfig{256}};
  std::set<ValueClass> classes;
  bool injected = false, padded = false, offset = false, ta = false, tb = false, exact = false, beta0 = false,
       k0 = false;
  for (int64_t i = 0; i < 3000; ++i) {
    const Case c = generate_case(spec, plan, i);
    ASSERT_TRUE(spec.validate(c).ok()) << c.summary();
    const GemmParams g = *parse_gemm_case(c);
    for (const auto& t : c.tensors) {
      classes.insert(t.values.cls);
      injected |= t.values.inject.active();
      padded |= t.desc.strides[0] > std::max<int64_t>(t.desc.shape[1], 1);
      offset |= t.desc.offset % 4 != 0;  // misaligned for 16-byte vector loads
    }
    ta |= g.trans_a;
    tb |= g.trans_b;
    beta0 |= g.beta == 0;
    k0 |= g.k == 0;
    exact |= c.find("A")->values.cls == ValueClass::kSmallInt && c.find("B")->values.cls == ValueClass::kSmallInt &&
             !c.find("A")->values.inject.active();
  }
  for (ValueClass v : {ValueClass::kNormal, ValueClass::kUniform, ValueClass::kSameSign, ValueClass::kSmallInt,
                       ValueClass::kLogUniform, ValueClass::kPareto, ValueClass::kMeanSpread, ValueClass::kNearOverflow,
                       ValueClass::kSubnormal, ValueClass::kSignedZero, ValueClass::kOneHot, ValueClass::kPermutation})
    EXPECT_TRUE(classes.count(v)) << value_class_name(v) << " never drawn";
  EXPECT_TRUE(injected && padded && offset && ta && tb && exact && beta0 && k0);
}

TEST(StoredCase, RebuildsBitIdenticallyWithoutTheGenerator) {
  // tests/fixtures/gemm_case_v1.json was written by an earlier assay; its
  // inputs are pinned by hash. Nothing here calls a generator.
  std::ifstream in(std::string(ASSAY_SOURCE_DIR) + "/tests/fixtures/gemm_case_v1.json");
  ASSERT_TRUE(in);
  auto c = Case::from_json(nlohmann::json::parse(in), "gemm_case_v1.json");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  uint64_t h = 0xcbf29ce484222325ull;
  for (const auto& t : c->tensors) {
    std::vector<unsigned char> buf(static_cast<size_t>(t.desc.extent()) * dtype_size(t.desc.dtype));
    materialize(t.desc, t.values, fnv1a64(t.name.data(), t.name.size()), buf.data());
    h = fnv1a64(buf.data(), buf.size(), h);
  }
  EXPECT_EQ(h, 0x99ff9b5d2b592b0full) << std::hex << "actual 0x" << h;
}

TEST(GemmLaunchers, RejectInvalidShapesWithAnError) {
  // Validation happens before any launch, so this needs no GPU.
  kernels::GemmF32Args a;
  a.m = 4, a.n = 4, a.k = 8, a.lda = 7, a.ldb = 4, a.ldc = 4;  // lda < k
  EXPECT_EQ(kernels::gemm_f32_naive(a, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kernels::gemm_f32_tiled(a, nullptr), cudaErrorInvalidValue);
  a.lda = 8;
  a.ldc = 3;  // ldc < n
  EXPECT_EQ(kernels::gemm_f32_tiled(a, nullptr), cudaErrorInvalidValue);
  a.ldc = 4;
  a.m = -1;
  EXPECT_EQ(kernels::gemm_f32_naive(a, nullptr), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace assay

namespace assay {
namespace {

TEST(GemmBwdGenerator, CasesValidateAndShrinkTowardSmallOnes) {
  const OpSpec& spec = *find_spec("gemm_bwd");
  const GenPlan plan{3, GenConfig{96}};
  for (int64_t i = 0; i < 500; ++i) {
    const Case c = generate_case(spec, plan, i);
    ASSERT_TRUE(spec.validate(c).ok()) << spec.validate(c).to_string();
    for (const Case& s : spec.shrink(c)) ASSERT_TRUE(spec.validate(s).ok()) << s.summary();
  }
}

}  // namespace
}  // namespace assay

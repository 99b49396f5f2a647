// CPU tests of the batched GEMM spec (properties/gemm_batched.cpp): the generator covers its
// edges and round-trips, malformed cases get one-line errors, the reference is per entry (with A
// broadcast), and the permute_batches relation moves whole entries and maps them back exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

#include "harness/campaign.h"
#include "harness/spec.h"
#include "harness/values.h"
#include "properties/gemm_batched_registry.h"

namespace assay {
namespace {

TEST(GemmBatchedGen, CasesValidateCoverTheEdgesAndRoundTrip) {
  const OpSpec* spec = find_spec("gemm_batched");
  ASSERT_NE(spec, nullptr);
  const GenPlan plan{11, GenConfig{2048}};
  bool k0 = false, broadcast = false, relation = false, exact = false, specials = false, odd_batch = false,
       tail = false, gap = false, ta = false, tb = false, beta0 = false;
  for (int64_t i = 0; i < 400; ++i) {
    const Case c = generate_case(*spec, plan, i);
    ASSERT_TRUE(spec->validate(c).ok()) << c.summary() << ": " << spec->validate(c).message();
    const auto& p = c.params;
    k0 |= p["k"].get<int64_t>() == 0;
    broadcast |= p["broadcast_a"].get<bool>() && p["batch"].get<int64_t>() > 1;
    relation |= p.contains("relation");
    exact |= c.tensors[0].values.cls == ValueClass::kSmallInt && c.tensors[1].values.cls == ValueClass::kSmallInt &&
             c.tensors[2].values.cls == ValueClass::kSmallInt;
    for (const auto& t : c.tensors) specials |= t.values.inject.active();
    odd_batch |= p["batch"].get<int64_t>() % 2 == 1 && p["batch"].get<int64_t>() > 1;
    tail |= p["m"].get<int64_t>() % 32 != 0 && p["m"].get<int64_t>() > 32;
    gap |= c.tensors[2].desc.strides[0] > c.tensors[2].desc.shape[1];
    ta |= p["trans_a"].get<bool>(), tb |= p["trans_b"].get<bool>();
    beta0 |= p["beta"].get<double>() == 0;
    EXPECT_NE(p["alpha"].get<double>(), 0.0);
    auto back = Case::from_json(c.to_json());
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(back->id(), c.id());
    if (i < 20) {
      for (const Case& s : spec->shrink(c)) EXPECT_TRUE(spec->validate(s).ok()) << s.summary();
    }
  }
  EXPECT_TRUE(k0 && broadcast && relation && exact && specials && odd_batch && tail && gap && ta && tb && beta0);
}

Case small_case(bool broadcast, int64_t batch) {
  nlohmann::json p;
  p["m"] = 2, p["n"] = 3, p["k"] = 4, p["batch"] = batch, p["trans_a"] = false, p["trans_b"] = true;
  p["broadcast_a"] = broadcast, p["pad_in"] = 1, p["alpha"] = 2.0, p["beta"] = 1.0;
  ValueRecipe r;
  r.cls = ValueClass::kSmallInt;
  return gemm_batched::build_batched_case(p, {r, r, r}, 2, 1);
}

TEST(GemmBatchedGen, MalformedCasesGetOneLineErrors) {
  const OpSpec* spec = find_spec("gemm_batched");
  ASSERT_NE(spec, nullptr);
  Case c = small_case(false, 3);
  ASSERT_TRUE(spec->validate(c).ok()) << spec->validate(c).message();
  Case bad = c;
  bad.params["alpha"] = 0.0;
  EXPECT_NE(spec->validate(bad).message().find("alpha"), std::string::npos);
  bad = c;
  bad.params["batch"] = 4;  // tensors still for 3
  EXPECT_NE(spec->validate(bad).message().find("tensor A"), std::string::npos);
  bad = c;
  bad.params["relation"] = "bogus";
  EXPECT_NE(spec->validate(bad).message().find("relation"), std::string::npos);
  for (const Case& x : {bad}) EXPECT_EQ(spec->validate(x).message().find('\n'), std::string::npos);
}

/// Host images of a case's tensors decoded to double (dense, ld as in the case).
struct Images {
  std::vector<std::vector<double>> data;
  std::vector<HostTensor> views;
};
Images images_of(const Case& c) {
  Images im;
  for (const auto& t : c.tensors) {  // fp32 tensors: the image is floats
    std::vector<float> raw(static_cast<size_t>(t.desc.extent()));
    materialize(t.desc, t.values, fnv1a64(t.name.data(), t.name.size()), raw.data());
    im.data.emplace_back(raw.begin(), raw.end());
  }
  for (size_t i = 0; i < c.tensors.size(); ++i)
    im.views.push_back({im.data[i].data() + c.tensors[i].desc.offset, view_of(c.tensors[i].desc)});
  return im;
}

TEST(GemmBatchedRef, EachEntryIsItsOwnGemmAndBroadcastSharesA) {
  for (bool broadcast : {false, true}) {
    const Case c = small_case(broadcast, 3);
    Images im = images_of(c);
    std::vector<OutputRef> out;
    ASSERT_TRUE(gemm_batched::batched_def().reference(c, im.views, out).ok());
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(out[0].exact);
    const int64_t lda = 4 + 1, ldb = 4 + 1;  // A 2x4, B^T stored 3x4, pad_in 1
    for (int64_t z = 0; z < 3; ++z)
      for (int64_t i = 0; i < 2; ++i)
        for (int64_t j = 0; j < 3; ++j) {
          double acc = 0;
          for (int64_t q = 0; q < 4; ++q)
            acc += im.views[0].at(broadcast ? 0 : z, i * lda + q) * im.views[1].at(z, j * ldb + q);
          const double want = 2 * acc + im.views[2].at(z, i * 3 + j);
          EXPECT_EQ(out[0].ref[static_cast<size_t>(z * 6 + i * 3 + j)], want);
        }
  }
}

/// The relation's transform on the case's fp32 images, then the reference of the transformed
/// inputs against relate's mapping of the original reference: equal, element for element
/// (the transforms are exact: moves, transposes and doublings of small integers).
void expect_relation_consistent(Case c, const std::string& relation) {
  c.params["relation"] = relation;
  const TensorOpDef& def = gemm_batched::batched_def();
  Images im = images_of(c);
  std::vector<OutputRef> ref1;
  ASSERT_TRUE(def.reference(c, im.views, ref1).ok());
  std::vector<std::vector<float>> raw;
  std::vector<unsigned char*> ptrs;
  for (const auto& d : im.data) raw.emplace_back(d.begin(), d.end());
  for (auto& r : raw) ptrs.push_back(reinterpret_cast<unsigned char*>(r.data()));
  ASSERT_TRUE(def.transform(c, ptrs)) << relation;
  Images im2;
  for (const auto& r : raw) im2.data.emplace_back(r.begin(), r.end());
  for (size_t i = 0; i < c.tensors.size(); ++i)
    im2.views.push_back({im2.data[i].data() + c.tensors[i].desc.offset, view_of(c.tensors[i].desc)});
  std::vector<OutputRef> ref2;
  ASSERT_TRUE(def.reference(c, im2.views, ref2).ok());
  const int64_t batch = c.params["batch"].get<int64_t>(), mn = c.params["m"].get<int64_t>() * c.params["n"].get<int64_t>();
  std::set<std::pair<int64_t, int64_t>> sources;
  int64_t moved = 0;
  for (int64_t z = 0; z < batch; ++z)
    for (int64_t j = 0; j < mn; ++j) {
      RelatedElement e;
      ASSERT_TRUE(def.relate(c, 0, z, j, e));
      sources.insert({e.from_i, e.from_j});
      moved += e.from_i != z || e.from_j != j || e.scale != 1;
      EXPECT_EQ(ref2[0].ref[static_cast<size_t>(z * mn + j)],
                e.scale * ref1[0].ref[static_cast<size_t>(e.from_i * mn + e.from_j)])
          << relation << " at entry " << z << " element " << j;
    }
  EXPECT_EQ(static_cast<int64_t>(sources.size()), batch * mn) << relation << ": relate is a bijection";
  EXPECT_GT(moved, 0) << relation << " relates nothing but identities";
}

TEST(GemmBatchedRelation, TransformsAndRelateAgreeOnTheReference) {
  expect_relation_consistent(small_case(false, 5), "permute_batches");
  expect_relation_consistent(small_case(true, 3), "scale2");
  Case sq = small_case(false, 3);
  sq.params["n"] = 2, sq.params["k"] = 2, sq.params["trans_b"] = true;
  ValueRecipe r;
  r.cls = ValueClass::kSmallInt;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      nlohmann::json p = sq.params;
      p["trans_a"] = ta, p["trans_b"] = tb;
      expect_relation_consistent(gemm_batched::build_batched_case(p, {r, r, r}, 2, 1), "transpose");
    }
}

}  // namespace
}  // namespace assay

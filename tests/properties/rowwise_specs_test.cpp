// The rope, embedding and cross-entropy specs on the CPU: generated cases
// validate (and reach the edges the specs name), malformed cases are refused
// with a one-line error naming the field, shrinking gives valid smaller cases;
// and each bound accepts a float-precision host implementation of the op on
// random inputs (judged exactly as the device check judges: value within the
// tolerance, the NaN/Inf pattern, the exact tier) while rejecting the planted
// bugs' formulas (rope_wrong_pairing, embedding_bwd_overwrite,
// ce_ignore_index_ignored, ce_smoothing_wrong).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "harness/bounds.h"
#include "harness/executor.h"
#include "harness/op_model.h"
#include "harness/spec.h"
#include "harness/values.h"

namespace assay {
namespace {

const std::vector<std::string> kRowOps = {"rope", "embedding", "embedding_bwd", "cross_entropy"};

int64_t row_numel(const Case& c) {
  int64_t n = 0;
  for (const auto& t : c.tensors) n += t.desc.numel();
  return n;
}

// ---- generators, validation, shrinking ------------------------------------------------------

class RowwiseSpecsGen : public ::testing::TestWithParam<std::string> {};

TEST_P(RowwiseSpecsGen, CasesValidateRoundTripAndShrinkToValidSmallerCases) {
  const OpSpec* spec = find_spec(GetParam());
  ASSERT_NE(spec, nullptr) << GetParam();
  const GenPlan plan{11, GenConfig{4096}};
  std::set<std::string> dtypes, relations;
  std::set<ValueClass> classes;
  bool padded = false, offset = false, special = false;
  bool interleaved = false, inverse = false, far_positions = false;       // rope
  bool duplicates = false, idx_injected = false, exact = false;           // embedding
  bool ignored = false, smoothed = false, oob = false, inf_rows = false;  // cross_entropy
  for (int64_t i = 0; i < 300; ++i) {
    const Case c = generate_case(*spec, plan, i);
    const Status v = spec->validate(c);
    ASSERT_TRUE(v.ok()) << c.summary() << ": " << v.message();
    auto back = Case::from_json(c.to_json());
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(back->id(), c.id());
    dtypes.insert(c.params["dtype"].get<std::string>());
    classes.insert(c.tensors[0].values.cls);
    const auto& d0 = c.tensors[0].desc;
    padded |= d0.rank() >= 2 && Layout::pad_of(d0) > 0;
    offset |= d0.offset != 0;
    special |= c.tensors[0].values.inject.active();
    if (c.params.contains("relation")) relations.insert(c.params["relation"].get<std::string>());
    if (GetParam() == "rope") {
      interleaved |= c.params["interleaved"].get<bool>();
      inverse |= c.params["inverse"].get<bool>();
      far_positions |= c.params["tokens"].get<int64_t>() >= 1024;
    } else if (GetParam() == "cross_entropy") {
      ignored |= c.params.value("ignore_every", 0) > 0;
      smoothed |= c.params.value("smoothing", 0.0) > 0;
      oob |= c.params.value("oob_targets", false);
      inf_rows |= c.params.value("inf_every", 0) > 0;
    } else {
      duplicates |= c.params["count"].get<int64_t>() > 2 * c.params["vocab"].get<int64_t>();
      idx_injected |= c.find("idx")->values.inject.active();
      exact |= c.tensors[0].values.cls == ValueClass::kSmallInt;
    }
    if (i < 60)
      for (const Case& s : spec->shrink(c)) {
        const Status sv = spec->validate(s);
        EXPECT_TRUE(sv.ok()) << s.summary() << ": " << sv.message();
        EXPECT_LE(row_numel(s), row_numel(c)) << s.summary();
        EXPECT_NE(s.id(), c.id()) << "shrink proposed the case itself: " << s.summary();
      }
  }
  EXPECT_EQ(dtypes.size(), 3u);
  EXPECT_TRUE(padded && offset && special) << padded << offset << special;
  EXPECT_GE(classes.size(), 5u);
  if (GetParam() == "rope") {
    EXPECT_TRUE(interleaved && inverse && far_positions);
    EXPECT_EQ(relations, (std::set<std::string>{"norm", "inverse"}));
  } else if (GetParam() == "cross_entropy") {
    EXPECT_TRUE(ignored && smoothed && oob && inf_rows);
    EXPECT_EQ(relations, (std::set<std::string>{"shift"}));
  } else {
    EXPECT_TRUE(duplicates && idx_injected);
    if (GetParam() == "embedding_bwd") {
      EXPECT_TRUE(exact && relations.count("permute"));
    }
  }
}

TEST_P(RowwiseSpecsGen, ShrinkEndsAtTheSmallestShape) {
  const OpSpec* spec = find_spec(GetParam());
  ASSERT_NE(spec, nullptr);
  Case c = generate_case(*spec, GenPlan{5, GenConfig{4096}}, 17);
  for (int step = 0; step < 200; ++step) {
    const auto s = spec->shrink(c);
    if (s.empty()) break;
    ASSERT_TRUE(spec->validate(s.front()).ok());
    c = s.front();
  }
  EXPECT_TRUE(spec->shrink(c).empty()) << c.summary();
  EXPECT_LE(row_numel(c), 4) << c.summary();
}

TEST_P(RowwiseSpecsGen, MalformedCasesGetOneLineErrorsNamingTheField) {
  const OpSpec* spec = find_spec(GetParam());
  ASSERT_NE(spec, nullptr);
  const Case good = generate_case(*spec, GenPlan{3, GenConfig{64}}, 0);
  ASSERT_TRUE(spec->validate(good).ok());
  auto expect_error = [&](const std::function<void(Case&)>& edit, const std::string& needle) {
    Case c = good;
    edit(c);
    const Status s = spec->validate(c);
    EXPECT_FALSE(s.ok()) << "accepted a case with a bad " << needle;
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
    EXPECT_EQ(s.message().find('\n'), std::string::npos) << s.message();
  };
  expect_error([](Case& c) { c.params.erase("dtype"); }, "dtype");
  expect_error([](Case& c) { c.params["dtype"] = "int8"; }, "dtype");
  expect_error([](Case& c) { c.params["relation"] = "bogus"; }, "relation");
  expect_error([](Case& c) { c.tensors.pop_back(); }, "expected");
  expect_error([](Case& c) { c.tensors[0].name = "Q"; }, "tensor 0");
  if (GetParam() == "rope") {
    expect_error([](Case& c) { c.params["head_dim"] = c.params["head_dim"].get<int64_t>() + 1; }, "head_dim");
    expect_error([](Case& c) { c.params["head_dim"] = 258; }, "head_dim");
    expect_error([](Case& c) { c.params["tokens"] = 4097; }, "tokens");
    expect_error([](Case& c) { c.params["heads"] = 17; }, "heads");
    expect_error([](Case& c) { c.params["base"] = -1.0; }, "base");
    expect_error([](Case& c) { c.params["base"] = 10000.1; }, "base");
    expect_error([](Case& c) { c.params["interleaved"] = 1; }, "interleaved");
    expect_error([](Case& c) { c.params["tokens"] = c.params["tokens"].get<int64_t>() + 1; }, "tensor X");
  } else if (GetParam() == "cross_entropy") {
    expect_error([](Case& c) { c.params["n"] = 0; }, "params.n");
    expect_error([](Case& c) { c.params["smoothing"] = 2.0; }, "smoothing");
    expect_error([](Case& c) { c.params["ignore_index"] = int64_t{1} << 40; }, "ignore_index");
    expect_error([](Case& c) { c.params["ignore_every"] = -1; }, "ignore_every");
    expect_error([](Case& c) { c.params["oob_targets"] = "yes"; }, "oob_targets");
    expect_error(
        [](Case& c) {
          c.params["relation"] = "shift";
          c.params.erase("shift");
        },
        "shift");
    expect_error([](Case& c) { c.tensors[1].desc.dtype = DType::kF32; }, "target");
    expect_error([](Case& c) { c.tensors[2].desc.dtype = DType::kF16; }, "loss");
  } else {
    expect_error([](Case& c) { c.params["vocab"] = 0; }, "vocab");
    expect_error([](Case& c) { c.params["dim"] = 1025; }, "dim");
    expect_error([](Case& c) { c.params["count"] = -1; }, "count");
    expect_error([](Case& c) { c.tensors[1].desc.dtype = DType::kF32; }, "idx");
    // The first tensor whose shape names count: idx (forward), dout (backward).
    expect_error([](Case& c) { c.params["count"] = c.params["count"].get<int64_t>() + 1; },
                 GetParam() == "embedding" ? "tensor idx" : "tensor dout");
    if (GetParam() == "embedding_bwd")
      expect_error([](Case& c) { c.tensors[2].desc.dtype = DType::kF16; }, "dtable");
    else
      expect_error([](Case& c) { c.params["relation"] = "permute"; }, "relation");
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, RowwiseSpecsGen, ::testing::ValuesIn(kRowOps));

// ---- host emulation of the testbed's reference side and device check -------------------------

/// A case's tensors materialised and prepared as the testbed does, decoded, with the references.
struct RowHostRun {
  const Case* c = nullptr;
  std::vector<std::vector<unsigned char>> bytes;
  std::vector<unsigned char*> img;
  std::vector<std::vector<double>> dec;
  std::vector<HostTensor> hv;
  std::vector<OutputRef> refs;
};

void decode_into(const Case& c, const std::vector<unsigned char*>& img, std::vector<std::vector<double>>& dec,
                 std::vector<HostTensor>& hv) {
  dec.assign(c.tensors.size(), {});
  hv.clear();
  for (size_t t = 0; t < c.tensors.size(); ++t) {
    const auto& d = c.tensors[t].desc;
    dec[t].resize(static_cast<size_t>(d.extent()));
    for (int64_t i = 0; i < d.extent(); ++i)
      dec[t][static_cast<size_t>(i)] = load_as_double(d.dtype, img[t] + static_cast<size_t>(i) * dtype_size(d.dtype));
    hv.push_back({dec[t].data() + d.offset, view_of(d)});
  }
}

/// The same for an op declared on the op model: prepare, reference and the bound under IEEE arithmetic.
void run_reference(const OpDef& op, const Case& c, RowHostRun& h, const Arithmetic& a = {}) {
  h.c = &c;
  h.bytes.assign(c.tensors.size(), {});
  h.img.clear();
  for (size_t t = 0; t < c.tensors.size(); ++t) {
    const auto& s = c.tensors[t];
    h.bytes[t].resize(static_cast<size_t>(s.desc.extent()) * dtype_size(s.desc.dtype) + 16);
    h.img.push_back(h.bytes[t].data());
    if (s.role == Role::kOut)
      materialize_output(s.desc, h.img.back());
    else
      materialize(s.desc, s.values, fnv1a64(s.name.data(), s.name.size()), h.img.back());
  }
  if (op.prepare) op.prepare(c, h.img);
  decode_into(c, h.img, h.dec, h.hv);
  Status st = op.reference(c, h.hv, h.refs);
  ASSERT_TRUE(st.ok()) << st.message();
  if (op.bound) st = op.bound(c, a, h.hv, h.refs);
  ASSERT_TRUE(st.ok()) << st.message();
}

/// A case of a model op from params, input recipes and one (pad, offset) for every tensor.
Case model_case(const std::string& op, const nlohmann::json& params, const std::vector<ValueRecipe>& recipes,
                int64_t pad, int64_t off) {
  const OpDef* d = find_op(op);
  EXPECT_NE(d, nullptr) << op;
  auto c = build_case(*d, params, recipes, std::vector<Layout>(d->tensors.size(), Layout{pad, off}));
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? *c : Case{};
}

const OpDef& ce_def() {
  const OpDef* d = find_op("cross_entropy");
  EXPECT_NE(d, nullptr);
  return *d;
}

/// Elements the device check (harness/gpu/check_kernels.cu, tensor-op settings: mag = tol,
/// no overflow magnitude) would flag; `got` dense, already rounded to `out`.
int64_t row_violations(const OutputRef& r, const std::vector<double>& got, DType out, std::string* first = nullptr) {
  int64_t bad = 0;
  for (size_t l = 0; l < got.size(); ++l) {
    const double o = got[l], ref = r.ref[l], tol = r.tol[l];
    const bool may_overflow = !(tol * 2 < INFINITY);
    bool b = false;
    if (std::isnan(ref)) {
      b = !std::isnan(o);
    } else if (std::isinf(ref)) {
      b = !((std::isinf(o) && std::signbit(o) == std::signbit(ref)) || (std::isnan(o) && may_overflow));
    } else if ((std::isnan(o) || std::isinf(o)) && may_overflow) {
    } else if (std::isnan(o)) {
      b = true;
    } else if (std::isinf(o)) {
      b = !(std::fabs(ref) + tol > max_finite(out) && std::signbit(o) == std::signbit(ref));
    } else {
      b = std::fabs(o - ref) > tol || (r.exact && o != ref);
    }
    if (b && bad++ == 0 && first != nullptr)
      *first = fmt::format("element {}: got {:.9g}, reference {:.9g}, tolerance {:.3g}", l, o, ref, tol);
  }
  return bad;
}

/// Rounds dense float results into `t` (as the kernel's store does).
std::vector<double> stored(const std::vector<float>& y, DType t) {
  std::vector<double> out(y.size());
  unsigned char buf[8];
  for (size_t i = 0; i < y.size(); ++i) {
    store_as(t, static_cast<double>(y[i]), buf);
    out[i] = load_as_double(t, buf);
  }
  return out;
}

/// Host views of dense outputs laid out like the case's output tensors (for def.properties).
struct OutViews {
  std::vector<std::vector<double>> store;
  std::vector<HostTensor> hv;
};
OutViews out_views(const Case& c, const std::vector<std::vector<double>>& dense) {
  OutViews o;
  size_t k = 0;
  for (const auto& t : c.tensors) {
    if (t.role == Role::kIn) continue;
    const View2D v = view_of(t.desc);
    std::vector<double> s(static_cast<size_t>(t.desc.extent()), NAN);
    for (int64_t i = 0; i < v.rows; ++i)
      for (int64_t j = 0; j < v.cols; ++j)
        s[static_cast<size_t>(t.desc.offset + i * v.ld + j)] = dense[k][static_cast<size_t>(i * v.cols + j)];
    o.store.push_back(std::move(s));
    ++k;
  }
  k = 0;
  for (const auto& t : c.tensors)
    if (t.role != Role::kIn) o.hv.push_back({o.store[k].data() + t.desc.offset, view_of(t.desc)}), ++k;
  return o;
}

ValueRecipe row_recipe(ValueClass cls, uint64_t seed, double scale = 1) {
  ValueRecipe r;
  r.cls = cls;
  r.seed = seed;
  r.scale = scale;
  return r;
}

// ---- rope ---------------------------------------------------------------------------------------

Case rope_case(DType dt, int64_t tokens, int64_t heads, int64_t d, double base, bool interleaved, bool inverse,
               const ValueRecipe& r, const std::string& relation = "") {
  nlohmann::json p = {
      {"dtype", std::string(dtype_name(dt))}, {"tokens", tokens},  {"heads", heads}, {"head_dim", d}, {"base", base},
      {"interleaved", interleaved},           {"inverse", inverse}};
  if (!relation.empty()) p["relation"] = relation;
  return model_case("rope", p, {r}, 3, 1);
}

const OpDef& rope_op() {
  return *find_op("rope");
}

enum class RopeBug { kNone, kWrongPairing, kPositionPlusOne, kWrongDirection };

/// RoPE in float as the kernel computes it (glibc powf, sinf, cosf), or a planted bug.
std::vector<double> rope_float(const Case& c, const RowHostRun& h, RopeBug bug) {
  const DType dt = *parse_dtype(c.params["dtype"].get<std::string>());
  const int64_t heads = c.params["heads"].get<int64_t>(), d = c.params["head_dim"].get<int64_t>(), half = d / 2;
  const float base = static_cast<float>(c.params["base"].get<double>());
  const bool interleaved = c.params["interleaved"].get<bool>(), inverse = c.params["inverse"].get<bool>();
  const HostTensor& x = h.hv[0];
  std::vector<float> y(static_cast<size_t>(x.v.rows * d));
  for (int64_t r = 0; r < x.v.rows; ++r) {
    const int64_t t = r / heads + (bug == RopeBug::kPositionPlusOne ? 1 : 0);
    for (int64_t i = 0; i < half; ++i) {
      const float inv = std::pow(base, -static_cast<float>(2 * i) / static_cast<float>(d));
      const float th = static_cast<float>(t) * inv;
      float sn = std::sin(th);
      const float cs = std::cos(th);
      if (inverse != (bug == RopeBug::kWrongDirection)) sn = -sn;
      const bool il = interleaved && bug != RopeBug::kWrongPairing;  // the mutant pairs half-split always
      const int64_t ia = il ? 2 * i : i, ib = il ? 2 * i + 1 : i + half;
      const float a = static_cast<float>(x.at(r, ia)), b = static_cast<float>(x.at(r, ib));
      y[static_cast<size_t>(r * d + ia)] = a * cs - b * sn;
      y[static_cast<size_t>(r * d + ib)] = a * sn + b * cs;
    }
  }
  return stored(y, dt);
}

TEST(RopeBound, AcceptsFloatRopeAndRejectsWrongPairing) {
  uint64_t seed = 1;
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16})
    for (bool interleaved : {false, true})
      for (bool inverse : {false, true})
        for (double base : {10000.0, 500000.0}) {
          const Case c = rope_case(dt, 4096, 1, 32, base, interleaved, inverse, row_recipe(ValueClass::kNormal, seed++));
          ASSERT_TRUE(find_spec("rope")->validate(c).ok()) << find_spec("rope")->validate(c).message();
          RowHostRun h;
          run_reference(rope_op(), c, h);
          std::string first;
          EXPECT_EQ(row_violations(h.refs[0], rope_float(c, h, RopeBug::kNone), dt, &first), 0) << c.summary() << first;
          EXPECT_GT(row_violations(h.refs[0], rope_float(c, h, RopeBug::kPositionPlusOne), dt), 0) << c.summary();
          if (interleaved) {
            EXPECT_GT(row_violations(h.refs[0], rope_float(c, h, RopeBug::kWrongPairing), dt), 0) << c.summary();
          }
        }
}

TEST(RopeBound, AcceptsFloatRopeOnEveryValueClass) {
  uint64_t seed = 100;
  for (ValueClass cls : {ValueClass::kUniform, ValueClass::kLogUniform, ValueClass::kSubnormal,
                         ValueClass::kNearOverflow, ValueClass::kSignedZero, ValueClass::kMeanSpread})
    for (DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
      ValueRecipe r = row_recipe(cls, seed++);
      r.inject = {kSpecialAll, 0.02, 0, 0};
      const Case c = rope_case(dt, 600, 3, 256, 10000, (seed & 1) != 0, (seed & 2) != 0, r);
      RowHostRun h;
      run_reference(rope_op(), c, h);
      std::string first;
      EXPECT_EQ(row_violations(h.refs[0], rope_float(c, h, RopeBug::kNone), dt, &first), 0)
          << c.summary() << " " << value_class_name(cls) << ": " << first;
    }
}

TEST(RopeProperties, NormAndInverseHoldForFloatRopeAndCatchAWrongDirection) {
  uint64_t seed = 200;
  for (const char* rel : {"norm", "inverse"})
    for (DType dt : {DType::kF32, DType::kF16, DType::kBF16})
      for (bool inverse : {false, true}) {
        const Case c = rope_case(dt, 2048, 2, 64, 500000, true, inverse, row_recipe(ValueClass::kNormal, seed++), rel);
        ASSERT_TRUE(find_spec("rope")->validate(c).ok());
        RowHostRun h;
        run_reference(rope_op(), c, h);
        for (RopeBug bug : {RopeBug::kNone, RopeBug::kWrongDirection, RopeBug::kWrongPairing}) {
          const OutViews o = out_views(c, {rope_float(c, h, bug)});
          std::vector<Failure> f;
          rope_op().properties(c, h.hv, o.hv, h.refs, f);
          // A rotation in the wrong direction or between the wrong pairs still keeps each pair's
          // norm only in the first case; the inverse relation catches both.
          const bool expect_fail =
              bug != RopeBug::kNone && (std::string(rel) == "inverse" || bug == RopeBug::kWrongPairing);
          EXPECT_EQ(!f.empty(), expect_fail) << rel << " " << c.summary() << " bug " << static_cast<int>(bug)
                                             << (f.empty() ? "" : ": " + f.front().detail);
        }
      }
}

// ---- embedding ------------------------------------------------------------------------------------

ValueRecipe idx_recipe(int64_t vocab, uint64_t seed, bool inject) {
  ValueRecipe r = row_recipe(ValueClass::kSameSign, seed, static_cast<double>(vocab));
  if (inject) r.inject = {kSpecialPosInf | kSpecialNegInf, 0.05, 0, 0};
  return r;
}

/// dtable is the op's output (overwritten: the scatter-sum alone); the atomic kernel's accumulation
/// into it is its contract's business (see InPlaceAccumulation below).
Case embedding_case(bool fwd, DType dt, int64_t vocab, int64_t dim, int64_t count, const ValueRecipe& act,
                    const ValueRecipe& idx, bool permute = false) {
  nlohmann::json p = {{"dtype", std::string(dtype_name(dt))}, {"vocab", vocab}, {"dim", dim}, {"count", count}};
  if (permute) p["relation"] = "permute";
  return model_case(fwd ? "embedding" : "embedding_bwd", p, {act, idx}, 3, 2);
}

enum class EmbBug { kNone, kReverseOrder, kOverwrite, kClampIndex };

std::vector<double> embedding_bwd_float(const RowHostRun& h, EmbBug bug) {
  const HostTensor &dout = h.hv[0], &idx = h.hv[1], &pre = h.hv[2];
  const int64_t vocab = pre.v.rows, dim = pre.v.cols, count = idx.v.cols;
  std::vector<float> t(static_cast<size_t>(vocab * dim), 0.0f);
  for (int64_t k = 0; k < count; ++k) {
    const int64_t r = bug == EmbBug::kReverseOrder ? count - 1 - k : k;
    const int64_t v = static_cast<int64_t>(idx.at(0, r));
    if (v < 0 || v >= vocab) continue;
    for (int64_t j = 0; j < dim; ++j) {
      float& dst = t[static_cast<size_t>(v * dim + j)];
      const float x = static_cast<float>(dout.at(r, j));
      dst = bug == EmbBug::kOverwrite ? x : dst + x;
    }
  }
  return stored(t, DType::kF32);
}

std::vector<double> embedding_fwd_float(const RowHostRun& h, DType dt, EmbBug bug) {
  const HostTensor &table = h.hv[0], &idx = h.hv[1];
  const int64_t vocab = table.v.rows, dim = table.v.cols, count = idx.v.cols;
  std::vector<float> o(static_cast<size_t>(count * dim), 0.0f);
  for (int64_t r = 0; r < count; ++r) {
    int64_t v = static_cast<int64_t>(idx.at(0, r));
    if (bug == EmbBug::kClampIndex) v = std::clamp<int64_t>(v, 0, vocab - 1);
    if (v < 0 || v >= vocab) continue;
    for (int64_t j = 0; j < dim; ++j) o[static_cast<size_t>(r * dim + j)] = static_cast<float>(table.at(v, j));
  }
  return stored(o, dt);
}

TEST(EmbeddingBound, GatherIsExactAndOutOfRangeRowsAreZero) {
  uint64_t seed = 300;
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16})
    for (int64_t vocab : {1, 7, 1000}) {
      ValueRecipe act = row_recipe(ValueClass::kNormal, seed++);
      act.inject = {kSpecialAll, 0.01, 0, 0};
      const Case c = embedding_case(true, dt, vocab, 33, 700, act, idx_recipe(vocab, seed++, true));
      ASSERT_TRUE(find_spec("embedding")->validate(c).ok()) << find_spec("embedding")->validate(c).message();
      RowHostRun h;
      run_reference(*find_op("embedding"), c, h);
      ASSERT_TRUE(h.refs[0].exact);
      std::string first;
      EXPECT_EQ(row_violations(h.refs[0], embedding_fwd_float(h, dt, EmbBug::kNone), dt, &first), 0) << first;
      EXPECT_GT(row_violations(h.refs[0], embedding_fwd_float(h, dt, EmbBug::kClampIndex), dt), 0) << c.summary();
    }
}

TEST(EmbeddingBound, ScatterAddInAnyOrderPassesAndOverwriteIsCaught) {
  uint64_t seed = 400;
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16})
    for (int64_t vocab : {1, 5, 64})
      for (int64_t dim : {1, 33, 129}) {
        ValueRecipe act = row_recipe(ValueClass::kNormal, seed++);
        if (dim == 129) act = row_recipe(ValueClass::kSameSign, seed++, 1000);  // no cancellation, largest sums
        const ValueRecipe idx = idx_recipe(vocab, seed++, true);
        const Case c = embedding_case(false, dt, vocab, dim, 3000 / dim + 40, act, idx);
        ASSERT_TRUE(find_spec("embedding_bwd")->validate(c).ok()) << find_spec("embedding_bwd")->validate(c).message();
        RowHostRun h;
        run_reference(*find_op("embedding_bwd"), c, h);
        std::string first;
        for (EmbBug order : {EmbBug::kNone, EmbBug::kReverseOrder})
          EXPECT_EQ(row_violations(h.refs[0], embedding_bwd_float(h, order), DType::kF32, &first), 0)
              << c.summary() << ": " << first;
        EXPECT_GT(row_violations(h.refs[0], embedding_bwd_float(h, EmbBug::kOverwrite), DType::kF32), 0) << c.summary();
      }
}

TEST(EmbeddingBound, SmallIntegerSumsAreExactTier) {
  uint64_t seed = 500;
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
    ValueRecipe act = row_recipe(ValueClass::kSmallInt, seed++);
    act.int_range = 64;
    const Case c = embedding_case(false, dt, 3, 31, 2000, act, idx_recipe(3, seed++, false));
    RowHostRun h;
    run_reference(*find_op("embedding_bwd"), c, h);
    EXPECT_TRUE(h.refs[0].exact);
    EXPECT_TRUE(std::all_of(h.refs[0].tol.begin(), h.refs[0].tol.end(), [](double t) { return t == 0; }));
    EXPECT_EQ(row_violations(h.refs[0], embedding_bwd_float(h, EmbBug::kReverseOrder), DType::kF32), 0);
    EXPECT_GT(row_violations(h.refs[0], embedding_bwd_float(h, EmbBug::kOverwrite), DType::kF32), 0);
  }
}

TEST(EmbeddingProperties, PermutedRowsGiveTheSameTableWithinBothTolerances) {
  uint64_t seed = 600;
  for (DType dt : {DType::kF32, DType::kBF16}) {
    const ValueRecipe act = row_recipe(ValueClass::kNormal, seed++), idx = idx_recipe(9, seed++, false);
    const Case c = embedding_case(false, dt, 9, 32, 900, act, idx, true);
    ASSERT_TRUE(find_spec("embedding_bwd")->validate(c).ok());
    const OpDef& def = *find_op("embedding_bwd");
    RowHostRun h;
    run_reference(def, c, h);
    const std::vector<double> y1 = embedding_bwd_float(h, EmbBug::kNone);
    // The transformed inputs, as the testbed builds them.
    RowHostRun h2;
    h2.bytes = h.bytes;
    for (auto& b : h2.bytes) h2.img.push_back(b.data());
    ASSERT_TRUE(def.transform(c, h2.img));
    decode_into(c, h2.img, h2.dec, h2.hv);
    ASSERT_TRUE(def.reference(c, h2.hv, h2.refs).ok());
    ASSERT_TRUE(def.bound(c, Arithmetic{}, h2.hv, h2.refs).ok());
    EXPECT_EQ(h2.hv[1].at(0, 0), h.hv[1].at(0, 899));
    EXPECT_EQ(h2.hv[0].at(0, 5), h.hv[0].at(899, 5));
    const std::vector<double> y2 = embedding_bwd_float(h2, EmbBug::kNone);
    int64_t bad = 0;
    for (size_t l = 0; l < y1.size(); ++l)
      bad += !(std::fabs(y2[l] - y1[l]) <=
               h.refs[0].tol[l] + h2.refs[0].tol[l] + std::fabs(h2.refs[0].ref[l] - h.refs[0].ref[l]));
    EXPECT_EQ(bad, 0);
  }
}

TEST(EmbeddingBound, InPlaceAccumulationIntoAPrefillIsCoveredByTheDeclaredTerms) {
  // The atomic kernel declares Contract::accumulates("dtable"): the engine prefills dtable with p
  // and expects p + sum within tol (1 + u) + u |p + sum| + gamma_k (|p| + sum |dout|), the last
  // term from the bound's acc_terms / acc_mag (harness/engine.cpp). Emulated here: many small
  // terms absorbed one by one into a prefill near 1 (each rounding loses up to half an ulp of p),
  // which the single-rounding rule alone (tol (1 + u) + u |p + sum|) would reject.
  const VariantDef* v = find_variant("embedding_bwd", "atomic");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->contract.accumulated(), std::vector<std::string>{"dtable"});
  EXPECT_FALSE(v->deterministic);
  ValueRecipe small = row_recipe(ValueClass::kSameSign, 700, 0x1p-25);  // U(0, 2^-25): below half an ulp of 1.3
  const Case c = embedding_case(false, DType::kF32, 1, 4, 64, small, idx_recipe(1, 701, false));
  RowHostRun h;
  run_reference(*find_op("embedding_bwd"), c, h);
  const OutputRef& r = h.refs[0];
  ASSERT_EQ(r.acc_terms.size(), r.ref.size());
  ASSERT_EQ(r.acc_mag.size(), r.ref.size());
  const double u = 0x1p-24, p = static_cast<double>(1.3f);  // the prefill as stored (fp32)
  int64_t with_terms = 0, single_rounding = 0;
  for (size_t l = 0; l < r.ref.size(); ++l) {
    EXPECT_GT(r.acc_terms[l], 16);  // idx in [0, 1]: 1 is out of range and skipped
    float acc = static_cast<float>(p);
    for (int64_t k = 0; k < 64; ++k)
      if (h.hv[1].at(0, k) == 0) acc += static_cast<float>(h.hv[0].at(k, static_cast<int64_t>(l)));
    const double want = p + r.ref[l], err = std::fabs(static_cast<double>(acc) - want);
    const double one = r.tol[l] * (1 + u) + u * std::fabs(want);
    with_terms += err > one + gamma_n(r.acc_terms[l], u) * (p + r.acc_mag[l]);
    single_rounding += err > one;
  }
  EXPECT_EQ(with_terms, 0);
  EXPECT_GT(single_rounding, 0) << "the emulation never needs the in-place terms";
}

// ---- cross-entropy ----------------------------------------------------------------------------------

struct CeOpts {
  int64_t ignore_index = -100, ignore_every = 3, inf_every = 0;
  double smoothing = 0;
  bool oob = false;
};

Case ce_case(DType dt, int64_t rows, int64_t n, const ValueRecipe& logits, uint64_t seed, const CeOpts& o) {
  nlohmann::json p = {{"dtype", std::string(dtype_name(dt))},
                      {"rows", rows},
                      {"n", n},
                      {"ignore_index", o.ignore_index},
                      {"smoothing", o.smoothing},
                      {"ignore_every", o.ignore_every},
                      {"oob_targets", o.oob}};
  if (o.inf_every > 0) p["inf_every"] = o.inf_every;
  ValueRecipe t = row_recipe(ValueClass::kSameSign, seed, static_cast<double>(n));
  if (o.oob) t.inject = {kSpecialPosInf | kSpecialNegInf, 0.1, 0, 0};
  // logits and dlogits padded by 8, every tensor offset by one element.
  auto c = build_case(ce_def(), p, {logits, t}, {{8, 1}, {0, 1}, {0, 1}, {8, 1}});
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? *c : Case{};
}

enum class CeBug { kNone, kIgnoreIndexIgnored, kSmoothingWrong };

/// Fused CE in float as the kernel computes it (max, sum of expf, logf, the smoothing sum), or a bug.
std::pair<std::vector<double>, std::vector<double>> ce_float(const Case& c, const RowHostRun& h, CeBug bug) {
  const DType dt = *parse_dtype(c.params["dtype"].get<std::string>());
  const int64_t ig = c.params["ignore_index"].get<int64_t>();
  const float eps = static_cast<float>(c.params["smoothing"].get<double>());
  const HostTensor &x = h.hv[0], &tg = h.hv[1];
  const int64_t rows = x.v.rows, n = x.v.cols;
  std::vector<float> loss(static_cast<size_t>(rows), 0.0f), d(static_cast<size_t>(rows * n), 0.0f);
  std::vector<float> xr(static_cast<size_t>(n));
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t tc = static_cast<int64_t>(tg.at(0, r));
    if (tc == ig && bug != CeBug::kIgnoreIndexIgnored) continue;
    if (tc < 0 || tc >= n) {
      loss[static_cast<size_t>(r)] = NAN;
      std::fill(d.begin() + r * n, d.begin() + (r + 1) * n, NAN);
      continue;
    }
    float m = -INFINITY;
    bool nan = false;
    for (int64_t j = 0; j < n; ++j) {
      xr[static_cast<size_t>(j)] = static_cast<float>(x.at(r, j));
      nan |= std::isnan(xr[static_cast<size_t>(j)]);
      m = std::max(m, xr[static_cast<size_t>(j)]);
    }
    if (nan) m = NAN;
    float s = 0, sum_t = 0;
    for (int64_t j = 0; j < n; ++j) s += std::exp(xr[static_cast<size_t>(j)] - m);
    const float log_s = std::log(s);
    for (int64_t j = 0; j < n; ++j) {
      const float t = xr[static_cast<size_t>(j)] - m;
      float q = j == tc ? (1.0f - eps) + eps / static_cast<float>(n) : eps / static_cast<float>(n);
      if (bug == CeBug::kSmoothingWrong) q = j == tc ? 1.0f - eps : eps / static_cast<float>(n - 1);
      d[static_cast<size_t>(r * n + j)] = std::exp(t) / s - q;
      sum_t += t;
    }
    const float nll = log_s - (xr[static_cast<size_t>(tc)] - m);
    float l = nll;
    if (eps != 0.0f) {
      if (bug == CeBug::kSmoothingWrong) {  // -sum_j q_j z_j with the wrong q
        l = (1.0f - eps) * nll;
        for (int64_t j = 0; j < n; ++j)
          if (j != tc) l += eps / static_cast<float>(n - 1) * (log_s - (xr[static_cast<size_t>(j)] - m));
      } else {
        l = (1.0f - eps) * nll + eps * (log_s - sum_t / static_cast<float>(n));
      }
    }
    loss[static_cast<size_t>(r)] = l;
  }
  return {stored(loss, DType::kF32), stored(d, dt)};
}

int64_t ce_violations(const Case& c, const RowHostRun& h, CeBug bug, std::string* first) {
  const DType dt = *parse_dtype(c.params["dtype"].get<std::string>());
  const auto [loss, d] = ce_float(c, h, bug);
  return row_violations(h.refs[0], loss, DType::kF32, first) + row_violations(h.refs[1], d, dt, first);
}

TEST(CrossEntropyBound, AcceptsFloatCrossEntropyAndRejectsThePlantedBugs) {
  uint64_t seed = 700;
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16})
    for (int64_t n : {1, 7, 33, 1000})
      for (double eps : {0.0, 0.1})
        for (int64_t ig : {-100, 0}) {
          CeOpts o;
          o.smoothing = eps;
          o.ignore_index = ig;
          const ValueRecipe logits = row_recipe(ValueClass::kNormal, seed++, 3);
          const Case c = ce_case(dt, 48, n, logits, seed++, o);
          ASSERT_TRUE(find_spec("cross_entropy")->validate(c).ok())
              << find_spec("cross_entropy")->validate(c).message();
          RowHostRun h;
          run_reference(ce_def(), c, h);
          std::string first;
          EXPECT_EQ(ce_violations(c, h, CeBug::kNone, &first), 0) << c.summary() << ": " << first;
          // Rows 0, 3, 6, ... carry ignore_index: computed (ig = 0) or NaN (ig = -100) by the bug. With
          // n = 1 and ig = 0 a computed row is loss 0, dlogits 0 too: the bug is invisible there.
          if (!(n == 1 && ig == 0)) {
            EXPECT_GT(ce_violations(c, h, CeBug::kIgnoreIndexIgnored, nullptr), 0) << c.summary();
          }
          if (eps > 0 && n >= 2) {
            EXPECT_GT(ce_violations(c, h, CeBug::kSmoothingWrong, nullptr), 0) << c.summary();
          }
        }
}

TEST(CrossEntropyBound, EdgeRowsAndValueClasses) {
  uint64_t seed = 800;
  for (ValueClass cls : {ValueClass::kNearOverflow, ValueClass::kMeanSpread, ValueClass::kLogUniform,
                         ValueClass::kSmallInt, ValueClass::kSubnormal, ValueClass::kUniform})
    for (DType dt : {DType::kF32, DType::kF16, DType::kBF16})
      for (double eps : {0.0, 0.1}) {
        CeOpts o;
        o.smoothing = eps;
        o.inf_every = 2;  // -inf rows except the target, and -inf targets
        o.oob = (seed % 3) == 0;
        ValueRecipe r = row_recipe(cls, seed++);
        r.inject = {kSpecialAll, 0.002, 0, 0};
        const Case c = ce_case(dt, 40, 129, r, seed++, o);
        ASSERT_TRUE(find_spec("cross_entropy")->validate(c).ok());
        RowHostRun h;
        run_reference(ce_def(), c, h);
        std::string first;
        EXPECT_EQ(ce_violations(c, h, CeBug::kNone, &first), 0)
            << c.summary() << " " << value_class_name(cls) << ": " << first;
      }
}

TEST(CrossEntropyBound, PreparedRowsHaveTheDeclaredLosses) {
  CeOpts o;
  o.smoothing = 0;
  o.inf_every = 2;
  o.ignore_every = 5;
  const Case c = ce_case(DType::kF32, 8, 10, row_recipe(ValueClass::kNormal, 9), 10, o);
  RowHostRun h;
  run_reference(ce_def(), c, h);
  EXPECT_EQ(h.hv[1].at(0, 0), -100);  // r % 5 == 0: ignored
  EXPECT_EQ(h.refs[0].ref[0], 0);
  EXPECT_EQ(h.refs[0].tol[0], 0);
  EXPECT_EQ(h.refs[0].ref[1], 0);  // r = 1: every logit but the target's is -inf: loss 0
  EXPECT_TRUE(std::isinf(h.refs[0].ref[3]) && h.refs[0].ref[3] > 0);  // r = 3: target logit -inf
  for (int64_t r = 0; r < 8; ++r) {
    const double t = h.hv[1].at(0, r);
    EXPECT_TRUE(t == -100 || (t >= 0 && t < 10)) << r << ": " << t;
  }
}

TEST(CrossEntropyProperties, ShiftedLogitsKeepLossAndGradient) {
  uint64_t seed = 900;
  for (DType dt : {DType::kF32, DType::kF16}) {
    CeOpts o;
    o.smoothing = 0.1;
    const ValueRecipe logits = row_recipe(ValueClass::kSmallInt, seed++);
    Case c = ce_case(dt, 16, 65, logits, seed++, o);
    c.params["relation"] = "shift";
    c.params["shift"] = 64.0;
    ASSERT_TRUE(find_spec("cross_entropy")->validate(c).ok());
    const OpDef& def = ce_def();
    RowHostRun h;
    run_reference(def, c, h);
    RowHostRun h2;
    h2.bytes = h.bytes;
    for (auto& b : h2.bytes) h2.img.push_back(b.data());
    ASSERT_TRUE(def.transform(c, h2.img));
    decode_into(c, h2.img, h2.dec, h2.hv);
    ASSERT_TRUE(def.reference(c, h2.hv, h2.refs).ok());
    ASSERT_TRUE(def.bound(c, Arithmetic{}, h2.hv, h2.refs).ok());
    EXPECT_EQ(h2.hv[0].at(1, 2), h.hv[0].at(1, 2) + 64);
    const auto y1 = ce_float(c, h, CeBug::kNone), y2 = ce_float(c, h2, CeBug::kNone);
    for (int o2 = 0; o2 < 2; ++o2) {
      const auto& a = o2 == 0 ? y1.first : y1.second;
      const auto& b = o2 == 0 ? y2.first : y2.second;
      for (size_t l = 0; l < a.size(); ++l) {
        const double r1 = h.refs[o2].ref[l], r2 = h2.refs[o2].ref[l];
        if (!std::isfinite(r1) || !std::isfinite(r2)) continue;
        EXPECT_LE(std::fabs(b[l] - a[l]), h.refs[o2].tol[l] + h2.refs[o2].tol[l] + std::fabs(r2 - r1))
            << o2 << " " << l;
      }
    }
  }
}

// The softmax bound is computed once per row (its magnitudes are the row's): the same bits as
// the bound of each element computed on its own, under IEEE and fast-math arithmetic.
TEST(SoftmaxBound, OncePerRowIsTheSameAsPerElement) {
  const OpSpec* spec = find_spec("softmax");
  const OpDef* op = find_op("softmax");
  ASSERT_NE(spec, nullptr);
  ASSERT_NE(op, nullptr);
  int64_t elements = 0, logs = 0;
  for (int64_t i = 0; i < 200; ++i) {
    const Case c = generate_case(*spec, GenPlan{29, GenConfig{300}}, i);
    for (const bool fast : {false, true}) {
      Arithmetic a;
      a.fast_math = fast;
      RowHostRun h;
      ASSERT_NO_FATAL_FAILURE(run_reference(*op, c, h, a));
      const Params p(c.params);
      const OutputRef& y = h.refs[0];
      SoftmaxModel m;
      m.in = m.out = p.dt("dtype");
      m.n = h.hv[0].v.cols;
      m.fast_math = fast;
      m.rescales = std::min<int64_t>(std::max<int64_t>(m.n - 1, 0), (m.n + 31) / 32 + 10);
      logs += p.b("log") ? 1 : 0;
      for (size_t l = 0; l < y.ref.size(); ++l) {
        const SoftmaxRowMags rm{y.aux[1][l], y.aux[2][l]};
        const BoundPair b = p.b("log") ? log_softmax_bounds(m, rm) : softmax_bounds(m, rm);
        const double want = b.ceiling.tol(std::fabs(y.ref[l]), std::isfinite(y.aux[0][l]) ? y.aux[0][l] : 0);
        ASSERT_EQ(std::bit_cast<uint64_t>(y.tol[l]), std::bit_cast<uint64_t>(want))
            << c.summary() << " element " << l << ": " << y.tol[l] << " against " << want;
        ++elements;
      }
    }
  }
  EXPECT_GT(elements, 100000);
  EXPECT_GT(logs, 40);
}


// The softmax model of a kernel that declares narrow_intermediates (cuDNN's fp16/bf16 path:
// harness/bounds.h narrow_softmax_tol) holds the evaluation order it allows, emulated here:
// t = x - max and e = expf(t) in fp32, e rounded to the storage type, Z the fp32 sum of the
// rounded e, y = e / Z in fp32, stored. The fp32 model alone (one rounding at the store) does
// not hold it on every element: the count beyond it shows the model is needed.
TEST(SoftmaxBound, NarrowIntermediatesHoldTheRoundedExponentialsOrder) {
  const OpDef* op = find_op("softmax");
  ASSERT_NE(op, nullptr);
  Arithmetic narrow;
  narrow.narrow_intermediates = true;
  int64_t elements = 0, beyond_plain = 0;
  double worst = 0;
  auto rounded = [](DType t, double v) {
    unsigned char b[8];
    store_as(t, v, b);
    return load_as_double(t, b);
  };
  for (DType dt : {DType::kF16, DType::kBF16})
    for (int64_t n : {7, 33, 100, 1000, 4000})
      for (uint64_t seed : {1u, 2u, 3u}) {
        ValueRecipe r;
        r.cls = ValueClass::kNormal;
        r.seed = seed;
        r.scale = 3;
        const Case c = model_case(
            "softmax", {{"dtype", std::string(dtype_name(dt))}, {"n", n}, {"rows", 6}, {"log", false}}, {r}, 0, 0);
        RowHostRun plain, h;
        ASSERT_NO_FATAL_FAILURE(run_reference(*op, c, plain));
        ASSERT_NO_FATAL_FAILURE(run_reference(*op, c, h, narrow));
        const HostTensor& x = h.hv[0];
        for (int64_t row = 0; row < x.v.rows; ++row) {
          float mx = -INFINITY;
          for (int64_t j = 0; j < n; ++j) mx = std::max(mx, static_cast<float>(x.at(row, j)));
          std::vector<float> e(static_cast<size_t>(n));
          float z = 0;
          for (int64_t j = 0; j < n; ++j) {
            e[static_cast<size_t>(j)] =
                static_cast<float>(rounded(dt, std::exp(static_cast<float>(static_cast<float>(x.at(row, j)) - mx))));
            z += e[static_cast<size_t>(j)];
          }
          for (int64_t j = 0; j < n; ++j) {
            const size_t l = static_cast<size_t>(row * n + j);
            const double y = rounded(dt, static_cast<double>(e[static_cast<size_t>(j)] / z));
            const double err = std::fabs(y - h.refs[0].ref[l]);
            ASSERT_LE(err, h.refs[0].tol[l]) << dtype_name(dt) << " n " << n << " row " << row << " element " << j;
            ASSERT_GE(h.refs[0].tol[l], plain.refs[0].tol[l]);
            worst = std::max(worst, err / h.refs[0].tol[l]);
            beyond_plain += err > plain.refs[0].tol[l] ? 1 : 0;
            ++elements;
          }
        }
      }
  std::printf("[ measured ] rounded-exponential softmax: %lld elements, worst error / narrow ceiling %.3f, %lld beyond "
              "the fp32 model's ceiling\n",
              static_cast<long long>(elements), worst, static_cast<long long>(beyond_plain));
  EXPECT_GT(beyond_plain, 0) << "the emulation never leaves the fp32 model: it does not exercise the narrow one";
}

// Under the masked-attention convention a row of -inf only gives 0 (log-softmax -inf) exactly;
// without it, max-first's NaN.
TEST(SoftmaxConvention, MaskedRowsZeroGivesZeroOrMinusInfinity) {
  const OpDef* op = find_op("softmax");
  ASSERT_NE(op, nullptr);
  for (const bool log : {false, true})
    for (const bool declared : {false, true}) {
      ValueRecipe r;
      nlohmann::json p = {{"dtype", "fp32"}, {"n", 9}, {"rows", 6}, {"log", log}, {"masked_every", 2}};
      if (declared) p["conventions"] = {"masked_rows_zero"};
      const Case c = model_case("softmax", p, {r}, 1, 0);
      RowHostRun h;
      ASSERT_NO_FATAL_FAILURE(run_reference(*op, c, h));
      for (int64_t row = 0; row < 6; ++row)
        for (int64_t j = 0; j < 9; ++j) {
          const double y = h.refs[0].ref[static_cast<size_t>(row * 9 + j)];
          if (row % 2 != 0) {
            EXPECT_TRUE(std::isfinite(y)) << "an unmasked row";
          } else if (!declared) {
            EXPECT_TRUE(std::isnan(y)) << "masked row " << row << " without the convention";
          } else {
            EXPECT_EQ(y, log ? -INFINITY : 0.0) << "masked row " << row << " under the convention";
          }
        }
    }
}

// cuDNN's convention: a fully masked softmax row is NaN where n is a power of two or above 512,
// 0 elsewhere; log-softmax -inf at every length.
TEST(SoftmaxConvention, MaskedRowsByLengthFollowTheLengthRule) {
  const OpDef* op = find_op("softmax");
  ASSERT_NE(op, nullptr);
  for (const bool log : {false, true})
    for (const int64_t n : {1, 2, 3, 4, 5, 7, 8, 31, 32, 33, 511, 512, 513, 1000}) {
      ValueRecipe r;
      nlohmann::json p = {{"dtype", "fp32"}, {"n", n}, {"rows", 3}, {"log", log}, {"masked_every", 2}};
      p["conventions"] = {"masked_rows_by_length"};
      const Case c = model_case("softmax", p, {r}, 1, 0);
      RowHostRun h;
      ASSERT_NO_FATAL_FAILURE(run_reference(*op, c, h));
      const bool nan = !log && (n > 512 || (n & (n - 1)) == 0);
      for (int64_t row = 0; row < 3; ++row)
        for (int64_t j = 0; j < n; ++j) {
          const double y = h.refs[0].ref[static_cast<size_t>(row * n + j)];
          if (row % 2 != 0)
            EXPECT_TRUE(std::isfinite(y)) << "an unmasked row, n " << n;
          else if (nan)
            EXPECT_TRUE(std::isnan(y)) << "masked row, n " << n;
          else
            EXPECT_EQ(y, log ? -INFINITY : 0.0) << "masked row, n " << n << (log ? " log" : "");
        }
    }
}

// Log-softmax with the log-sum-exp formed first, y = fl(x - fl(max + log sum)) in fp32 (cuDNN's
// order on long rows): on rows of large values the extra rounding of max + L leaves the max-first
// ceiling and stays inside the one the convention log_softmax_lse_first declares.
TEST(SoftmaxConvention, LseFirstLogSoftmaxHoldsItsCeiling) {
  const OpDef* op = find_op("softmax");
  ASSERT_NE(op, nullptr);
  int64_t elements = 0, beyond_plain = 0;
  double worst = 0;
  for (const double mean : {1e6, 1e4, -3000.0, 0.0})
    for (const int64_t n : {40, 513, 600}) {
      ValueRecipe r;
      r.cls = ValueClass::kMeanSpread, r.mean = mean, r.spread = mean == 0 ? 8.0 : 0.5, r.seed = 17;
      nlohmann::json p = {{"dtype", "fp32"}, {"n", n}, {"rows", 3}, {"log", true}};
      RowHostRun plain, declared;
      const Case c0 = model_case("softmax", p, {r}, 0, 0);
      ASSERT_NO_FATAL_FAILURE(run_reference(*op, c0, plain));
      p["conventions"] = {"log_softmax_lse_first"};
      const Case c1 = model_case("softmax", p, {r}, 0, 0);
      ASSERT_NO_FATAL_FAILURE(run_reference(*op, c1, declared));
      for (int64_t row = 0; row < 3; ++row) {
        float mx = -INFINITY, s = 0;
        for (int64_t j = 0; j < n; ++j) mx = std::max(mx, static_cast<float>(declared.hv[0].at(row, j)));
        for (int64_t j = 0; j < n; ++j) s += std::exp(static_cast<float>(declared.hv[0].at(row, j)) - mx);
        const float lse = mx + std::log(s);
        for (int64_t j = 0; j < n; ++j) {
          const size_t l = static_cast<size_t>(row * n + j);
          const double y = static_cast<float>(declared.hv[0].at(row, j)) - lse, ref = declared.refs[0].ref[l];
          const double err = std::fabs(y - ref), tol = declared.refs[0].tol[l];
          ++elements;
          beyond_plain += err > plain.refs[0].tol[l] ? 1 : 0;
          worst = std::max(worst, err / tol);
          EXPECT_LE(err, tol) << "mean " << mean << " n " << n << " row " << row << " j " << j;
        }
      }
    }
  std::printf("[ measured ] log-softmax, log-sum-exp first: %lld elements, %lld beyond the max-first ceiling, worst "
              "error / declared ceiling %.3f\n",
              static_cast<long long>(elements), static_cast<long long>(beyond_plain), worst);
  EXPECT_GT(beyond_plain, 0) << "the emulated order never left the max-first ceiling: the test shows nothing";
}

// The rowsum relation: a row off by 1% is caught; a fully masked row, 0 under a masked-row
// convention, has nothing to sum to 1 and is left alone.
TEST(SoftmaxRowsum, CatchesARowOffByAPercentAndSkipsMaskedRows) {
  const OpDef* op = find_op("softmax");
  ASSERT_NE(op, nullptr);
  ValueRecipe r;
  r.cls = ValueClass::kNormal;
  nlohmann::json p = {{"dtype", "fp32"}, {"n", 5}, {"rows", 4}, {"log", false}, {"masked_every", 2},
                      {"relation", "rowsum"}};
  p["conventions"] = {"masked_rows_by_length"};
  const Case c = model_case("softmax", p, {r}, 1, 0);
  RowHostRun h;
  ASSERT_NO_FATAL_FAILURE(run_reference(*op, c, h));
  std::vector<double> y = h.refs[0].ref;  // a kernel that returns the reference exactly
  auto failures = [&] {
    const std::vector<HostTensor> out = {{y.data(), View2D{4, 5, 5}}};
    std::vector<Failure> f;
    op->properties(c, h.hv, out, h.refs, f);
    return f;
  };
  EXPECT_EQ(y[0], 0.0) << "row 0 is masked: 0 under the convention";
  EXPECT_TRUE(failures().empty()) << "masked rows 0 and 2 sum to 0, and are no failure";
  for (int64_t j = 0; j < 5; ++j) y[static_cast<size_t>(5 + j)] *= 1.01;  // row 1, unmasked
  const auto f = failures();
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].kind, FailureKind::kProperty);
  EXPECT_NE(f[0].detail.find("row 1 "), std::string::npos) << f[0].detail;
}

}  // namespace
}  // namespace assay

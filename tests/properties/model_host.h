// The host side of the op model's engine (harness/engine.cpp) for CPU tests: a case's tensors
// materialised as the engine does (inputs from their recipes on the stream of their name,
// outputs poisoned, accumulated outputs prefilled), the variant's conventions in params, the
// op's prepare, optionally its metamorphic transform, then reference and bound under the
// variant's declared arithmetic; accumulated outputs get the engine's prefill + result
// expectation.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "harness/bounds.h"
#include "harness/op.h"
#include "harness/op_model.h"
#include "harness/values.h"

namespace assay::test_util {

struct ModelHostRun {
  Case c;  ///< with the variant's conventions
  std::vector<std::vector<unsigned char>> images;
  std::vector<std::vector<double>> host;
  std::vector<HostTensor> hv;  ///< every tensor decoded (outputs: poison or prefill)
  std::vector<OutputRef> refs;
  std::vector<int> outs;  ///< tensor indices of the outputs, in order

  /// Dense copy of tensor t's view.
  std::vector<double> dense(size_t t) const {
    const HostTensor& h = hv[t];
    std::vector<double> v(static_cast<size_t>(h.v.rows * h.v.cols));
    for (int64_t i = 0; i < h.v.rows; ++i)
      for (int64_t j = 0; j < h.v.cols; ++j) v[static_cast<size_t>(i * h.v.cols + j)] = h.at(i, j);
    return v;
  }
};

inline ModelHostRun model_host_run(const OpDef& op, const Case& c0, const Contract& k = Contract(),
                                   bool transformed = false) {
  ModelHostRun r;
  r.c = c0;
  if (!k.conventions().empty()) r.c.params["conventions"] = k.conventions();
  const Case& c = r.c;
  auto accumulated = [&](size_t t) {
    return std::find(k.accumulated().begin(), k.accumulated().end(), c.tensors[t].name) != k.accumulated().end();
  };
  std::vector<unsigned char*> ptrs;
  for (size_t t = 0; t < c.tensors.size(); ++t) {
    const auto& ts = c.tensors[t];
    r.images.emplace_back(static_cast<size_t>(ts.desc.extent()) * dtype_size(ts.desc.dtype) + 1);
    const uint64_t stream = fnv1a64(ts.name.data(), ts.name.size());
    if (ts.role == Role::kOut && accumulated(t)) {
      ValueRecipe prefill;
      prefill.seed = stream;
      materialize(ts.desc, prefill, stream, r.images.back().data());
    } else if (ts.role == Role::kOut ||
               (ts.role == Role::kInOut && op.overwrites && op.overwrites(Params(c.params), ts.name))) {
      materialize_output(ts.desc, r.images.back().data());  // as the engine: poisoned like an output
    } else {
      materialize(ts.desc, ts.values, stream, r.images.back().data());
    }
    if (ts.role != Role::kIn) r.outs.push_back(static_cast<int>(t));
  }
  for (auto& im : r.images) ptrs.push_back(im.data());
  if (op.prepare) op.prepare(c, ptrs);
  if (transformed) {
    EXPECT_TRUE(op.transform && op.transform(c, ptrs)) << c.summary();
  }
  for (size_t t = 0; t < c.tensors.size(); ++t) {
    const auto& d = c.tensors[t].desc;
    std::vector<double> v(static_cast<size_t>(d.extent()));
    for (size_t i = 0; i < v.size(); ++i) v[i] = load_as_double(d.dtype, r.images[t].data() + i * dtype_size(d.dtype));
    r.host.push_back(std::move(v));
  }
  for (size_t t = 0; t < c.tensors.size(); ++t)
    r.hv.push_back({r.host[t].data() + c.tensors[t].desc.offset, view_of(c.tensors[t].desc)});
  std::vector<HostTensor> ref_in = r.hv;
  std::vector<std::vector<double>> zeros;
  zeros.reserve(c.tensors.size());
  for (size_t t = 0; t < c.tensors.size(); ++t)
    if (c.tensors[t].role == Role::kOut && accumulated(t)) {
      zeros.emplace_back(r.host[t].size(), 0.0);
      ref_in[t].data = zeros.back().data() + c.tensors[t].desc.offset;
    }
  const Status s = op.reference(c, ref_in, r.refs);
  EXPECT_TRUE(s.ok()) << s.message();
  if (op.bound) {
    const Status b = op.bound(c, k.arithmetic(), ref_in, r.refs);
    EXPECT_TRUE(b.ok()) << b.message();
  }
  for (auto& o : r.refs)
    for (double& t : o.tol)
      if (std::isnan(t)) t = INFINITY;
  for (size_t o = 0; o < r.outs.size() && o < r.refs.size(); ++o) {
    const size_t t = static_cast<size_t>(r.outs[o]);
    if (!accumulated(t)) continue;
    const DType odt = c.tensors[t].desc.dtype;
    const double u = unit_roundoff(odt);
    const double u32 = dtype_is_float(odt) && dtype_size(odt) < 4 ? unit_roundoff(DType::kF32) : 0.0;
    const double g = u + u32 + u * u32;
    const View2D& w = r.hv[t].v;
    for (int64_t i = 0; i < w.rows; ++i)
      for (int64_t j = 0; j < w.cols; ++j) {
        const size_t l = static_cast<size_t>(i * w.cols + j);
        const double sum = r.hv[t].at(i, j) + r.refs[o].ref[l];
        r.refs[o].tol[l] = r.refs[o].tol[l] * (1 + g) + g * std::fabs(sum);
        r.refs[o].ref[l] = sum;
      }
  }
  return r;
}

/// The registered op `name` (fails the test when missing).
inline const OpDef& model_op(const std::string& name) {
  const OpDef* op = find_op(name);
  EXPECT_NE(op, nullptr) << name;
  return *op;
}

/// The contract of variant `variant` of op `op` (an empty one when missing).
inline const Contract& variant_contract(const std::string& op, const std::string& variant) {
  static const Contract empty;
  const VariantDef* v = find_variant(op, variant);
  return v != nullptr ? v->contract : empty;
}

}  // namespace assay::test_util

#include "properties/studies/detection.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <vector>

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "harness/bounds.h"
#include "harness/corpus.h"
#include "harness/gpu/cuda_check.h"
#include "harness/gpu/lane.h"
#include "harness/op_model.h"
#include "harness/spec.h"
#include "properties/gemm.h"

namespace assay {
namespace {

struct DetectionProbe {
  std::string name;
  Case c;
};

ValueRecipe recipe(ValueClass cls, uint64_t seed) {
  ValueRecipe r;
  r.cls = cls;
  r.seed = seed;
  r.int_range = 2;
  return r;
}

std::vector<DetectionProbe> gemm_probes() {
  std::vector<DetectionProbe> p;
  auto add = [&](std::string name, int64_t m, int64_t n, int64_t k, int64_t pad, ValueClass cls, double beta) {
    p.push_back({std::move(name), make_gemm_case(m, n, k, false, false, 1.0, beta, pad, pad, pad, 0, 0, 0,
                                                 recipe(cls, 11), recipe(cls, 12), recipe(ValueClass::kNormal, 13))});
  };
  add("K4096 normal", 64, 64, 4096, 0, ValueClass::kNormal, 0);
  add("K4096 same-sign", 64, 64, 4096, 0, ValueClass::kSameSign, 0);
  add("K4096 small-int", 64, 64, 4096, 0, ValueClass::kSmallInt, 0);
  add("61x67x1000 padded, beta 1", 61, 67, 1000, 3, ValueClass::kNormal, 1);
  add("61x67x1000 padded small-int", 61, 67, 1000, 3, ValueClass::kSmallInt, 0);
  add("1056^3 normal", 1056, 1056, 1056, 0, ValueClass::kNormal, 0);
  return p;
}

/// What fired on one variant, summed over probes.
struct Row {
  std::string variant, what;
  bool mutant = false;
  int64_t elements = 0, ceiling = 0, expected = 0, exact = 0, exact_elements = 0, vendor_rel = 0;
  double max_ratio = 0;
  std::set<std::string> structural;
  std::set<std::string> probes_caught;  ///< probes where some check fired
};

std::string cell(int64_t n, int64_t of) {
  return n == 0 ? "—" : fmt::format("**{}** / {}", n, of);
}

}  // namespace

StatusOr<std::string> detection_table(int device, const std::string& out_dir) {
  CUDA_CHECK(cudaSetDevice(device));
  ASSAY_ASSIGN_OR_RETURN(auto lane, gpu::Lane::create(device));
  const OpSpec* gemm = find_spec("gemm");
  if (gemm == nullptr) return not_found("the gemm spec is not linked");
  const std::vector<DetectionProbe> probes = gemm_probes();
  std::vector<Row> rows;
  for (const auto& v : gemm->variants()) {
    if (v.name.rfind("fault_", 0) == 0 || v.name == "mutant_degrades") continue;  // crash/hang/repeat: campaign tests
    Row row;
    row.variant = v.name;
    row.what = v.description;
    row.mutant = v.mutant;
    for (const DetectionProbe& pr : probes) {
      ASSAY_ASSIGN_OR_RETURN(std::vector<Verdict> vs, gemm->run(pr.c, {v.name}, *lane));
      bool fired = false;
      for (const auto& f : vs.front().failures) {
        if (f.kind == FailureKind::kBound || f.kind == FailureKind::kExact) continue;  // counted element-wise below
        row.structural.insert(std::string(failure_kind_name(f.kind)));
        fired = true;
      }
      ASSAY_ASSIGN_OR_RETURN(Inspection in, gemm->inspect(pr.c, v.name, *lane));
      for (size_t l = 0; l < in.out.size(); ++l) {
        const double o = in.out[l], r = in.ref[l];
        if (!std::isfinite(o) || !std::isfinite(r)) continue;  // the NaN/Inf pattern is structural above
        const double err = std::fabs(o - r);
        ++row.elements;
        const bool above = err > in.tol[l];
        row.ceiling += above;
        row.expected += !in.tol_expected.empty() && err > in.tol_expected[l];
        if (in.exact_tier) {
          ++row.exact_elements;
          row.exact += o != r;
        }
        if (!in.vendor.empty() && std::isfinite(in.vendor[l])) {
          const double ev = std::fabs(in.vendor[l] - r);
          row.vendor_rel += !vendor_relative_ok(err, ev, vendor_floor(std::fabs(r), DType::kF32), 4.0);
        }
        if (in.tol[l] > 0) row.max_ratio = std::max(row.max_ratio, err / in.tol[l]);
        fired = fired || above || (in.exact_tier && o != r);
      }
      if (fired) row.probes_caught.insert(pr.name);
    }
    rows.push_back(std::move(row));
  }

  // One-pass variance: the layernorm spec on mean-spread rows (mean 1024 and 4096, spread 1).
  const OpSpec* ln = find_spec("layernorm");
  const OpDef* ln_def = find_op("layernorm");
  std::vector<nlohmann::json> ln_rows;
  std::string ln_md;
  if (ln != nullptr && ln_def != nullptr) {
    for (const auto& v : ln->variants()) {
      if (v.name != "welford" && v.name != "mutant_layernorm_one_pass") continue;
      int64_t caught = 0, probes_n = 0;
      double max_ratio = 0;
      std::set<std::string> kinds;
      for (double mean : {1024.0, 4096.0, 65536.0})
        for (int64_t n : {64, 1000, 4096}) {
          ValueRecipe x;
          x.cls = ValueClass::kMeanSpread;
          x.mean = mean;
          x.spread = 1;
          x.seed = static_cast<uint64_t>(n);
          const nlohmann::json params = {
              {"rows", 16}, {"n", n}, {"dtype", "fp32"}, {"eps", static_cast<double>(1e-5f)}, {"bias", 1}};
          const std::vector<ValueRecipe> inputs = {x, recipe(ValueClass::kNormal, 5), recipe(ValueClass::kNormal, 6)};
          ASSAY_ASSIGN_OR_RETURN(Case c, build_case(*ln_def, params, inputs, {}));
          ASSAY_RETURN_IF_ERROR(ln->validate(c));
          ASSAY_ASSIGN_OR_RETURN(std::vector<Verdict> vs, ln->run(c, {v.name}, *lane));
          ++probes_n;
          caught += !vs.front().passed();
          max_ratio = std::max(max_ratio, vs.front().metrics.max_ratio);
          for (const auto& f : vs.front().failures)
            kinds.insert(fmt::format("{} in {}", failure_kind_name(f.kind), f.tensor));
        }
      std::string k;
      for (const auto& s : kinds) k += (k.empty() ? "" : ", ") + s;
      ln_rows.push_back({{"variant", v.name}, {"probes", probes_n}, {"caught", caught}, {"max_ratio", max_ratio},
                         {"checks", kinds}});
      ln_md += fmt::format("| {} | {} / {} | {:.3g} | {} |\n", v.name, caught, probes_n, max_ratio,
                           k.empty() ? "—" : k);
    }
  }

  // ---- report ----------------------------------------------------------------------------
  std::string probes_md;
  for (const DetectionProbe& p : probes) probes_md += fmt::format("- {}: `{}`\n", p.name, p.c.summary());
  std::string md = fmt::format(
      "# Detection table (assay detection-table)\n\nDevice: {}. Command: `assay detection-table --out DIR`.\n\n"
      "Each fp32 GEMM variant runs on the probe cases below. Element-wise checks count the elements (over all "
      "probes) where the check fires: **ceiling** = above the hard ceiling (a failure), **expected** = above "
      "the probabilistic expected level (a warning), **exact** = exact-tier probe not bit-identical, "
      "**vendor-rel.** = |kernel - ref| > 4 |cuBLAS pedantic - ref| + one ulp (vendor_floor). **structural** = "
      "the verdict's other failure kinds (guards, poison, gaps, inputs, NaN/Inf pattern, determinism). Rows "
      "without `mutant_` are the correct kernels (controls).\n\nProbes:\n{}\n"
      "| variant | ceiling | expected | exact | vendor-rel. | structural | max err/ceiling | probes caught |\n"
      "|---|---:|---:|---:|---:|---|---:|---|\n",
      gpu::describe_device(device), probes_md);
  nlohmann::json j;
  j["device"] = gpu::describe_device(device);
  for (const Row& r : rows) {
    std::string st, pc;
    for (const auto& s : r.structural) st += (st.empty() ? "" : ", ") + s;
    for (const auto& s : r.probes_caught) pc += (pc.empty() ? "" : "; ") + s;
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {:.3g} | {} |\n", r.variant, cell(r.ceiling, r.elements),
                      cell(r.expected, r.elements), cell(r.exact, r.exact_elements), cell(r.vendor_rel, r.elements),
                      st.empty() ? "—" : st, r.max_ratio, pc.empty() ? "none" : pc);
    j["gemm"][r.variant] = {{"mutant", r.mutant},           {"description", r.what},   {"elements", r.elements},
                            {"ceiling", r.ceiling},         {"expected", r.expected},   {"exact", r.exact},
                            {"exact_elements", r.exact_elements}, {"vendor_relative", r.vendor_rel},
                            {"structural", r.structural},   {"max_ratio", r.max_ratio}, {"probes_caught", r.probes_caught}};
  }
  md += "\n## One-pass variance (layernorm, fp32, 16 rows of U(mean - 1, mean + 1), mean 1024 / 4096 / 65536, n = "
        "64 / 1000 / 4096)\n\nJudged by the layernorm spec's ceiling (properties/norms.cpp); that testbed has no "
        "expected level or vendor reference.\n\n| variant | probes failed | max err/ceiling | checks that fired |\n"
        "|---|---:|---:|---|\n" +
        ln_md;
  j["layernorm"] = ln_rows;
  if (!out_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(out_dir, ec);
    ASSAY_RETURN_IF_ERROR(write_file_atomic(out_dir + "/detection.md", md));
    ASSAY_RETURN_IF_ERROR(write_file_atomic(out_dir + "/detection.json", j.dump(2) + "\n"));
  }
  return md;
}

}  // namespace assay

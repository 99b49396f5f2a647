#include "harness/triage.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "harness/gpu/lane.h"
#include "harness/op_model.h"

namespace assay {

std::vector<std::string> sweep_params(const Case& c) {
  std::vector<std::string> extents, ints;
  if (const OpDef* op = find_op(c.op))
    for (const auto& d : op->params)
      if (d.kind == ParamKind::kInt && c.params.contains(d.name) && c.params[d.name].is_number_integer())
        (d.size ? extents : ints).push_back(d.name);
  // An op that declares its sizes as plain integers (conv: n, h, w, kg, cg, r, s, strides)
  // sweeps those.
  return extents.empty() ? ints : extents;
}

int64_t sweep_step(const Case& c, const std::string& key) {
  if (const OpDef* op = find_op(c.op))
    for (const auto& d : op->params)
      if (d.name == key) return std::max<int64_t>(d.step, 1);
  return 1;
}

ErrorMatrix error_matrix(const Inspection& in) {
  ErrorMatrix m = ErrorMatrix::zeros(in.rows, in.cols);
  for (int64_t i = 0; i < in.rows; ++i)
    for (int64_t j = 0; j < in.cols; ++j) {
      const size_t l = static_cast<size_t>(i * in.cols + j);
      const double o = in.out[l], r = in.ref[l], t = in.tol[l];
      double ratio;
      if (std::isnan(r) || std::isnan(o))
        ratio = std::isnan(r) && std::isnan(o) ? 0.0 : NAN;
      else if (std::isinf(r) || std::isinf(o))
        ratio = o == r ? 0.0 : NAN;
      else
        ratio = t > 0 ? std::fabs(o - r) / t : (o == r ? 0.0 : INFINITY);
      m.at(i, j) = ratio;
      if (!in.unwritten.empty() && in.unwritten[l]) m.mark_unwritten(i, j);
    }
  return m;
}

namespace {

Verdict run_one(Executor& exec, const Case& c, const std::string& variant, Status& err) {
  exec.submit({0, std::nullopt, c, {variant}});
  JobResult r = exec.wait();
  if (!r.status.ok()) err = r.status;
  return r.verdicts.empty() ? Verdict{} : r.verdicts.front();
}

}  // namespace

StatusOr<TriageResult> triage(const OpSpec& spec, const Case& c, Executor& exec, gpu::Lane& lane,
                              const TriageOptions& opts) {
  const std::string variant =
      !opts.variant.empty() ? opts.variant : (!c.variant.empty() ? c.variant : spec.default_variants().front());
  if (!spec.has_variant(variant)) return not_found(fmt::format("op '{}' has no variant '{}'", spec.name(), variant));
  ASSAY_RETURN_IF_ERROR(spec.validate(c));
  TriageResult res;
  std::string& t = res.text;
  t += fmt::format("case {} ({})\nvariant {}\n", c.id(), c.summary(), variant);
  Status err;
  const Verdict v = run_one(exec, c, variant, err);
  ASSAY_RETURN_IF_ERROR(err);
  res.failing = !v.passed();
  t += fmt::format("verdict: {}\n", v.summary());
  for (const auto& f : v.failures)
    t += fmt::format("  {}{}: {} element(s){}\n", failure_kind_name(f.kind), f.tensor.empty() ? "" : " in " + f.tensor,
                     f.count, f.detail.empty() ? "" : "; " + f.detail);
  const bool crashed = std::any_of(v.failures.begin(), v.failures.end(), [](const Failure& f) {
    return f.kind == FailureKind::kCrash || f.kind == FailureKind::kHang;
  });

  std::vector<Metric> metrics = {{"variant", variant}, {"verdict", v.summary()}};
  ErrorMatrix errors;
  if (crashed) {
    t += "the case kills its worker: element-level inspection skipped (it would end this process)\n";
  } else {
    auto in = spec.inspect(c, variant, lane);
    if (!in.ok()) {
      t += fmt::format("no inspection: {}\n", in.status().message());
    } else {
      errors = error_matrix(*in);
      ErrorMatrix vendor_errors = ErrorMatrix::zeros(in->rows, in->cols);
      double kernel_max = 0, vendor_max = 0, kv_max = 0;
      for (size_t l = 0; l < errors.ratio.size(); ++l) {
        if (std::isfinite(errors.ratio[l])) kernel_max = std::max(kernel_max, errors.ratio[l]);
        if (!in->vendor.empty()) {
          const double vo = in->vendor[l], r = in->ref[l], tl = in->tol[l];
          if (std::isfinite(vo) && std::isfinite(r) && tl > 0)
            vendor_max = std::max(vendor_max, std::fabs(vo - r) / tl);
          if (std::isfinite(vo) && std::isfinite(in->out[l]) && tl > 0)
            kv_max = std::max(kv_max, std::fabs(in->out[l] - vo) / tl);
        }
      }
      t += fmt::format("against the {} reference: max |err|/bound {:.4g}\n", in->reference, kernel_max);
      if (!in->vendor.empty())
        t += fmt::format(
            "vendor library against the same reference: max |err|/bound {:.4g}; kernel vs vendor: max "
            "|diff|/bound {:.4g}\n",
            vendor_max, kv_max);
      metrics.push_back({"reference", in->reference});
      metrics.push_back({"max |err|/bound (kernel)", fmt::format("{:.4g}", kernel_max)});
      metrics.push_back({"max |err|/bound (vendor)", fmt::format("{:.4g}", vendor_max)});
      metrics.push_back({"max |kernel-vendor|/bound", fmt::format("{:.4g}", kv_max)});
      if (auto loc = locate_errors(errors); loc.ok()) {
        t += fmt::format("where: {}\n", loc->description);
        metrics.push_back({"where", loc->description});
      }
      if (!in->touches_special.empty()) {
        int64_t bad = 0, bad_special = 0, special = 0;
        for (int64_t i = 0; i < in->rows; ++i)
          for (int64_t j = 0; j < in->cols; ++j) {
            const bool sp = in->touches_special[static_cast<size_t>(i * in->cols + j)] != 0;
            special += sp;
            if (errors.bad(i, j)) {
              ++bad;
              bad_special += sp;
            }
          }
        const std::string line = special == 0
                                     ? "no NaN/Inf among the inputs"
                                     : fmt::format("{} of {} bad elements are fed by a NaN/Inf input ({} elements are)",
                                                   bad_special, bad, special);
        t += fmt::format("special values: {}\n", line);
        metrics.push_back({"special values", line});
      }
      int listed = 0;
      for (int64_t i = 0; i < in->rows && listed < opts.max_elements; ++i)
        for (int64_t j = 0; j < in->cols && listed < opts.max_elements; ++j) {
          if (!errors.bad(i, j)) continue;
          const size_t l = static_cast<size_t>(i * in->cols + j);
          t += fmt::format("  {}[{}][{}] = {:.9g}{}, reference {:.17g}, bound {:.3g}\n    inputs: {}\n", in->tensor, i,
                           j, in->out[l], errors.is_unwritten(i, j) ? " (never written)" : "", in->ref[l], in->tol[l],
                           in->inputs ? in->inputs(i, j) : "");
          ++listed;
        }
    }
  }

  // Dimension sweep: which neighbouring shapes fail too.
  const std::vector<std::string> sweep =
      !opts.sweep_enabled ? std::vector<std::string>{} : opts.sweep.empty() ? sweep_params(c) : opts.sweep;
  for (const auto& key : sweep) {
    auto it = c.params.find(key);
    if (it == c.params.end() || !it->is_number_integer()) continue;
    const int64_t v0 = it->get<int64_t>();
    std::string line = fmt::format("sweep {}:", key);
    const int64_t step = sweep_step(c, key);
    for (int64_t d = -opts.sweep_radius; d <= opts.sweep_radius; ++d) {
      const int64_t val = v0 + d * step;
      if (val < 0) continue;
      auto moved = spec.with_param(c, key, val);
      if (!moved.ok() && moved.status().code() == StatusCode::kUnavailable) {
        line += " (not variable)";
        break;
      }
      if (!moved.ok()) continue;  // outside the param's range or the op's check: not a case
      const Verdict mv = run_one(exec, *moved, variant, err);
      ASSAY_RETURN_IF_ERROR(err);
      std::string what = "pass";
      if (!mv.passed()) what = std::string(failure_kind_name(mv.failures.front().kind));
      line += fmt::format(" {}={}{}", val, what, d == 0 ? "*" : "");
    }
    t += line + "\n";
    metrics.push_back({"sweep " + key, line.substr(line.find(':') + 2)});
  }

  if (!opts.html_path.empty()) {
    TriageReport r =
        make_triage_report(c, metrics, errors.rows > 0 || errors.cols > 0 ? errors : ErrorMatrix::zeros(0, 0));
    r.replay = program_name() + " replay <entry>";
    ASSAY_RETURN_IF_ERROR(write_triage_report(r, opts.html_path, opts.svg_path));
    t += fmt::format("report: {}{}\n", opts.html_path, opts.svg_path.empty() ? "" : " and " + opts.svg_path);
  }
  return res;
}

}  // namespace assay

// One element of a metamorphic relation's compare: the transformed launch's output y2 against
// the original launch's related element y1 (scaled as the relation says), each held to its own
// reference's tolerance. The check kernel runs it on every element; the engine runs it again on
// the host for the failure's detail line, so both read the same rule.
#pragma once

#include <cmath>

#include "harness/host_device.h"

namespace assay {

struct RelationElement {
  double y1 = 0, y2 = 0;  ///< the original output (scaled) and the transformed one
  double diff = 0, tol = 0;
  bool broken = false;
};

/// ref1, tol1: the original inputs' reference and tolerance at the related element; ref2, tol2:
/// the transformed inputs' at this element; out1, out2: the two launches' outputs; `top`: the
/// output dtype's largest finite value. The two outputs may differ by both tolerances plus the
/// change of the exact result between the two inputs.
ASSAY_HD inline RelationElement relation_element(double scale, double ref1, double tol1, double out1, double ref2,
                                                 double tol2, double out2, double top) {
  RelationElement e;
  const double x1 = scale * ref1, x2 = ref2;
  e.y1 = scale * out1, e.y2 = out2;
  if (!std::isfinite(x1) || !std::isfinite(x2)) return e;
  e.tol = std::fabs(scale) * tol1 + tol2 + std::fabs(x2 - x1);
  if (e.y1 == e.y2 || std::isinf(e.tol)) return e;  // equal (the same Inf included), or no bound
  if (!std::isfinite(e.y1) || !std::isfinite(e.y2)) {
    // A non-finite output is the bound check's business where the exact result may round past
    // the largest finite value; elsewhere it breaks the relation.
    if (std::fabs(x1) + std::fabs(scale) * tol1 > top || std::fabs(x2) + tol2 > top) return e;
  }
  e.diff = std::fabs(e.y2 - e.y1);
  e.broken = !(e.diff <= e.tol);
  return e;
}

}  // namespace assay

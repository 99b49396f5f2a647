// Generic testbed for ops whose host reference gives, for every output
// element, a value and an absolute tolerance: the row-wise, elementwise and
// lookup ops of issue 8 (softmax, norms, activations, RoPE, embedding, fused
// cross-entropy), forward and backward.
//
// A case's tensors are rank 1 or 2 with a unit innermost stride; inputs (kIn)
// are materialised from their recipes, outputs (kOut) start as poison and must
// be overwritten in full, accumulators (kInOut) start from their recipe. The
// op's `prepare` may then edit the inputs (mask rows with -inf, place
// ignore-index targets) as a pure function of the case. Per variant: two
// launches from the same snapshot, one device check each (guards, inputs
// untouched, poison, gaps, every output against reference +- tolerance, the
// NaN/Inf pattern, the exact tier where the reference says so, bitwise rerun
// for deterministic variants). Then, when the case names a relation, the
// op's host-side properties on the kernel's own outputs (rows of a softmax sum
// to 1, a rotation keeps norms) and metamorphic relations: the kernel is
// launched again on transformed inputs (a shifted row) and the two launches'
// outputs are compared with each other, within the sum of both tolerances
// plus the difference of the two exact results (zero when the transform is
// exact, e.g. an integer shift of integer-valued rows). A relation that moves
// or scales elements (rows of A permuted, a square product transposed, alpha
// doubled) says so through `relate`: element (i, j) of the second launch is
// then held against scale * element (from_i, from_j) of the first.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "harness/case.h"
#include "harness/op.h"
#include "harness/spec.h"
#include "harness/verdict.h"

namespace assay {

namespace gpu {
class Lane;
}

/// A kernel under test: launches on the case's tensors (all of them, in case order).
using TensorOpLaunch = std::function<cudaError_t(const Case&, const std::vector<DevTensor>&, cudaStream_t)>;

struct TensorOpVariant {
  VariantInfo info;
  TensorOpLaunch launch;
};

struct TensorOpDef {
  std::string op;
  std::string bound_name = "ceiling";  ///< how failures name the bound ("softmax ceiling")
  /// Edits input host images in place after materialisation (may be empty).
  /// `images[t]` is tensor t's allocation in its dtype (extent() elements).
  std::function<void(const Case&, std::vector<unsigned char*>& images)> prepare;
  /// Reference of every output (kOut and kInOut tensors, in case order) from
  /// all tensors decoded to double (kInOut: the prefill).
  std::function<Status(const Case&, const std::vector<HostTensor>&, std::vector<OutputRef>&)> reference;
  /// Host-side properties of the kernel's outputs (first launch, decoded)
  /// for case param "relation"; appends kProperty failures. May be empty.
  std::function<void(const Case&, const std::vector<HostTensor>& in, const std::vector<HostTensor>& out,
                     const std::vector<OutputRef>&, std::vector<Failure>&)>
      properties;
  /// Metamorphic transform for case param "relation": rewrites the input host
  /// images (as prepare does); returns false when the case has none. May be empty.
  std::function<bool(const Case&, std::vector<unsigned char*>& images)> transform;
  /// How the transformed launch's outputs correspond to the original ones, for
  /// relations that move or scale elements (row permutation, transposition of a
  /// square output, scaling by a power of two). Element (i, j) of transformed
  /// output `o` is compared with `scale` times element (from_i, from_j) of the
  /// original output `o`, within |scale| * tol1 + tol2 + |ref2 - scale * ref1|.
  /// Returns false to leave the element out. Empty: same position, scale 1.
  std::function<bool(const Case&, size_t o, int64_t i, int64_t j, RelatedElement&)> relate;
};

/// Runs `c` through the named variants of `variants` (resolved by name).
StatusOr<std::vector<Verdict>> run_tensor_op(const TensorOpDef& def, const std::vector<TensorOpVariant>& registry,
                                             const Case& c, const std::vector<std::string>& names, gpu::Lane& lane);

/// Generic structural checks: every tensor rank 1 or 2, unit inner stride,
/// row stride >= cols, valid extent; roles as given. One-line errors.
Status validate_tensor_layout(const Case& c, const std::vector<std::pair<std::string, Role>>& expected);

/// A 2-D (or, with rows < 0, 1-D) tensor spec with `pad` extra elements per row and `off` leading elements.
TensorSpec make_tensor(const std::string& name, Role role, DType dt, int64_t rows, int64_t cols, int64_t pad,
                       int64_t off, const ValueRecipe& values);

}  // namespace assay

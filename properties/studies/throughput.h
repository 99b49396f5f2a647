// assay throughput: the speed of each convolution and attention kernel against the
// vendor library or a composite of vendor calls in the same precision, written in the repo.
//   conv:      kernels/conv (direct, implicit GEMM; forward, backward-data, backward-filter)
//              against cuDNN (references/library/cudnn.h) with CUDNN_FMA_MATH and with
//              CUDNN_DEFAULT_MATH, deterministic algorithms.
//   attention: kernels/attention flash_fwd / flash_bwd against a cuBLAS composite in the same
//              storage type (cublasGemmStridedBatchedEx, fp32 compute, scores in fp32, a row
//              softmax, P and dS rounded to the storage type).
// Each measurement: warm-up launches, then `reps` launches each timed alone with a cudaEvent pair
// (a spin kernel ahead of the start event keeps the GPU busy while the host enqueues, so host
// work such as cuDNN's algorithm query is not timed); the median is reported, with
// TFLOP/s = 2 * MACs / time (causal attention counts the visible half).
// A measurement written as Markdown and JSON, not a pass/fail test.
#pragma once

#include <string>
#include <vector>

#include "harness/status.h"

namespace assay {

struct ThroughputOptions {
  std::vector<std::string> ops = {"conv", "attention", "gemm"};  ///< "conv", "attention", "gemm"
  int reps = 20;                                         ///< timed launches per measurement (median)
  int warmup = 3;                                        ///< untimed launches first
  int device = 0;
};

/// Runs the measurements; writes throughput.md and throughput.json under `out_dir` (if not
/// empty) and returns the Markdown. Unknown ops are invalid_argument.
StatusOr<std::string> throughput(const ThroughputOptions& opt, const std::string& out_dir);

/// Checks opt.ops (conv, attention, gemm) before any GPU is looked for: an unknown op is
/// invalid_argument; conv, timed against cuDNN, is dropped from a build without it, with a
/// line on stderr (an error if nothing is left).
Status select_throughput_ops(ThroughputOptions& opt);

}  // namespace assay

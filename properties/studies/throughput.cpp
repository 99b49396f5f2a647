#include "properties/studies/throughput.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <utility>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "harness/corpus.h"
#include "harness/dtype.h"
#include "harness/gpu/cuda_check.h"
#include "harness/gpu/lane.h"
#include "properties/studies/throughput_common.h"
#include "properties/studies/throughput_kernels.h"
#include "kernels/attention/attention.h"
#include "kernels/conv/conv.h"
#include "references/host/conv.h"
#include "references/library/cudnn.h"

namespace assay {
namespace {

using namespace tput_detail;  // NOLINT(google-build-using-namespace): the file's own helpers

namespace kc = kernels::conv;
namespace ka = kernels::attention;

// ---- convolution ----------------------------------------------------------------------------------

struct ConvShape {
  ref::Conv2dGeometry g;
  DType dt;
};

std::vector<ConvShape> conv_shapes() {
  std::vector<ConvShape> v;
  auto add = [&](int64_t n, int64_t c, int64_t hw, int64_t k, int64_t groups, ref::ConvLayout l, DType dt) {
    ref::Conv2dGeometry g;
    g.n = n, g.c = c, g.h = g.w = hw, g.k = k, g.r = g.s = 3, g.pad_h = g.pad_w = 1, g.groups = groups, g.layout = l;
    v.push_back({g, dt});
  };
  add(8, 64, 56, 64, 1, ref::ConvLayout::kNCHW, DType::kF32);
  add(8, 64, 56, 64, 1, ref::ConvLayout::kNHWC, DType::kF16);
  add(32, 256, 14, 256, 1, ref::ConvLayout::kNHWC, DType::kBF16);
  add(8, 256, 56, 256, 256, ref::ConvLayout::kNHWC, DType::kF16);  // depthwise
  return v;
}

std::string conv_shape_name(const ref::Conv2dGeometry& g) {
  return fmt::format("N{} C{} {}x{} K{} {}x{} pad {}{} {}", g.n, g.c, g.h, g.w, g.k, g.r, g.s, g.pad_h,
                     g.groups == 1 ? "" : (g.groups == g.c && g.groups == g.k ? " depthwise" : fmt::format(" groups {}", g.groups)),
                     g.layout == ref::ConvLayout::kNCHW ? "NCHW" : "NHWC");
}

Status conv_problems(const ThroughputOptions& o, cudaStream_t s, std::vector<Problem>& out) {
  ASSAY_ASSIGN_OR_RETURN(std::unique_ptr<vendor::CudnnHandle> h, vendor::CudnnHandle::create(s));
  for (const ConvShape& cs : conv_shapes()) {
    const ref::Conv2dGeometry& rg = cs.g;
    DevBuf x, w, dy, y, dx, dw;
    ASSAY_RETURN_IF_ERROR(alloc_normal(x, cs.dt, rg.x_elems(), 1, s));
    ASSAY_RETURN_IF_ERROR(alloc_normal(w, cs.dt, rg.w_elems(), 2, s));
    ASSAY_RETURN_IF_ERROR(alloc_normal(dy, cs.dt, rg.y_elems(), 3, s));
    ASSAY_RETURN_IF_ERROR(alloc_normal(y, cs.dt, rg.y_elems(), 4, s));
    ASSAY_RETURN_IF_ERROR(alloc_normal(dx, cs.dt, rg.x_elems(), 5, s));
    ASSAY_RETURN_IF_ERROR(alloc_normal(dw, cs.dt, rg.w_elems(), 6, s));
    CUDA_CHECK(cudaStreamSynchronize(s));

    kc::ConvGeom g;
    g.n = rg.n, g.c = rg.c, g.h = rg.h, g.w = rg.w, g.k = rg.k, g.r = rg.r, g.s = rg.s;
    g.pad_h = rg.pad_h, g.pad_w = rg.pad_w, g.stride_h = rg.stride_h, g.stride_w = rg.stride_w;
    g.dil_h = rg.dil_h, g.dil_w = rg.dil_w, g.groups = rg.groups;
    const bool nchw = rg.layout == ref::ConvLayout::kNCHW;
    auto args = [&](void* xp, void* wp, void* yp) {
      kc::ConvArgs a;
      a.g = g;
      a.layout = nchw ? kc::Layout::kNCHW : kc::Layout::kNHWC;
      a.dt = static_cast<kc::Dt>(dt_code(cs.dt));
      a.x = xp, a.ldx = nchw ? rg.w : rg.c;
      a.w = wp, a.ldw = nchw ? rg.s : rg.cg();
      a.y = yp, a.ldy = nchw ? rg.out_w() : rg.k;
      return a;
    };
    const kc::ConvArgs fwd = args(x.get(), w.get(), y.get()), bwd_data = args(dx.get(), w.get(), dy.get()),
                       bwd_filter = args(x.get(), dw.get(), dy.get());
    const double macs = static_cast<double>(rg.n) * rg.k * rg.out_h() * rg.out_w() * rg.cg() * rg.r * rg.s;

    using KernelFn = cudaError_t (*)(const kc::ConvArgs&, cudaStream_t);
    struct Pass {
      const char* name;
      const kc::ConvArgs* a;
      KernelFn direct, igemm;
    };
    const Pass passes[] = {{"forward", &fwd, kc::conv2d_fwd_direct, kc::conv2d_fwd_igemm},
                           {"backward-data", &bwd_data, kc::conv2d_bwd_data_direct, kc::conv2d_bwd_data_igemm},
                           {"backward-filter", &bwd_filter, kc::conv2d_bwd_filter_direct, kc::conv2d_bwd_filter_igemm}};
    for (int pi = 0; pi < 3; ++pi) {
      const Pass& p = passes[pi];
      Problem pr;
      pr.op = "conv";
      pr.pass = p.name;
      pr.shape = conv_shape_name(rg);
      pr.dtype = std::string(dtype_name(cs.dt));
      pr.macs = macs;
      for (auto [name, fn] : {std::pair<const char*, KernelFn>{"direct", p.direct}, {"implicit_gemm", p.igemm}}) {
        const kc::ConvArgs* a = p.a;
        pr.kernels.push_back(measure(name, s, o, [&, fn = fn, a] { return cuda_launch(fn(*a, s), "conv kernel"); }));
      }
      for (auto [name, math] : {std::pair<const char*, vendor::ConvMath>{"cuDNN FMA", vendor::ConvMath::kFma},
                                {"cuDNN default math", vendor::ConvMath::kDefault}}) {
        vendor::CudnnConv c;
        c.geom = rg;
        c.dtype = cs.dt;
        c.math = math;
        c.algos = vendor::ConvAlgoPolicy::kAnyDeterministic;
        std::string algo;
        auto launch = [&]() -> Status {
          StatusOr<vendor::ConvAlgoUsed> used = vendor::ConvAlgoUsed{};
          if (pi == 0)
            used = vendor::cudnn_conv_forward(*h, c, 1.f, x.get(), w.get(), 0.f, y.get());
          else if (pi == 1)
            used = vendor::cudnn_conv_backward_data(*h, c, 1.f, w.get(), dy.get(), 0.f, dx.get());
          else
            used = vendor::cudnn_conv_backward_filter(*h, c, 1.f, x.get(), dy.get(), 0.f, dw.get());
          if (!used.ok()) return used.status();
          algo = used->name;
          return ok_status();
        };
        Measured m = measure(name, s, o, launch);
        m.detail = algo;
        pr.vendors.push_back(std::move(m));
      }
      out.push_back(std::move(pr));
    }
  }
  return ok_status();
}

// ---- attention --------------------------------------------------------------------------------------

/// One cublasGemmStridedBatchedEx with fp32 compute and beta = 0.
Status gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n, int64_t k, float alpha,
            const void* A, cudaDataType_t at, int64_t lda, int64_t sa, const void* B, cudaDataType_t bt, int64_t ldb,
            int64_t sb, void* C, cudaDataType_t ct, int64_t ldc, int64_t sc, int64_t batch) {
  const float beta = 0.f;
  CUBLAS_CHECK(cublasGemmStridedBatchedEx(h, ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
                                          &alpha, A, at, static_cast<int>(lda), sa, B, bt, static_cast<int>(ldb), sb,
                                          &beta, C, ct, static_cast<int>(ldc), sc, static_cast<int>(batch),
                                          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return ok_status();
}


Status attention_problems(const ThroughputOptions& o, cudaStream_t s, std::vector<Problem>& out) {
  CublasHandle cb;
  CUBLAS_CHECK(cublasCreate(&cb.h));
  CUBLAS_CHECK(cublasSetStream(cb.h, s));
  const DType dt = DType::kF16;
  const cudaDataType_t ct = cuda_type(dt);
  const int64_t B = 4, H = 16, S = 1024;
  for (int64_t D : {64, 128})
    for (bool causal : {false, true}) {
      ka::AttnShape sh;
      sh.batch = B, sh.heads = H, sh.kv_heads = H, sh.sq = S, sh.sk = S, sh.d = D, sh.causal = causal;
      sh.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
      const int64_t rows = B * H * S, elems = rows * D, BH = B * H;
      DevBuf q, k, v, od, dout, dq, dk, dv, lse, Sc, P, dP, dS, Oc, dQc, dKc, dVc;
      ASSAY_RETURN_IF_ERROR(alloc_normal(q, dt, elems, 11, s));
      ASSAY_RETURN_IF_ERROR(alloc_normal(k, dt, elems, 12, s));
      ASSAY_RETURN_IF_ERROR(alloc_normal(v, dt, elems, 13, s));
      ASSAY_RETURN_IF_ERROR(alloc_normal(dout, dt, elems, 14, s));
      const size_t eb = static_cast<size_t>(elems) * dtype_size(dt), nS = static_cast<size_t>(BH * S * S);
      for (DevBuf* b : {&od, &dq, &dk, &dv, &Oc, &dQc, &dKc, &dVc}) ASSAY_RETURN_IF_ERROR(b->alloc(eb));
      ASSAY_RETURN_IF_ERROR(lse.alloc(static_cast<size_t>(rows) * sizeof(float)));
      ASSAY_RETURN_IF_ERROR(Sc.alloc(nS * sizeof(float)));
      ASSAY_RETURN_IF_ERROR(dP.alloc(nS * sizeof(float)));
      ASSAY_RETURN_IF_ERROR(P.alloc(nS * dtype_size(dt)));
      ASSAY_RETURN_IF_ERROR(dS.alloc(nS * dtype_size(dt)));
      CUDA_CHECK(cudaStreamSynchronize(s));
      const auto kdt = static_cast<ka::Dt>(dt_code(dt));

      auto flash_fwd = [&] {
        return cuda_launch(ka::flash_fwd(kdt, sh, q.get(), D, k.get(), D, v.get(), D, nullptr, 0, od.get(), D,
                                         lse.f32(), s),
                           "flash_fwd");
      };
      auto flash_bwd = [&] {
        return cuda_launch(ka::flash_bwd(kdt, sh, q.get(), D, k.get(), D, v.get(), D, od.get(), D, dout.get(), D,
                                         lse.f32(), nullptr, 0, dq.get(), D, dk.get(), D, dv.get(), D, s),
                           "flash_bwd");
      };
      // Row-major X [r, c] is column-major X^T (ld c); per (b, h) one strided batch entry.
      auto comp_fwd = [&]() -> Status {
        // S^T (Sk x Sq) = K (D x Sk)^T Q (D x Sq), scaled.
        ASSAY_RETURN_IF_ERROR(gemm(cb.h, CUBLAS_OP_T, CUBLAS_OP_N, S, S, D, sh.scale, k.get(), ct, D, S * D, q.get(),
                                   ct, D, S * D, Sc.get(), CUDA_R_32F, S, S * S, BH));
        CUDA_CHECK(tput::softmax_rows(dt_code(dt), Sc.f32(), P.get(), rows, S, S, causal, s));
        // O^T (D x Sq) = V^T (D x Sk) P^T (Sk x Sq).
        return gemm(cb.h, CUBLAS_OP_N, CUBLAS_OP_N, D, S, S, 1.f, v.get(), ct, D, S * D, P.get(), ct, S, S * S,
                    Oc.get(), ct, D, S * D, BH);
      };
      auto comp_bwd = [&]() -> Status {  // from the forward's P
        // dV^T (D x Sk) = dO^T (D x Sq) P (Sq x Sk).
        ASSAY_RETURN_IF_ERROR(gemm(cb.h, CUBLAS_OP_N, CUBLAS_OP_T, D, S, S, 1.f, dout.get(), ct, D, S * D, P.get(), ct,
                                   S, S * S, dVc.get(), ct, D, S * D, BH));
        // dP^T (Sk x Sq) = V (D x Sk)^T dO^T (D x Sq), fp32.
        ASSAY_RETURN_IF_ERROR(gemm(cb.h, CUBLAS_OP_T, CUBLAS_OP_N, S, S, D, 1.f, v.get(), ct, D, S * D, dout.get(), ct,
                                   D, S * D, dP.get(), CUDA_R_32F, S, S * S, BH));
        CUDA_CHECK(tput::softmax_bwd_rows(dt_code(dt), P.get(), dP.f32(), dS.get(), rows, S, s));
        // dQ^T (D x Sq) = scale K^T (D x Sk) dS^T (Sk x Sq).
        ASSAY_RETURN_IF_ERROR(gemm(cb.h, CUBLAS_OP_N, CUBLAS_OP_N, D, S, S, sh.scale, k.get(), ct, D, S * D, dS.get(),
                                   ct, S, S * S, dQc.get(), ct, D, S * D, BH));
        // dK^T (D x Sk) = scale Q^T (D x Sq) dS (Sq x Sk).
        return gemm(cb.h, CUBLAS_OP_N, CUBLAS_OP_T, D, S, S, sh.scale, q.get(), ct, D, S * D, dS.get(), ct, S, S * S,
                    dKc.get(), ct, D, S * D, BH);
      };

      double pairs = 0;  // visible (query, key) pairs per head
      for (int64_t i = 0; i < S; ++i) pairs += causal ? static_cast<double>(std::min(i + 1, S)) : static_cast<double>(S);
      const std::string shape = fmt::format("B{} H{} S{} D{}{}", B, H, S, D, causal ? " causal" : "");
      const char* comp = "cuBLAS composite";
      Problem f;
      f.op = "attention", f.pass = "forward", f.shape = shape, f.dtype = std::string(dtype_name(dt));
      f.macs = 2.0 * static_cast<double>(BH) * pairs * static_cast<double>(D);
      f.kernels.push_back(measure("flash_fwd", s, o, flash_fwd));
      f.vendors.push_back(measure(comp, s, o, comp_fwd, "QK^T fp32, softmax, P fp16, PV"));
      out.push_back(std::move(f));

      Problem b;
      b.op = "attention", b.pass = "backward", b.shape = shape, b.dtype = std::string(dtype_name(dt));
      b.macs = 5.0 * static_cast<double>(BH) * pairs * static_cast<double>(D);
      // The inputs of the backwards: the flash forward's O and LSE, the composite forward's P.
      ASSAY_RETURN_IF_ERROR(flash_fwd());
      ASSAY_RETURN_IF_ERROR(comp_fwd());
      CUDA_CHECK(cudaStreamSynchronize(s));
      b.kernels.push_back(measure("flash_bwd", s, o, flash_bwd));
      b.vendors.push_back(measure(comp, s, o, comp_bwd, "dV, dP fp32, dS fp16, dQ, dK (P saved)"));
      out.push_back(std::move(b));
    }
  return ok_status();
}

// ---- report -----------------------------------------------------------------------------------------

double tflops(double macs, double ms) {
  return std::isfinite(ms) && ms > 0 ? 2.0 * macs / (ms * 1e-3) / 1e12 : kNaN;
}
std::string num(double v, int prec) {
  return std::isfinite(v) ? fmt::format("{:.{}f}", v, prec) : std::string("—");
}
std::string short_error(const std::string& e) {
  std::string s = e.substr(0, e.find('\n'));
  if (s.size() > 120) s = s.substr(0, 117) + "...";
  for (char& c : s)
    if (c == '|') c = '/';
  return s;
}

nlohmann::json measured_json(const Measured& m, double macs) {
  nlohmann::json j = {{"name", m.name}, {"detail", m.detail}};
  if (m.error.empty())
    j.update({{"ms", m.t.ms}, {"min_ms", m.t.min_ms}, {"tflops", tflops(macs, m.t.ms)}, {"host_bound_reps", m.t.host_bound}});
  else
    j["error"] = m.error;
  return j;
}

}  // namespace

StatusOr<std::string> throughput(const ThroughputOptions& opt, const std::string& out_dir) {
  bool do_conv = false, do_attn = false, do_gemm = false;
  for (const auto& op : opt.ops) {
    if (op == "conv")
      do_conv = true;
    else if (op == "attention")
      do_attn = true;
    else if (op == "gemm")
      do_gemm = true;
    else
      return invalid_argument(fmt::format("throughput: unknown op '{}' (conv, attention, gemm)", op));
  }
  if (opt.reps < 1 || opt.warmup < 0) return invalid_argument("throughput: reps >= 1 and warmup >= 0");
  CUDA_CHECK(cudaSetDevice(opt.device));
  cudaStream_t s = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::unique_ptr<CUstream_st, decltype(&cudaStreamDestroy)> gs(s, cudaStreamDestroy);
  std::vector<Problem> probs;
  if (do_conv) ASSAY_RETURN_IF_ERROR(conv_problems(opt, s, probs));
  if (do_attn) ASSAY_RETURN_IF_ERROR(attention_problems(opt, s, probs));
  if (do_gemm) ASSAY_RETURN_IF_ERROR(gemm_problems(opt, s, probs));

  const std::string device = gpu::describe_device(opt.device);
  std::string md = fmt::format(
      "# Throughput (assay throughput)\n\nDevice: {}. {}. Command: `assay throughput --ops {} --reps {}`.\n\n"
      "Each time is the median of {} launches, each timed alone between two cudaEvents (after {} warm-up "
      "launches; a 2 ms spin kernel ahead of each start event keeps host-side work such as cuDNN's algorithm "
      "query out of the time). TFLOP/s = 2 x MACs / time; convolution MACs = N K P Q (C/groups) R S for every "
      "pass; attention forward MACs = 2 B H D x (visible query-key pairs), backward 5 B H D x pairs "
      "(FlashAttention-2's count: causal counts the visible half, the composite is charged the same nominal "
      "work). **speed** = vendor ms / kernel ms (above 1: the kernel is faster).\n\n"
      "Vendors: cuDNN with CUDNN_FMA_MATH (CUDA-core FMA, the same arithmetic as the kernels) and with "
      "CUDNN_DEFAULT_MATH (tensor cores / tf32 allowed), deterministic algorithms (FFT and Winograd included), "
      "the algorithm that ran in brackets. Attention: the kernels compute in fp32 on CUDA cores; the composite "
      "is cublasGemmStridedBatchedEx (fp16 inputs, fp32 compute, tensor cores) with S and dP in fp32 and a "
      "row softmax (properties/studies/throughput_kernels.cu), P and dS rounded to fp16; it materialises the S x S "
      "scores. GEMM family (properties/studies/throughput_gemm.cpp): row-major m x n x k problems, alpha 1, beta 0, "
      "against cublasGemmEx / cuBLASLt on the same buffers (fp32: pedantic and default compute; fp16/bf16: "
      "fp32 compute; int8: int32 out without the dequantisation; fp8: fp32 out, fast accumulation off and on; "
      "bias + activation: cuBLASLt's epilogue; its backward: the two cuBLAS GEMMs alone).\n\n"
      "| op | pass | shape | dtype | kernel | ms | TFLOP/s | vendor / composite | vendor ms | vendor TFLOP/s | speed |\n"
      "|---|---|---|---|---|---:|---:|---|---:|---:|---:|\n",
      device, do_conv ? vendor::cudnn_describe() : std::string("cuDNN not used"), fmt::join(opt.ops, ","), opt.reps,
      opt.reps, opt.warmup);
  nlohmann::json j;
  j["device"] = device;
  if (do_conv) j["cudnn"] = vendor::cudnn_describe();
  j["reps"] = opt.reps;
  j["warmup"] = opt.warmup;
  j["gate_ns"] = kGateNs;
  std::string notes;
  int host_bound = 0;
  for (const Problem& p : probs) {
    nlohmann::json jp = {{"op", p.op}, {"pass", p.pass}, {"shape", p.shape}, {"dtype", p.dtype}, {"macs", p.macs}};
    for (const Measured& k : p.kernels) {
      jp["kernels"].push_back(measured_json(k, p.macs));
      host_bound += k.t.host_bound;
      for (const Measured& v : p.vendors) {
        const std::string vname = v.detail.empty() || !v.error.empty() ? v.name : fmt::format("{} ({})", v.name, v.detail);
        std::string kms = k.error.empty() ? num(k.t.ms, 3) : "error", vms = v.error.empty() ? num(v.t.ms, 3) : "n/a";
        md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", p.op, p.pass, p.shape, p.dtype,
                          k.name, kms, num(tflops(p.macs, k.t.ms), 2), vname, vms,
                          num(tflops(p.macs, v.t.ms), 2), num(v.t.ms / k.t.ms, 2));
      }
    }
    for (const Measured& v : p.vendors) {
      jp["vendors"].push_back(measured_json(v, p.macs));
      host_bound += v.t.host_bound;
    }
    for (const Measured& m : p.kernels)
      if (!m.error.empty()) notes += fmt::format("- {} {} {} {}: {}\n", p.op, p.pass, p.shape, m.name, short_error(m.error));
    for (const Measured& m : p.vendors)
      if (!m.error.empty()) notes += fmt::format("- {} {} {} {}: {}\n", p.op, p.pass, p.shape, m.name, short_error(m.error));
    j["problems"].push_back(std::move(jp));
  }
  if (!notes.empty()) md += "\nNot run:\n\n" + notes;
  if (host_bound > 0)
    md += fmt::format(
        "\n{} timed launches were enqueued after their start event had already run (the host outran the 2 ms gate): "
        "those times may include host work.\n",
        host_bound);
  j["host_bound_reps"] = host_bound;
  if (!out_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(out_dir, ec);
    ASSAY_RETURN_IF_ERROR(write_file_atomic(out_dir + "/throughput.md", md));
    ASSAY_RETURN_IF_ERROR(write_file_atomic(out_dir + "/throughput.json", j.dump(2) + "\n"));
  }
  return md;
}

Status select_throughput_ops(ThroughputOptions& opt) {
  for (const auto& op : opt.ops)
    if (op != "conv" && op != "attention" && op != "gemm")
      return invalid_argument(fmt::format("throughput: unknown op '{}' (conv, attention, gemm)", op));
  if (!vendor::cudnn_built() && std::find(opt.ops.begin(), opt.ops.end(), "conv") != opt.ops.end()) {
    opt.ops.erase(std::remove(opt.ops.begin(), opt.ops.end(), "conv"), opt.ops.end());
    fmt::print(stderr, "assay: throughput conv: {}\n", vendor::cudnn_not_built().message());
    if (opt.ops.empty()) return vendor::cudnn_not_built();
  }
  return ok_status();
}

}  // namespace assay

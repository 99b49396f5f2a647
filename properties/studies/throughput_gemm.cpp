// assay throughput --ops gemm: every GEMM-family kernel against cuBLAS / cuBLASLt on the
// same device buffers, at a small, a medium and a large size (256, 1024, 4096; the batched problems
// at 64 x 64 x 64 with batch 512 and 256 x 256 x 256 with batch 64). Row-major problems, no
// transposes ("NN"; int8 and fp8 are "TN", A m x k and B n x k, as cuBLASLt requires), alpha 1,
// beta 0 except where noted. MACs = m n k (x batch).
#include <string>
#include <vector>

#include <fmt/format.h>

#include "properties/studies/throughput_common.h"
#include "kernels/gemm/gemm.h"
#include "kernels/gemm/gemm_epilogue.h"
#include "kernels/gemm/gemm_quant.h"
#include "kernels/gemm/gemm_tc.h"
#include "references/library/cublas_gemm.h"
#include "references/library/cublaslt_gemm.h"

namespace assay::tput_detail {
namespace {

std::string cube(int64_t m, int64_t n, int64_t k) {
  return fmt::format("{}x{}x{}", m, n, k);
}

/// cublasGemmEx on a row-major NN problem (C = A B is column-major C^T = B^T A^T), beta 0.
Status cublas_nn(cublasHandle_t h, int64_t m, int64_t n, int64_t k, const void* a, const void* b, void* c, DType in,
                 DType out, cublasComputeType_t compute) {
  const float alpha = 1.f, beta = 0.f;
  CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
                            static_cast<int>(k), &alpha, b, cuda_type(in), static_cast<int>(n), a, cuda_type(in),
                            static_cast<int>(k), &beta, c, cuda_type(out), static_cast<int>(n), compute,
                            CUBLAS_GEMM_DEFAULT));
  return ok_status();
}

Problem problem(std::string pass, std::string shape, DType dt, double macs) {
  Problem p;
  p.op = "gemm";
  p.pass = std::move(pass);
  p.shape = std::move(shape);
  p.dtype = std::string(dtype_name(dt));
  p.macs = macs;
  return p;
}

}  // namespace

Status gemm_problems(const ThroughputOptions& o, cudaStream_t s, std::vector<Problem>& out) {
  CublasHandle cb;
  CUBLAS_CHECK(cublasCreate(&cb.h));
  CUBLAS_CHECK(cublasSetStream(cb.h, s));
  auto lt = vendor::CublasLt::create();
  if (!lt.ok()) return lt.status();
  const float one = 1.f;
  DevBuf scalars, unit;  // {alpha, beta} = {1, 0} for the tensor-core kernels; 1.0 for fp8 scales
  ASSAY_RETURN_IF_ERROR(scalars.alloc(2 * sizeof(float)));
  ASSAY_RETURN_IF_ERROR(unit.alloc(sizeof(float)));
  const float ab[2] = {1.f, 0.f};
  CUDA_CHECK(cudaMemcpy(scalars.get(), ab, sizeof(ab), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(unit.get(), &one, sizeof(one), cudaMemcpyHostToDevice));

  for (int64_t d : {256, 1024, 4096}) {
    const int64_t m = d, n = d, k = d;
    const double macs = static_cast<double>(m) * n * k;
    const std::string shape = cube(m, n, k);

    // ---- fp32: the ladder against cuBLAS (SIMT fp32, pedantic and default) ----
    {
      DevBuf a, b, c, cv;
      ASSAY_RETURN_IF_ERROR(alloc_normal(a, DType::kF32, m * k, 21, s));
      ASSAY_RETURN_IF_ERROR(alloc_normal(b, DType::kF32, k * n, 22, s));
      ASSAY_RETURN_IF_ERROR(c.alloc(static_cast<size_t>(m * n) * 4));
      ASSAY_RETURN_IF_ERROR(cv.alloc(static_cast<size_t>(m * n) * 4));
      CUDA_CHECK(cudaMemsetAsync(c.get(), 0, static_cast<size_t>(m * n) * 4, s));
      CUDA_CHECK(cudaStreamSynchronize(s));
      kernels::GemmF32Args g;
      g.m = m, g.n = n, g.k = k, g.a = a.f32(), g.lda = k, g.b = b.f32(), g.ldb = n, g.c = c.f32(), g.ldc = n;
      Problem p = problem("fp32 ladder", shape, DType::kF32, macs);
      const std::pair<const char*, kernels::GemmF32Launcher> ladder[] = {
          {"naive", kernels::gemm_f32_naive},     {"coalesced", kernels::gemm_f32_coalesced},
          {"tiled", kernels::gemm_f32_tiled},     {"regblock", kernels::gemm_f32_regblock},
          {"vec4", kernels::gemm_f32_vec4},       {"cpasync", kernels::gemm_f32_cpasync},
          {"splitk", kernels::gemm_f32_splitk}};
      for (const auto& [name, fn] : ladder)
        p.kernels.push_back(measure(name, s, o, [&, fn = fn, name = name] { return cuda_launch(fn(g, s), name); }));
      p.vendors.push_back(measure("cuBLAS fp32", s, o, [&] {
        return cublas_nn(cb.h, m, n, k, a.get(), b.get(), cv.get(), DType::kF32, DType::kF32,
                         CUBLAS_COMPUTE_32F_PEDANTIC);
      }, "CUBLAS_COMPUTE_32F_PEDANTIC"));
      p.vendors.push_back(measure("cuBLAS fp32", s, o, [&] {
        return cublas_nn(cb.h, m, n, k, a.get(), b.get(), cv.get(), DType::kF32, DType::kF32, CUBLAS_COMPUTE_32F);
      }, "CUBLAS_COMPUTE_32F"));
      out.push_back(std::move(p));
    }

    // ---- fp16 / bf16 in, fp32 accumulation: tensor cores against cuBLASLt ----
    for (DType dt : {DType::kF16, DType::kBF16}) {
      DevBuf a, b, c, cv;
      ASSAY_RETURN_IF_ERROR(alloc_normal(a, dt, m * k, 31, s));
      ASSAY_RETURN_IF_ERROR(alloc_normal(b, dt, k * n, 32, s));
      ASSAY_RETURN_IF_ERROR(c.alloc(static_cast<size_t>(m * n) * 4));
      ASSAY_RETURN_IF_ERROR(cv.alloc(static_cast<size_t>(m * n) * 4));
      CUDA_CHECK(cudaStreamSynchronize(s));
      kernels::GemmTcArgs g;
      g.m = m, g.n = n, g.k = k, g.in = dt == DType::kF16 ? kernels::TcIn::kF16 : kernels::TcIn::kBF16;
      g.out = kernels::TcOut::kF32, g.a = a.get(), g.lda = k, g.b = b.get(), g.ldb = n;
      g.scalars = scalars.f32(), g.d = c.get(), g.ldd = n;
      Problem p = problem("tensor cores, fp32 out", shape, dt, macs);
      p.kernels.push_back(measure("wmma", s, o, [&] { return cuda_launch(kernels::gemm_tc_wmma(g, s), "wmma"); }));
      p.kernels.push_back(measure("mma", s, o, [&] { return cuda_launch(kernels::gemm_tc_mma(g, s), "mma"); }));
      vendor::LtGemm lg;
      lg.g.m = m, lg.g.n = n, lg.g.k = k, lg.g.lda = k, lg.g.ldb = n, lg.g.ldc = n;
      lg.a = lg.b = dt, lg.out = DType::kF32;
      p.vendors.push_back(measure("cuBLASLt", s, o, [&] {
        return (*lt)->matmul(lg, 1.0, a.get(), b.get(), 0.0, cv.get(), s);
      }, "fp32 compute"));
      out.push_back(std::move(p));
    }

    // ---- GEMM + bias + activation, fp16, against cuBLASLt's epilogue ----
    for (kernels::epi::Act act : {kernels::epi::Act::kRelu, kernels::epi::Act::kGelu}) {
      const DType dt = DType::kF16;
      DevBuf a, b, bias, y, z, dy, da, db, dbias, yv;
      ASSAY_RETURN_IF_ERROR(alloc_normal(a, dt, m * k, 41, s));
      ASSAY_RETURN_IF_ERROR(alloc_normal(b, dt, k * n, 42, s));
      ASSAY_RETURN_IF_ERROR(alloc_normal(bias, dt, n, 43, s));
      ASSAY_RETURN_IF_ERROR(alloc_normal(dy, dt, m * n, 44, s));
      for (DevBuf* x : {&y, &z, &yv}) ASSAY_RETURN_IF_ERROR(x->alloc(static_cast<size_t>(m * n) * 2));
      ASSAY_RETURN_IF_ERROR(da.alloc(static_cast<size_t>(m * k) * 2));
      ASSAY_RETURN_IF_ERROR(alloc_normal(db, dt, k * n, 45, s));
      ASSAY_RETURN_IF_ERROR(alloc_normal(dbias, dt, n, 46, s));
      CUDA_CHECK(cudaStreamSynchronize(s));
      const char* an = act == kernels::epi::Act::kRelu ? "relu" : "gelu";
      kernels::epi::FwdArgs f;
      f.m = m, f.n = n, f.k = k, f.dt = kernels::epi::Dt::kF16, f.act = act;
      f.a = a.get(), f.lda = k, f.b = b.get(), f.ldb = n, f.bias = bias.get(), f.y = y.get(), f.ldy = n;
      f.z = z.get(), f.ldz = n;
      Problem p = problem(fmt::format("bias + {} forward", an), shape, dt, macs);
      p.kernels.push_back(measure("bias_act_tiled", s, o, [&] {
        return cuda_launch(kernels::epi::gemm_bias_act_tiled(f, s), "gemm_bias_act_tiled");
      }, "writes Y and the pre-activation Z"));
      vendor::LtGemm lg;
      lg.g.m = m, lg.g.n = n, lg.g.k = k, lg.g.lda = k, lg.g.ldb = n, lg.g.ldc = n;
      lg.a = lg.b = lg.out = dt;
      lg.epilogue = act == kernels::epi::Act::kRelu ? vendor::LtEpilogue::kReluBias : vendor::LtEpilogue::kGeluBias;
      lg.bias = bias.get();
      p.vendors.push_back(measure("cuBLASLt epilogue", s, o, [&, lg] {
        return (*lt)->matmul(lg, 1.0, a.get(), b.get(), 0.0, yv.get(), s);
      }, act == kernels::epi::Act::kRelu ? "RELU_BIAS, Y only" : "GELU_BIAS, Y only"));
      out.push_back(std::move(p));

      kernels::epi::BwdArgs g;
      g.m = m, g.n = n, g.k = k, g.dt = kernels::epi::Dt::kF16, g.act = act;
      g.a = a.get(), g.lda = k, g.b = b.get(), g.ldb = n, g.z = z.get(), g.ldz = n, g.dy = dy.get(), g.lddy = n;
      g.da = da.get(), g.ldda = k, g.db = db.get(), g.lddb = n, g.dbias = dbias.get();
      Problem q = problem(fmt::format("bias + {} backward", an), shape, dt, 2 * macs);
      q.kernels.push_back(measure("bias_act_bwd", s, o, [&] {
        return cuda_launch(kernels::epi::gemm_bias_act_bwd(g, s), "gemm_bias_act_bwd");
      }, "dZ, dA, dB += , dbias +="));
      // The two GEMMs alone (dZ taken as given: dY), fp16 in, fp32 compute.
      q.vendors.push_back(measure("cuBLAS 2 GEMMs", s, o, [&]() -> Status {
        const float al = 1.f, be = 0.f, be1 = 1.f;
        // dA (m x k) = dZ (m x n) B^T: column-major dA^T (k x m) = B (k x n, col-major n x k -> op T) ...
        CUBLAS_CHECK(cublasGemmEx(cb.h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(k), static_cast<int>(m),
                                  static_cast<int>(n), &al, b.get(), CUDA_R_16F, static_cast<int>(n), dy.get(),
                                  CUDA_R_16F, static_cast<int>(n), &be, da.get(), CUDA_R_16F, static_cast<int>(k),
                                  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        // dB (k x n) += A^T dZ: column-major dB^T (n x k) = dZ^T (n x m) A (m x k).
        CUBLAS_CHECK(cublasGemmEx(cb.h, CUBLAS_OP_N, CUBLAS_OP_T, static_cast<int>(n), static_cast<int>(k),
                                  static_cast<int>(m), &al, dy.get(), CUDA_R_16F, static_cast<int>(n), a.get(),
                                  CUDA_R_16F, static_cast<int>(k), &be1, db.get(), CUDA_R_16F, static_cast<int>(n),
                                  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        return ok_status();
      }, "dA, dB += (no dZ, no dbias)"));
      out.push_back(std::move(q));
    }

    // ---- int8 with per-channel dequantisation, fp8 e4m3 with per-tensor scales ("TN") ----
    {
      DevBuf a, b, sa, sw, acc, dq, accv;
      ASSAY_RETURN_IF_ERROR(alloc_normal(a, DType::kI8, m * k, 51, s));
      ASSAY_RETURN_IF_ERROR(alloc_normal(b, DType::kI8, n * k, 52, s));
      ASSAY_RETURN_IF_ERROR(alloc_normal(sa, DType::kF32, m, 53, s, 0.01f));
      ASSAY_RETURN_IF_ERROR(alloc_normal(sw, DType::kF32, n, 54, s, 0.01f));
      for (DevBuf* x : {&acc, &dq, &accv}) ASSAY_RETURN_IF_ERROR(x->alloc(static_cast<size_t>(m * n) * 4));
      CUDA_CHECK(cudaStreamSynchronize(s));
      kernels::quant::GemmInt8Args g;
      g.m = m, g.n = n, g.k = k, g.a = static_cast<const int8_t*>(a.get()), g.lda = k;
      g.b = static_cast<const int8_t*>(b.get()), g.ldb = k, g.sa = sa.f32(), g.sw = sw.f32();
      g.d = dq.get(), g.ldd = n, g.out = kernels::quant::OutDt::kF32;
      Problem p = problem("int8, per-channel dequant", shape, DType::kI8, macs);
      p.kernels.push_back(measure("int8_dp4a", s, o, [&] {
        return cuda_launch(kernels::quant::gemm_int8_dp4a(g, s), "gemm_int8_dp4a");
      }, "D fp32 only"));
      kernels::quant::GemmInt8Args g2 = g;
      g2.acc = static_cast<int32_t*>(acc.get()), g2.ldacc = n;
      p.kernels.push_back(measure("int8_dp4a + Acc", s, o, [&] {
        return cuda_launch(kernels::quant::gemm_int8_dp4a(g2, s), "gemm_int8_dp4a");
      }, "D fp32 and the int32 accumulators"));
      vendor::LtGemm lg;
      lg.g.m = m, lg.g.n = n, lg.g.k = k, lg.g.trans_b = true, lg.g.lda = k, lg.g.ldb = k, lg.g.ldc = n;
      lg.a = lg.b = DType::kI8, lg.out = DType::kI32;
      p.vendors.push_back(measure("cuBLASLt int8", s, o, [&] {
        return (*lt)->matmul(lg, 1.0, a.get(), b.get(), 0.0, accv.get(), s);
      }, "int32 out, no dequant"));
      out.push_back(std::move(p));
    }
    {
      DevBuf a, b, dq, dv;
      ASSAY_RETURN_IF_ERROR(alloc_normal(a, DType::kE4M3, m * k, 61, s));
      ASSAY_RETURN_IF_ERROR(alloc_normal(b, DType::kE4M3, n * k, 62, s));
      for (DevBuf* x : {&dq, &dv}) ASSAY_RETURN_IF_ERROR(x->alloc(static_cast<size_t>(m * n) * 4));
      CUDA_CHECK(cudaStreamSynchronize(s));
      kernels::quant::GemmFp8Args g;
      g.m = m, g.n = n, g.k = k, g.a = static_cast<const uint8_t*>(a.get()), g.lda = k;
      g.b = static_cast<const uint8_t*>(b.get()), g.ldb = k, g.scale_a = unit.f32(), g.scale_b = unit.f32();
      g.d = dq.get(), g.ldd = n, g.out = kernels::quant::OutDt::kF32;
      Problem p = problem("fp8 e4m3, per-tensor scales", shape, DType::kE4M3, macs);
      p.kernels.push_back(measure("fp8_simt", s, o, [&] {
        return cuda_launch(kernels::quant::gemm_fp8_simt(g, s), "gemm_fp8_simt");
      }));
      for (bool fast : {false, true}) {
        vendor::LtGemm lg;
        lg.g.m = m, lg.g.n = n, lg.g.k = k, lg.g.trans_b = true, lg.g.lda = k, lg.g.ldb = k, lg.g.ldc = n;
        lg.a = lg.b = DType::kE4M3, lg.out = DType::kF32, lg.fast_accum = fast;
        lg.scale_a = unit.f32(), lg.scale_b = unit.f32();
        p.vendors.push_back(measure("cuBLASLt fp8", s, o, [&, lg] {
          return (*lt)->matmul(lg, 1.0, a.get(), b.get(), 0.0, dv.get(), s);
        }, fast ? "fast accumulation" : "no fast accumulation"));
      }
      out.push_back(std::move(p));
    }
  }

  // ---- batched fp32 ----
  for (const auto& [d, batch] : std::vector<std::pair<int64_t, int64_t>>{{64, 512}, {256, 64}}) {
    const int64_t m = d, n = d, k = d, sa = m * k, sb = k * n, sc = m * n;
    DevBuf a, b, c, cv;
    ASSAY_RETURN_IF_ERROR(alloc_normal(a, DType::kF32, batch * sa, 71, s));
    ASSAY_RETURN_IF_ERROR(alloc_normal(b, DType::kF32, batch * sb, 72, s));
    ASSAY_RETURN_IF_ERROR(c.alloc(static_cast<size_t>(batch * sc) * 4));
    ASSAY_RETURN_IF_ERROR(cv.alloc(static_cast<size_t>(batch * sc) * 4));
    CUDA_CHECK(cudaStreamSynchronize(s));
    kernels::GemmF32Args g;
    g.m = m, g.n = n, g.k = k, g.a = a.f32(), g.lda = k, g.b = b.f32(), g.ldb = n, g.c = c.f32(), g.ldc = n;
    Problem p = problem("fp32 strided-batched", fmt::format("{} x {}", batch, cube(m, n, k)), DType::kF32,
                        static_cast<double>(batch) * m * n * k);
    p.kernels.push_back(measure("strided", s, o, [&] {
      return cuda_launch(kernels::gemm_f32_tiled_strided_batched(g, batch, sa, sb, sc, s), "strided");
    }));
    p.vendors.push_back(measure("cuBLAS fp32 strided-batched", s, o, [&]() -> Status {
      const float al = 1.f, be = 0.f;
      CUBLAS_CHECK(cublasGemmStridedBatchedEx(cb.h, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
                                              static_cast<int>(k), &al, b.get(), CUDA_R_32F, static_cast<int>(n), sb,
                                              a.get(), CUDA_R_32F, static_cast<int>(k), sa, &be, cv.get(), CUDA_R_32F,
                                              static_cast<int>(n), sc, static_cast<int>(batch),
                                              CUBLAS_COMPUTE_32F_PEDANTIC, CUBLAS_GEMM_DEFAULT));
      return ok_status();
    }, "CUBLAS_COMPUTE_32F_PEDANTIC"));
    out.push_back(std::move(p));
  }
  return ok_status();
}

}  // namespace assay::tput_detail

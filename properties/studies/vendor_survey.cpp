#include "properties/studies/vendor_survey.h"

#include <cmath>
#include <cstring>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "harness/bounds.h"
#include "harness/corpus.h"
#include "harness/dtype.h"
#include "harness/gpu/cuda_check.h"
#include "harness/gpu/lane.h"
#include "harness/values.h"
#include "references/host/gemm.h"

namespace assay {
namespace {

struct Config {
  const char* name;
  DType in;
  cudaDataType_t type_in, type_out;
  cublasComputeType_t compute;
};

}  // namespace

StatusOr<std::string> vendor_survey(int device, const std::string& out_dir, int64_t mn, int reps) {
  CUDA_CHECK(cudaSetDevice(device));
  cublasHandle_t h;
  CUBLAS_CHECK(cublasCreate(&h));
  const Config configs[] = {
      {"fp32 pedantic", DType::kF32, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_PEDANTIC},
      {"fp32 in, tf32 compute", DType::kTF32, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32},
      {"fp16 in, fp32 compute", DType::kF16, CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F},
      {"bf16 in, fp32 compute", DType::kBF16, CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F},
      {"int8 in, int32 compute", DType::kI8, CUDA_R_8I, CUDA_R_32I, CUBLAS_COMPUTE_32I},
  };
  nlohmann::json j = nlohmann::json::array();
  std::string md = fmt::format(
      "# cuBLAS against the fp64 reference on the same rounded inputs\n\nDevice: {}. C = A*B, {}x{} outputs, "
      "{} repetitions per row (fresh seeds). `u32 ratio` = max |C - ref| / (2^-24 * (|A||B|)_ij); `vs RN ceiling` "
      "= max |C - ref| / gamma_(k+2)(2^-24)*|A||B| (the fp32 round-to-nearest ceiling; > 1 means that model does "
      "not hold for this path).\n\n| path | k | values | u32 ratio | vs RN ceiling |\n|---|---:|---|---:|---:|\n",
      gpu::describe_device(device), mn, mn, reps);
  for (const Config& cfg : configs) {
    for (int64_t k : {64, 1024, 8192}) {
      for (ValueClass cls : {ValueClass::kNormal, ValueClass::kSameSign}) {
        double worst_u = 0, worst_ceiling = 0;
        std::string unsupported;
        for (int rep = 0; rep < reps; ++rep) {
          const int64_t m = mn, n = mn;
          ValueRecipe r;
          r.cls = cfg.in == DType::kI8 ? ValueClass::kSmallInt : cls;
          r.int_range = 100;
          r.seed = 1000 * static_cast<uint64_t>(k) + static_cast<uint64_t>(rep);
          if (cls == ValueClass::kSameSign && cfg.in == DType::kI8) r.int_range = 100;
          std::vector<double> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n));
          const size_t es = dtype_size(cfg.in);
          std::vector<unsigned char> ha(a.size() * es), hb(b.size() * es);
          for (size_t i = 0; i < a.size(); ++i) {
            double v = recipe_value(r, 1, i);
            if (cfg.in == DType::kI8 && cls == ValueClass::kSameSign) v = std::fabs(v);
            store_as(cfg.in, v, ha.data() + i * es);
            a[i] = load_as_double(cfg.in, ha.data() + i * es);  // exactly what the GPU reads
          }
          for (size_t i = 0; i < b.size(); ++i) {
            double v = recipe_value(r, 2, i);
            if (cfg.in == DType::kI8 && cls == ValueClass::kSameSign) v = std::fabs(v);
            store_as(cfg.in, v, hb.data() + i * es);
            b[i] = load_as_double(cfg.in, hb.data() + i * es);
          }
          std::vector<double> ref(static_cast<size_t>(m * n)), mag(ref.size());
          ref::gemm_reference(ref::GemmProblem<double>{m, n, k, false, false, 1, 0, a.data(), k, b.data(), n, nullptr, 0},
                              ref.data(), mag.data(), 4);
          void *da, *db, *dc;
          CUDA_CHECK(cudaMalloc(&da, ha.size()));
          CUDA_CHECK(cudaMalloc(&db, hb.size()));
          CUDA_CHECK(cudaMalloc(&dc, ref.size() * 4));
          CUDA_CHECK(cudaMemcpy(da, ha.data(), ha.size(), cudaMemcpyHostToDevice));
          CUDA_CHECK(cudaMemcpy(db, hb.data(), hb.size(), cudaMemcpyHostToDevice));
          // Row-major C = A*B is column-major C^T = B^T A^T.
          const bool integer = cfg.type_out == CUDA_R_32I;
          const float alpha_f = 1, beta_f = 0;
          const int32_t alpha_i = 1, beta_i = 0;
          const void* alpha = integer ? static_cast<const void*>(&alpha_i) : &alpha_f;
          const void* beta = integer ? static_cast<const void*>(&beta_i) : &beta_f;
          const cublasStatus_t st = cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
                                                 static_cast<int>(k), alpha, db, cfg.type_in, static_cast<int>(n), da,
                                                 cfg.type_in, static_cast<int>(k), beta, dc, cfg.type_out,
                                                 static_cast<int>(n), cfg.compute, CUBLAS_GEMM_DEFAULT);
          if (st != CUBLAS_STATUS_SUCCESS) {
            unsupported = cublasGetStatusName(st);
            cudaFree(da);
            cudaFree(db);
            cudaFree(dc);
            break;
          }
          std::vector<unsigned char> hc(ref.size() * 4);
          CUDA_CHECK(cudaMemcpy(hc.data(), dc, hc.size(), cudaMemcpyDeviceToHost));
          cudaFree(da);
          cudaFree(db);
          cudaFree(dc);
          const double g = gamma_n(k + 2, 0x1p-24);
          for (size_t i = 0; i < ref.size(); ++i) {
            double c;
            if (integer) {
              int32_t v;
              std::memcpy(&v, hc.data() + 4 * i, 4);
              c = v;
            } else {
              float v;
              std::memcpy(&v, hc.data() + 4 * i, 4);
              c = v;
            }
            if (mag[i] <= 0) continue;
            const double err = std::fabs(c - ref[i]);
            worst_u = std::max(worst_u, err / (0x1p-24 * mag[i]));
            worst_ceiling = std::max(worst_ceiling, err / (g * mag[i]));
          }
        }
        const char* cname = cfg.in == DType::kI8 ? (cls == ValueClass::kSameSign ? "int [0,100]" : "int [-100,100]")
                                                 : std::string(value_class_name(cls)) == "normal" ? "normal" : "same_sign";
        if (!unsupported.empty()) {
          md += fmt::format("| {} | {} | {} | not run: {} | |\n", cfg.name, k, cname, unsupported);
          j.push_back({{"path", cfg.name}, {"k", k}, {"values", cname}, {"error", unsupported}});
          continue;
        }
        md += fmt::format("| {} | {} | {} | {:.4g} | {:.4g} |\n", cfg.name, k, cname, worst_u, worst_ceiling);
        j.push_back({{"path", cfg.name}, {"k", k}, {"values", cname}, {"u32_ratio", worst_u},
                     {"rn_ceiling_ratio", worst_ceiling}});
      }
    }
  }
  cublasDestroy(h);
  ASSAY_RETURN_IF_ERROR(write_file_atomic(out_dir + "/vendor-survey.md", md));
  ASSAY_RETURN_IF_ERROR(write_file_atomic(out_dir + "/vendor-survey.json", j.dump(2) + "\n"));
  return md;
}

}  // namespace assay

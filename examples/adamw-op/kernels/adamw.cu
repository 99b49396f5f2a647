#include "adamw.h"

#include <algorithm>

namespace my {
namespace {

__device__ float step1(float& p, float g, float& m, float& v, const AdamW h) {
  m = h.beta1 * m + (1.0f - h.beta1) * g;
  v = h.beta2 * v + (1.0f - h.beta2) * (g * g);
  const float r = (m / h.bc1) / (sqrtf(v / h.bc2) + h.eps);
  p = p * (1.0f - h.lr * h.wd) - h.lr * r;
  return p;
}

__global__ void adamw4(float4* p, const float4* g, float4* m, float4* v, int64_t n4, AdamW h) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n4; i += int64_t{gridDim.x} * blockDim.x) {
    float4 P = p[i], G = g[i], M = m[i], V = v[i];
    step1(P.x, G.x, M.x, V.x, h), step1(P.y, G.y, M.y, V.y, h);
    step1(P.z, G.z, M.z, V.z, h), step1(P.w, G.w, M.w, V.w, h);
    p[i] = P, m[i] = M, v[i] = V;
  }
}

}  // namespace

cudaError_t adamw_step(float* p, const float* g, float* m, float* v, int64_t n, const AdamW& h, cudaStream_t s) {
  const int64_t n4 = n / 4;
  if (n4 > 0)
    adamw4<<<static_cast<unsigned>(std::min<int64_t>((n4 + 255) / 256, 4096)), 256, 0, s>>>(
        reinterpret_cast<float4*>(p), reinterpret_cast<const float4*>(g), reinterpret_cast<float4*>(m),
        reinterpret_cast<float4*>(v), n4, h);
  return cudaGetLastError();
}

}  // namespace my

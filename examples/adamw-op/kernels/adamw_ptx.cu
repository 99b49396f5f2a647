// The same AdamW step as a scalar kernel built elsewhere (here: compiled to PTX by
// the example's build and loaded at run time through the CUDA driver API).
#include <cstdint>

extern "C" __global__ void adamw_scalar(float* p, const float* g, float* m, float* v, int64_t n, float lr,
                                        float beta1, float beta2, float eps, float wd, float bc1, float bc2) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float gi = g[i];
    const float mi = beta1 * m[i] + (1.0f - beta1) * gi;
    const float vi = beta2 * v[i] + (1.0f - beta2) * (gi * gi);
    const float r = (mi / bc1) / (sqrtf(vi / bc2) + eps);
    p[i] = p[i] * (1.0f - lr * wd) - lr * r;
    m[i] = mi;
    v[i] = vi;
  }
}

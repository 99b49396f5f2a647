// harness/gpu/materialize_device.h for fp32, fp16, bf16, e4m3, e5m2 and int8: a tensor drawn on
// the device has exactly the bytes the host's materialize() writes (the value at every covered
// element rounded as store_as rounds it, the dtype's own gap canary in the gaps), and
// materialize_output_device the bytes of materialize_output() (the dtype's poison). Views with
// an offset, padded rows (alone and in a batch), an odd extent (a 16-bit image that ends mid-word) and a permuted
// (non-row-major) rank-3 layout; every value class, with the dtype-dependent ones (near-overflow:
// the dtype's max; subnormal: its subnormal range) and injected NaN, +-Inf and -0 among them.
// A CPU-only machine skips the suite visibly; materialize_device_supports is checked on the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include <cuda_runtime.h>

#include "harness/gpu/lane.h"
#include "harness/gpu/materialize_device.h"
#include "harness/gpu/materialize_device_kernels.h"
#include "harness/values.h"

namespace assay {
namespace {

std::vector<TensorDesc> views(DType t) {
  std::vector<TensorDesc> v;
  TensorDesc padded;  // 37 x 29 rows of stride 33 after an offset of 3: extent odd for 16-bit images
  padded.dtype = t, padded.shape = {37, 29}, padded.strides = {33, 1}, padded.offset = 3;
  v.push_back(padded);
  TensorDesc dense;  // 1-D, odd length
  dense.dtype = t, dense.shape = {1001}, dense.strides = {1}, dense.offset = 0;
  v.push_back(dense);
  TensorDesc permuted;  // [4, 6, 5] stored with the last two dims swapped, offset 1
  permuted.dtype = t, permuted.shape = {4, 6, 5}, permuted.strides = {30, 1, 6}, permuted.offset = 1;
  v.push_back(permuted);
  TensorDesc batched;  // [3, 7, 5] of padded rows (stride 9), the batch dim folding into them, offset 2
  batched.dtype = t, batched.shape = {3, 7, 5}, batched.strides = {63, 9, 1}, batched.offset = 2;
  v.push_back(batched);
  return v;
}

std::vector<ValueRecipe> recipes() {
  std::vector<ValueRecipe> out;
  uint64_t seed = 100;
  for (ValueClass c : kAllValueClasses) {
    ValueRecipe r;
    r.cls = c;
    r.seed = ++seed;
    r.scale = 3.0;
    if (c == ValueClass::kLogUniform) r.exp_min = -30, r.exp_max = 20;  // past fp16's range both ways
    if (c == ValueClass::kMeanSpread) r.mean = 1000.5, r.spread = 0.75;
    if (c == ValueClass::kSmallInt) r.int_range = 300;  // exact in fp16; bf16 (8 bits) rounds the odd ones above 256
    out.push_back(r);
    ValueRecipe inj = r;  // the same class with every special injected
    inj.seed = ++seed;
    inj.inject.kinds = kSpecialAll;
    inj.inject.rate = 0.05;
    inj.inject.at = kAtFirst | kAtLast | kAtTile;
    inj.inject.tile = 8;
    out.push_back(inj);
  }
  return out;
}

class MaterializeDeviceGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    auto n = gpu::device_count();
    if (!n.ok()) GTEST_SKIP() << "GPU test skipped: " << n.status().message();
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  /// The device image of `desc` (values under `r`, or the output poison when r is null), copied back.
  std::vector<unsigned char> draw(const TensorDesc& desc, const ValueRecipe* r) {
    const size_t bytes = static_cast<size_t>(desc.extent()) * dtype_size(desc.dtype);
    std::vector<unsigned char> out(bytes);
    void* dev = nullptr;
    EXPECT_EQ(cudaMalloc(&dev, bytes), cudaSuccess);
    const Status s = r != nullptr ? gpu::materialize_device(desc, *r, fnv1a64("X", 1), dev, stream_)
                                  : gpu::materialize_output_device(desc, dev, stream_);
    EXPECT_TRUE(s.ok()) << s.to_string();
    EXPECT_EQ(cudaMemcpyAsync(out.data(), dev, bytes, cudaMemcpyDeviceToHost, stream_), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    cudaFree(dev);
    return out;
  }

  cudaStream_t stream_ = nullptr;
};

/// Elements whose bytes differ between two images of `desc`.
int64_t differing(const TensorDesc& desc, const std::vector<unsigned char>& a, const std::vector<unsigned char>& b) {
  const size_t es = dtype_size(desc.dtype);
  int64_t n = 0;
  for (int64_t e = 0; e < desc.extent(); ++e) n += std::memcmp(a.data() + e * es, b.data() + e * es, es) != 0 ? 1 : 0;
  return n;
}

TEST_F(MaterializeDeviceGpu, HalfAndFp32ImagesAreTheHostsBytes) {
  int64_t images = 0, elements = 0;
  for (DType t : {DType::kF16, DType::kBF16, DType::kF32, DType::kE4M3, DType::kE5M2, DType::kI8})
    for (const TensorDesc& d : views(t)) {
      ASSERT_TRUE(gpu::materialize_device_supports(d));
      for (const ValueRecipe& r : recipes()) {
        SCOPED_TRACE(std::string(dtype_name(t)) + " " + std::string(value_class_name(r.cls)) +
                     (r.inject.active() ? " with injection" : "") + " shape rank " + std::to_string(d.rank()));
        const std::vector<unsigned char> dev = draw(d, &r);
        std::vector<unsigned char> host(dev.size());
        materialize(d, r, fnv1a64("X", 1), host.data());
        ASSERT_EQ(differing(d, dev, host), 0) << "device image differs from the host's";
        ASSERT_EQ(dev, draw(d, &r)) << "two device draws differ";
        ++images;
        elements += d.extent();
      }
      const std::vector<unsigned char> dev = draw(d, nullptr);
      std::vector<unsigned char> host(dev.size());
      materialize_output(d, host.data());
      ASSERT_EQ(differing(d, dev, host), 0) << dtype_name(t) << ": output poison / gap canary differ from the host's";
    }
  for (const TensorDesc& d : views(DType::kI32)) {  // int32: an output's poison only
    const std::vector<unsigned char> dev = draw(d, nullptr);
    std::vector<unsigned char> host(dev.size());
    materialize_output(d, host.data());
    ASSERT_EQ(differing(d, dev, host), 0) << "int32: output poison / gap canary differ from the host's";
  }
  std::printf("[ measured ] materialize_device: %lld images (%lld elements) byte for byte the host's\n",
              static_cast<long long>(images), static_cast<long long>(elements));
}

// The classes built on the series (value_core.h) at a large case's size, where the device draws
// instead of the host: 2^22 elements each, the host's bytes. The normal class also in the narrow
// formats and at scales past fp32's largest value and among its subnormals: the device settles
// it from value_core::normal_approx where that decides the stored bits, and from base_value
// where it does not (some hundreds of the fp32 elements here).
TEST_F(MaterializeDeviceGpu, SeriesClassesAtLargeSizeAreTheHostsBytes) {
  struct Draw {
    ValueClass c;
    DType t;
    double scale;
  };
  const Draw draws[] = {{ValueClass::kNormal, DType::kF32, 3.0},      {ValueClass::kLogUniform, DType::kF32, 3.0},
                        {ValueClass::kPareto, DType::kF32, 3.0},      {ValueClass::kNearOverflow, DType::kF32, 3.0},
                        {ValueClass::kNormal, DType::kBF16, 3.0},     {ValueClass::kNormal, DType::kF16, 3e4},
                        {ValueClass::kNormal, DType::kE4M3, 300.0},   {ValueClass::kNormal, DType::kI8, 100.0},
                        {ValueClass::kNormal, DType::kF32, 1.5e38},   {ValueClass::kNormal, DType::kF32, 1e-41}};
  int64_t elements = 0;
  for (const Draw& w : draws) {
    const TensorDesc d = TensorDesc::contiguous(w.t, {2048, 2048});
    ValueRecipe r;
    r.cls = w.c, r.seed = 17, r.scale = w.scale;
    if (w.c == ValueClass::kLogUniform) r.exp_min = -120, r.exp_max = 100;
    const std::vector<unsigned char> dev = draw(d, &r);
    std::vector<unsigned char> host(dev.size());
    materialize(d, r, fnv1a64("X", 1), host.data());
    ASSERT_EQ(differing(d, dev, host), 0)
        << value_class_name(w.c) << " " << dtype_name(w.t) << " scale " << w.scale << ": device image differs from the host's";
    elements += d.numel();
  }
  std::printf("[ measured ] materialize_device: %lld series-class elements byte for byte the host's\n",
              static_cast<long long>(elements));
}

TEST_F(MaterializeDeviceGpu, Fp16ImageHoldsTheRecipesValuesRoundedToFp16) {
  // Independent of materialize(): each element decodes to the recipe's value rounded to fp16.
  TensorDesc d;
  d.dtype = DType::kF16, d.shape = {4096}, d.strides = {1};
  ValueRecipe r;
  r.cls = ValueClass::kUniform, r.seed = 3;
  const std::vector<unsigned char> dev = draw(d, &r);
  ASSERT_EQ(dev.size(), 4096u * 2);
  int64_t nonzero = 0;
  for (int64_t e = 0; e < 4096; ++e) {
    const double v = load_as_double(DType::kF16, dev.data() + 2 * e);
    nonzero += v != 0 ? 1 : 0;
    ASSERT_LE(std::fabs(v), 1.0);
    ASSERT_EQ(v,
              static_cast<double>(round_to(DType::kF16, static_cast<float>(recipe_value(r, d, fnv1a64("X", 1), e)))));
  }
  EXPECT_GT(nonzero, 4000);
}

TEST(MaterializeDeviceSupports, FloatAndInt8FormatsWithoutOverlap) {
  TensorDesc d;
  d.shape = {4, 4}, d.strides = {4, 1};
  for (DType t : kAllDTypes) {
    d.dtype = t;
    // fp64, tf32 and int32 tensors are always drawn by the host (materialize()).
    EXPECT_EQ(gpu::materialize_device_supports(d),
              t == DType::kF32 || t == DType::kF16 || t == DType::kBF16 || t == DType::kE4M3 || t == DType::kE5M2 ||
                  t == DType::kI8)
        << dtype_name(t);
  }
  d.dtype = DType::kI32;
  EXPECT_TRUE(gpu::materialize_output_device_supports(d)) << "an int32 output is poisoned on the device";
  d.dtype = DType::kF16, d.strides = {0, 1};  // a broadcast view: the write order is not defined
  EXPECT_FALSE(gpu::materialize_device_supports(d));
  EXPECT_FALSE(gpu::materialize_output_device_supports(d));
}

// One DeviceDraw past both of its queues (more tensors than a launch takes, kMaxDrawJobs, and
// more fills, kMaxFillJobs): it launches early, fills before the draws they precede, and every
// tensor still gets the host's bytes, every fill its pattern, in a buffer they share.
TEST_F(MaterializeDeviceGpu, OneDrawPastItsQueuesGivesEveryImageItsBytes) {
  const std::vector<ValueRecipe> rec = recipes();
  const DType types[3] = {DType::kF16, DType::kBF16, DType::kF32};
  constexpr int kTensors = 3 * gpu::detail::kMaxDrawJobs + 2;
  constexpr int64_t kFillWords = 16;
  struct Item {
    TensorDesc d;
    ValueRecipe r;
    bool poison;
    int64_t at, fill_at;  // byte offsets of the image and of the fill region after it
  };
  std::vector<Item> items;
  int64_t bytes = 0;
  for (int i = 0; i < kTensors; ++i) {
    Item it{views(types[i % 3])[static_cast<size_t>(i % 4)], rec[static_cast<size_t>(i) % rec.size()], i % 5 == 4, 0, 0};
    it.at = bytes;
    bytes += (it.d.extent() * static_cast<int64_t>(dtype_size(it.d.dtype)) + 255) / 256 * 256;
    it.fill_at = bytes;
    bytes += 256;
    items.push_back(it);
  }
  unsigned char* dev = nullptr;
  ASSERT_EQ(cudaMalloc(&dev, static_cast<size_t>(bytes)), cudaSuccess);
  ASSERT_EQ(cudaMemset(dev, 0, static_cast<size_t>(bytes)), cudaSuccess);
  gpu::DeviceDraw draw(stream_);
  int fills = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    const Item& it = items[i];
    const Status s = it.poison ? draw.poison(it.d, dev + it.at) : draw.values(it.d, it.r, fnv1a64("X", 1) + i, dev + it.at);
    ASSERT_TRUE(s.ok()) << s.to_string();
    // Two fills per tensor in the region after it: words, then halves after them.
    ASSERT_TRUE(draw.fill(dev + it.fill_at, 4, 0xC0FFEE00u + static_cast<uint32_t>(i), kFillWords).ok());
    ASSERT_TRUE(draw.fill(dev + it.fill_at + 4 * kFillWords, 2, 0xBEEFu, 8).ok());
    fills += 2;
  }
  ASSERT_GT(fills, gpu::detail::kMaxFillJobs);
  ASSERT_TRUE(draw.launch().ok());
  std::vector<unsigned char> got(static_cast<size_t>(bytes));
  ASSERT_EQ(cudaMemcpyAsync(got.data(), dev, got.size(), cudaMemcpyDeviceToHost, stream_), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  cudaFree(dev);
  for (size_t i = 0; i < items.size(); ++i) {
    const Item& it = items[i];
    SCOPED_TRACE("tensor " + std::to_string(i) + " " + std::string(dtype_name(it.d.dtype)));
    std::vector<unsigned char> host(static_cast<size_t>(it.d.extent()) * dtype_size(it.d.dtype));
    if (it.poison)
      materialize_output(it.d, host.data());
    else
      materialize(it.d, it.r, fnv1a64("X", 1) + i, host.data());
    const std::vector<unsigned char> image(got.begin() + it.at, got.begin() + it.at + static_cast<int64_t>(host.size()));
    EXPECT_EQ(differing(it.d, image, host), 0) << "the image differs from the host's";
    for (int64_t w = 0; w < kFillWords; ++w) {
      uint32_t v = 0;
      std::memcpy(&v, got.data() + it.fill_at + 4 * w, 4);
      EXPECT_EQ(v, 0xC0FFEE00u + static_cast<uint32_t>(i)) << "word " << w;
    }
    for (int64_t h = 0; h < 8; ++h) {
      uint16_t v = 0;
      std::memcpy(&v, got.data() + it.fill_at + 4 * kFillWords + 2 * h, 2);
      EXPECT_EQ(v, 0xBEEFu) << "half " << h;
    }
  }
}

}  // namespace
}  // namespace assay

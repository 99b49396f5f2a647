// harness/gpu/check_kernels.cu on planted differences, without an op around it: a region that
// must not change counts every changed 4-byte word and names the first, whether its words are
// read 16 bytes at a time (aligned) or one at a time (an unaligned start, the tail past the last
// whole 16 bytes); the determinism rerun's compare counts the elements whose bits changed, holds
// those to the bound, and leaves the bound of an element with the first launch's bits to the
// first launch's check. A CPU-only machine skips the suite visibly.
#include <gtest/gtest.h>

#include <cfloat>
#include <cstring>
#include <vector>

#include <cuda_runtime.h>

#include "harness/gpu/check_kernels.h"
#include "harness/gpu/lane.h"

namespace assay {
namespace {

class CheckKernelsGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    auto n = gpu::device_count();
    if (!n.ok()) GTEST_SKIP() << "GPU test skipped: " << n.status().message();
    ASSERT_EQ(cudaMalloc(&result_, sizeof(gpu::CheckResult)), cudaSuccess);
  }
  void TearDown() override {
    for (void* p : owned_) cudaFree(p);
    if (result_ != nullptr) cudaFree(result_);
  }
  template <typename T>
  T* upload(const std::vector<T>& host) {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, host.size() * sizeof(T)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
    owned_.push_back(p);
    return static_cast<T*>(p);
  }
  gpu::CheckResult run(const gpu::CheckParams& p) {
    EXPECT_EQ(gpu::launch_check(p, result_, nullptr), cudaSuccess);
    gpu::CheckResult r;
    EXPECT_EQ(cudaMemcpy(&r, result_, sizeof r, cudaMemcpyDeviceToHost), cudaSuccess);
    return r;
  }

  gpu::CheckResult* result_ = nullptr;
  std::vector<void*> owned_;
};

TEST_F(CheckKernelsGpu, UnchangedRegionsCountEveryChangedWordAndTheFirst) {
  const int64_t bytes = (1 << 20) + 12;  // 12 bytes past the last whole 16
  std::vector<unsigned char> snap(static_cast<size_t>(bytes));
  for (size_t i = 0; i < snap.size(); ++i) snap[i] = static_cast<unsigned char>(i * 131 + 7);
  std::vector<unsigned char> arena = snap;
  // Words 5, 6 and 7 share one 16-byte load (its first word unchanged), 1000 is alone, the last
  // word is in the tail; a change to one byte of a word counts the word.
  const std::vector<int64_t> words = {5, 6, 7, 1000, bytes / 4 - 1};
  for (int64_t w : words) arena[static_cast<size_t>(4 * w + 1)] ^= 0x10;
  const unsigned char* a = upload(arena);
  const unsigned char* s = upload(snap);
  gpu::CheckParams p;
  p.arena = a, p.snapshot = s;
  auto region = [](int64_t b, int64_t e) {
    gpu::DevRegion r;
    r.byte_begin = b, r.byte_end = e, r.kind = gpu::DevRegion::kBytesEqual;
    return r;
  };
  p.regions[0] = region(0, bytes);         // aligned: 16 bytes a load, then the tail
  p.regions[1] = region(4, bytes);         // unaligned: a word a load throughout
  p.regions[2] = region(32, 4000);         // aligned, changes outside it only
  p.regions[3] = region(16 * 250, bytes);  // aligned, word 1000 its first
  p.nregions = 4;
  const gpu::CheckResult r = run(p);
  EXPECT_EQ(r.regions[0].changed, 5u);
  EXPECT_EQ(gpu::first_index(r.regions[0].changed, r.regions[0].changed_first), 5);
  EXPECT_EQ(r.regions[1].changed, 5u);  // word indices count from the region's start
  EXPECT_EQ(gpu::first_index(r.regions[1].changed, r.regions[1].changed_first), 4);
  EXPECT_EQ(r.regions[2].changed, 0u);
  EXPECT_EQ(r.regions[3].changed, 2u);
  EXPECT_EQ(gpu::first_index(r.regions[3].changed, r.regions[3].changed_first), 0);
}

TEST_F(CheckKernelsGpu, RerunHoldsOnlyTheElementsWhoseBitsChangedToTheBound) {
  const int64_t rows = 64, cols = 64, n = rows * cols;
  std::vector<double> ref(static_cast<size_t>(n));
  std::vector<float> first(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    ref[static_cast<size_t>(i)] = static_cast<double>(i % 97) - 48;
    first[static_cast<size_t>(i)] = static_cast<float>(ref[static_cast<size_t>(i)]);
  }
  first[30] += 1;  // beyond the bound in the first launch already
  std::vector<float> rerun = first;
  rerun[10] += 1e-4f;  // changed, inside the bound
  rerun[20] += 1;      // changed, beyond it
  gpu::DevCompare c;
  c.out_dtype = 1;  // fp32
  c.rows = rows, c.cols = cols, c.ld = cols;
  c.ref = upload(ref);
  c.floor = 1e-3;
  c.out_max = FLT_MAX;
  c.out = upload(rerun);
  gpu::CheckParams p;
  p.ncompares = 1;
  p.compares[0] = c;
  const gpu::CheckResult alone = run(p);  // the rerun's output on its own: both outliers
  EXPECT_EQ(alone.compares[0].bound, 2u);
  EXPECT_EQ(gpu::first_index(alone.compares[0].bound, alone.compares[0].bound_first), 20);
  EXPECT_EQ(alone.compares[0].nondet, 0u);
  p.compares[0].prev = upload(first);
  const gpu::CheckResult r = run(p);
  EXPECT_EQ(r.compares[0].nondet, 2u);
  EXPECT_EQ(gpu::first_index(r.compares[0].nondet, r.compares[0].nondet_first), 10);
  EXPECT_EQ(r.compares[0].bound, 1u) << "element 30 has the first launch's bits: its check is that launch's";
  EXPECT_EQ(gpu::first_index(r.compares[0].bound, r.compares[0].bound_first), 20);
}

}  // namespace
}  // namespace assay

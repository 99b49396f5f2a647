// harness/gpu/check_kernels.cu on planted differences, without an op around it: a region that
// must not change counts every changed 4-byte word and names the first, whether its words are
// read 16 bytes at a time (aligned) or one at a time (an unaligned start, the tail past the last
// whole 16 bytes); the determinism rerun's compare counts the elements whose bits changed, holds
// those to the bound, and leaves the bound of an element with the first launch's bits to the
// first launch's check; a dense output's region finds unwritten elements against the output
// poison and changed gap elements at every element width; a large arena's span restore gives back
// the snapshot. A CPU-only machine skips the suite visibly.
#include <gtest/gtest.h>

#include <cfloat>
#include <cstring>
#include <vector>

#include <cuda_runtime.h>

#include "harness/gpu/check_kernels.h"
#include "harness/gpu/lane.h"
#include "harness/values.h"

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

// A dense output's region, at every element width: covered elements are held against the
// output poison (not read from the snapshot), so the planted unwritten ones (the first covered,
// mid-way, the last) are found whether their 16 bytes are all covered or not, and a changed gap
// element (before the view, and in the tail past the last whole 16 bytes) against the snapshot.
TEST_F(CheckKernelsGpu, DenseOutputRegionsCountUnwrittenElementsAndChangedGaps) {
  for (DType t : {DType::kF64, DType::kF32, DType::kBF16, DType::kE4M3}) {
    const int64_t es = static_cast<int64_t>(dtype_size(t));
    const int64_t off = 3, rows = 5, cols = 1000, n = off + rows * cols + 6;  // odd: a tail past the last 16 bytes
    std::vector<unsigned char> snap(static_cast<size_t>(n * es), 0xA5);       // the gaps' canary
    for (int64_t e = off; e < off + rows * cols; ++e) write_output_poison(t, snap.data() + e * es);
    std::vector<unsigned char> arena = snap;
    for (int64_t e = off; e < off + rows * cols; ++e) arena[static_cast<size_t>(e * es)] ^= 0x01;  // written
    for (int64_t e : {off, int64_t{2000}, off + rows * cols - 1}) write_output_poison(t, arena.data() + e * es);
    for (int64_t e : {int64_t{1}, n - 1}) arena[static_cast<size_t>(e * es)] ^= 0x40;  // gap elements changed
    gpu::CheckParams p;
    p.arena = upload(arena), p.snapshot = upload(snap);
    gpu::DevRegion r;
    r.byte_begin = 0, r.byte_end = n * es, r.kind = gpu::DevRegion::kOutput;
    r.elem_size = static_cast<int32_t>(es), r.check_unwritten = 1;
    r.off = off, r.rows = rows, r.cols = cols, r.ld = cols;
    gpu::poison_words(t, r.poison);
    p.regions[0] = r;
    p.nregions = 1;
    gpu::CheckResult res = run(p);
    EXPECT_EQ(res.regions[0].unwritten, 3u) << dtype_name(t);
    EXPECT_EQ(gpu::first_index(res.regions[0].unwritten, res.regions[0].unwritten_first), off) << dtype_name(t);
    EXPECT_EQ(res.regions[0].changed, 2u) << dtype_name(t);
    EXPECT_EQ(gpu::first_index(res.regions[0].changed, res.regions[0].changed_first), 1) << dtype_name(t);
    p.regions[0].check_unwritten = 0;  // a partial output: covered elements are not checked
    res = run(p);
    EXPECT_EQ(res.regions[0].unwritten, 0u) << dtype_name(t);
    EXPECT_EQ(res.regions[0].changed, 2u) << dtype_name(t);
  }
}

// A large arena (past the span restore's threshold: inputs copied, guards, moats and dense
// outputs written from their patterns): after a kernel scribbled over every tensor, a guard
// band and a moat, restore() gives back the snapshot, as the check kernel sees it: inputs and
// guards unchanged, outputs all poison (every covered element unwritten), gaps unchanged.
TEST_F(CheckKernelsGpu, SpanRestoreGivesBackALargeArenasSnapshot) {
  auto lane = gpu::Lane::create(0);
  ASSERT_TRUE(lane.ok()) << lane.status().message();
  gpu::Lane& l = **lane;
  std::vector<gpu::ArenaTensor> at(4);
  at[0].desc = TensorDesc::contiguous(DType::kBF16, {2048, 2048});  // input
  at[1].desc = TensorDesc::contiguous(DType::kBF16, {2047, 1031});  // dense output, odd bytes: copied
  at[1].role = Role::kOut, at[1].check_unwritten = true;
  at[2].desc = TensorDesc::contiguous(DType::kF32, {2048, 1024});  // dense output: its poison written
  at[2].role = Role::kOut, at[2].check_unwritten = true;
  at[3].desc = TensorDesc::contiguous(DType::kF32, {1000, 1000});  // in-out: copied
  at[3].role = Role::kInOut;
  ASSERT_TRUE(l.layout(at, 0, 0).ok());
  for (int t = 0; t < 4; ++t) {
    const auto& d = at[static_cast<size_t>(t)].desc;
    if (at[static_cast<size_t>(t)].role == Role::kOut) {
      materialize_output(d, l.host_tensor(t));
    } else {
      ValueRecipe r;
      r.seed = static_cast<uint64_t>(t) + 1;
      materialize(d, r, 7, l.host_tensor(t));
    }
  }
  ASSERT_TRUE(l.upload().ok());
  for (int t = 0; t < 4; ++t)
    ASSERT_EQ(cudaMemsetAsync(l.dev_tensor(t), 0x3C, static_cast<size_t>(l.tensor_bytes(t)), l.stream()), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(l.dev_tensor(0) - 4096, 0x11, 4096, l.stream()), cudaSuccess);  // the first moat
  ASSERT_EQ(cudaMemsetAsync(l.dev_tensor(2) - 512, 0x11, 512, l.stream()), cudaSuccess);    // a guard band
  const gpu::CheckParams p = l.check_params();
  ASSERT_TRUE(l.check(p, 0).ok());
  ASSERT_TRUE(l.restore().ok());
  ASSERT_TRUE(l.check(p, 1).ok());
  ASSERT_TRUE(l.fetch_results(2).ok());
  int64_t scribbled = 0;
  for (int i = 0; i < p.nregions; ++i) scribbled += static_cast<int64_t>(l.result(0).regions[i].changed);
  EXPECT_GT(scribbled, 0) << "the scribbles are seen before the restore";
  for (int i = 0; i < p.nregions; ++i) {
    const gpu::DevRegion& r = p.regions[i];
    EXPECT_EQ(l.result(1).regions[i].changed, 0u)
        << "region " << i << " [" << r.byte_begin << ", " << r.byte_end << ")";
    if (r.kind == gpu::DevRegion::kOutput && r.check_unwritten)
      EXPECT_EQ(static_cast<int64_t>(l.result(1).regions[i].unwritten), r.rows * r.cols) << "region " << i;
  }
}

}  // namespace
}  // namespace assay

// assay false-alarm, host part (see false_alarm.h): configurations and their bound models,
// cases, their inputs (false_alarm_values.h) and batch layout, the fp64 reference, the
// element judge, the table and its reports, and the campaign loop. No CUDA headers: the
// vendor runs behind FaBackend.
#include "properties/studies/false_alarm.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <limits>
#include <mutex>
#include <numeric>
#include <optional>
#include <thread>

#include <unistd.h>

#include <fmt/format.h>

#include "harness/dtype_encode.h"
#include "harness/interrupt.h"
#include "harness/scratch.h"
#include "references/host/gemm.h"

namespace assay {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Where each model's numbers come from (shown in the report beside the table).
constexpr std::string_view kNoteRN =
    "fp32 FMA/adds rounded to nearest in any order and any split-K: gamma_{k+2}(2^-24) [H] (3.5)";
constexpr std::string_view kNoteBlock =
    "tensor-core block FMA [FHMP]: exact products, alignment and normalisation truncated to 24 bits (H100 "
    "keeps 25 per probes of Khattak & Mikaitis 2025); b = 4, the smallest block measured on any generation "
    "[FHMP] (a model block no larger than the hardware's bounds it); any split-K / stream-K, partials reduced in "
    "fp32 (cuBLAS: CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION; cuBLASLt: reduction scheme COMPUTE_TYPE)";
constexpr std::string_view kNoteFp8 =
    "Hopper fp8 block accumulation truncated to 13 bits: the pessimistic reading of DeepSeek-V3 (2024) sec. "
    "3.3.2 ('around 14 bits') and of an H100 wgmma probe reporting 13; b = 4; no promotion assumed for the "
    "ceiling (cuBLASLt does not document its interval); expected level: promotion every 128 products into fp32 "
    "(CUTLASS's fp8 accumulation, DeepSeek-V3); any split-K; non-power-of-two scales add one rounding each";
constexpr std::string_view kNoteFp8Fast =
    "Hopper fp8 'fast accumulation': block accumulation truncated to 13 bits, never promoted (pessimistic reading "
    "of DeepSeek-V3 (2024) sec. 3.3.2 and of an H100 wgmma probe); b = 4; any split-K; non-power-of-two scales "
    "add one rounding each";
constexpr std::string_view kNoteInt =
    "int32 accumulation of int8 products is exact (k * 128^2 < 2^31): compared bit for bit";

// The documented layout requirements (cuBLAS documentation, docs.nvidia.com/cuda/cublas;
// CUDA 13.0 / cuBLAS 13.1), in row-major terms: row-major C = A B is column-major
// C^T = B^T A^T, so the library's m is our n, its n our m, its A our B (with ldb) and its B
// our A (with lda); its "TN" (its A transposed, its B not) is our trans_a = false,
// trans_b = true: A m x k and B n x k, k contiguous in both.
constexpr std::string_view kLayoutAny =
    "any: no documented restriction for these types (cuBLAS docs 2.1.11 Tensor Core Usage: since cuBLAS 11.0 "
    "no dimension or alignment requirement for Tensor Cores, FP8 aside); odd m, n, k, lds and offsets, all "
    "transposes";
constexpr std::string_view kLayoutFp8 =
    "cuBLAS docs, cublasLtMatmul, 'To use FP8 kernels': A transposed and B not (TN) on Hopper, compute "
    "CUBLAS_COMPUTE_32F, scale type CUDA_R_32F, and the dimension and pointer requirements of 2.1.11 Tensor "
    "Core Usage: (op_A == N ? m : k) * size, (op_B == N ? k : n) * size, m * sizeof(C), lda * size, ldb * size, "
    "ldc * sizeof(C) multiples of 16 bytes, A, B, C 16-byte aligned (batch strides too); the FP8 type table: "
    "C = D = fp32, or C = D = bf16; per-tensor scales (fp32, in their own 256-byte slots). Library m = our n; "
    "library n = our m is unconstrained (odd m fuzzed)";
constexpr std::string_view kLayoutInt8 =
    "cuBLAS docs, cublasLtMatmul, 'To use IMMA kernels', regular data ordering: all matrix pointers 4-byte "
    "aligned, leading dimensions of A, B, C multiples of 4, m and k multiples of 4; TN (A transposed, B not), "
    "which the cuBLAS 11/12 docs list for that ordering and the lt_int8 layout that ran every case on an H200 "
    "had. cublasGemmEx int8 -> int32 gets the same rules (it declined 6536 of 6666 unrestricted cases, H200, "
    "cuBLAS 13.1). Library m = our n; library n = our m is unconstrained (odd m fuzzed)";

FaConfig rn_f32(std::string_view name) {
  FaConfig c;
  c.name = name;
  c.layout.source = kLayoutAny;
  c.model_note = kNoteRN;
  return c;
}

FaConfig block_cfg(std::string_view name, FaLibrary lib, DType in, DType out, bool batched) {
  FaConfig c;
  c.name = name;
  c.library = lib;
  c.a = c.b = in;
  c.out = out;
  c.batched = batched;
  c.layout.source = kLayoutAny;
  c.accumulation = Accumulation::kTruncatingBlock;
  c.block = 4;
  c.block_bits = 24;
  c.model_note = kNoteBlock;
  return c;
}

FaLayoutRule fp8_layout(DType out) {
  // 16 bytes in elements: fp8 inputs 16, the output 16 / sizeof(out).
  const int64_t o = 16 / static_cast<int64_t>(dtype_size(out));
  FaLayoutRule l;
  l.tn = true;
  l.m = 1;   // the library's n
  l.n = o;   // the library's m: m * sizeof(C) % 16
  l.k = 16;  // (op_A == T) k * 1 and (op_B == N) k * 1 % 16
  l.ld_a = l.ld_b = 16;
  l.ld_c = o;
  l.ptr_a = l.ptr_b = 16;
  l.ptr_c = o;
  l.source = kLayoutFp8;
  return l;
}

FaLayoutRule int8_layout() {
  FaLayoutRule l;
  l.tn = true;
  l.m = 1;  // the library's n
  l.n = 4;  // the library's m
  l.k = 4;
  l.ld_a = l.ld_b = l.ld_c = 4;
  l.ptr_a = l.ptr_b = 4;  // int8: 4 bytes
  l.ptr_c = 1;            // int32: every element is 4-byte aligned
  l.source = kLayoutInt8;
  return l;
}

FaConfig fp8_cfg(std::string_view name, DType a, DType out, bool fast) {
  FaConfig c;
  c.name = name;
  c.library = FaLibrary::kCublasLt;
  c.a = a;
  c.b = DType::kE4M3;  // cuBLASLt on Hopper has no e5m2 x e5m2 kernels
  c.out = out;
  c.fast_accum = fast;
  c.scaled = true;
  c.batched = true;
  c.layout = fp8_layout(out);
  c.accumulation = Accumulation::kTruncatingBlock;
  c.block = 4;
  c.block_bits = 13;
  c.expected_promote_every = fast ? 0 : 128;
  c.model_note = fast ? kNoteFp8Fast : kNoteFp8;
  return c;
}

FaConfig int8_cfg(std::string_view name, FaLibrary lib) {
  FaConfig c;
  c.name = name;
  c.library = lib;
  c.a = c.b = DType::kI8;
  c.out = DType::kI32;
  c.acc = DType::kI32;
  c.batched = lib == FaLibrary::kCublasLt;  // cublasGemmEx: one GEMM
  c.layout = int8_layout();                 // IMMA, regular column order (both libraries)
  c.model_note = kNoteInt;
  return c;
}

const std::vector<FaConfig>& config_table() {
  static const std::vector<FaConfig> t = [] {
    std::vector<FaConfig> v;
    v.push_back(rn_f32("fp32_pedantic"));
    v.push_back(block_cfg("tf32", FaLibrary::kCublas, DType::kTF32, DType::kF32, false));
    v.push_back(block_cfg("fp16", FaLibrary::kCublas, DType::kF16, DType::kF32, false));
    v.push_back(block_cfg("fp16_out_fp16", FaLibrary::kCublas, DType::kF16, DType::kF16, false));
    v.push_back(block_cfg("bf16", FaLibrary::kCublas, DType::kBF16, DType::kF32, false));
    v.push_back(block_cfg("bf16_out_bf16", FaLibrary::kCublas, DType::kBF16, DType::kBF16, false));
    v.push_back(block_cfg("lt_fp16_out_fp16", FaLibrary::kCublasLt, DType::kF16, DType::kF16, true));
    v.push_back(block_cfg("lt_bf16", FaLibrary::kCublasLt, DType::kBF16, DType::kF32, true));
    v.push_back(fp8_cfg("e4m3", DType::kE4M3, DType::kF32, false));
    v.push_back(fp8_cfg("e4m3_fast", DType::kE4M3, DType::kF32, true));
    v.push_back(fp8_cfg("e4m3_out_bf16", DType::kE4M3, DType::kBF16, false));
    v.push_back(fp8_cfg("e4m3_out_bf16_fast", DType::kE4M3, DType::kBF16, true));
    v.push_back(fp8_cfg("e5m2xe4m3", DType::kE5M2, DType::kF32, false));
    v.push_back(fp8_cfg("e5m2xe4m3_fast", DType::kE5M2, DType::kF32, true));
    v.push_back(fp8_cfg("e5m2xe4m3_out_bf16", DType::kE5M2, DType::kBF16, false));
    v.push_back(fp8_cfg("e5m2xe4m3_out_bf16_fast", DType::kE5M2, DType::kBF16, true));
    v.push_back(int8_cfg("int8", FaLibrary::kCublas));
    v.push_back(int8_cfg("lt_int8", FaLibrary::kCublasLt));
    return v;
  }();
  return t;
}

struct Rng {
  uint64_t s;
  uint64_t next() { return fa_mix64(s += 0x632be59bd9b4e019ull); }
  uint64_t below(uint64_t n) { return n == 0 ? 0 : next() % n; }
  double unit() { return static_cast<double>(next() >> 11) * 0x1p-53; }
  bool chance(double p) { return unit() < p; }
  template <typename T, size_t N>
  T pick(const T (&a)[N]) {
    return a[below(N)];
  }
};

int64_t round_up(int64_t v, int64_t g) {
  return (v + g - 1) / g * g;
}

/// Largest integer magnitude r with every integer in [-r, r] exact in `t`.
int64_t int_limit(DType t) {
  if (!dtype_is_float(t)) return static_cast<int64_t>(max_finite(t));
  return int64_t{1} << std::min(precision_bits(t), 30);
}

std::string fmt_num(double v) {
  return fmt::format("{:.6g}", v);
}

// ---- a pool of host threads ------------------------------------------------------------

/// Runs fn(i, worker) for i in [0, n) on persistent threads; start() returns at once so the
/// caller can drive the GPU meanwhile, wait() joins the job.
class Pool {
 public:
  explicit Pool(int n) {
    for (int w = 0; w < n; ++w) threads_.emplace_back([this, w] { loop(w); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  int size() const { return static_cast<int>(threads_.size()); }
  void start(int64_t n, std::function<void(int64_t, int)> fn) {
    std::lock_guard<std::mutex> l(mu_);
    fn_ = std::move(fn);
    n_ = n;
    next_.store(0);
    active_ = static_cast<int>(threads_.size());
    ++gen_;
    cv_.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> l(mu_);
    done_.wait(l, [this] { return active_ == 0; });
  }

 private:
  void loop(int w) {
    uint64_t seen = 0;
    for (;;) {
      std::function<void(int64_t, int)> fn;
      int64_t n = 0;
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [&] { return stop_ || gen_ != seen; });
        if (stop_) return;
        seen = gen_;
        fn = fn_;
        n = n_;
      }
      for (int64_t i = next_.fetch_add(1); i < n; i = next_.fetch_add(1)) fn(i, w);
      std::lock_guard<std::mutex> l(mu_);
      if (--active_ == 0) done_.notify_all();
    }
  }
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_, done_;
  std::function<void(int64_t, int)> fn_;
  int64_t n_ = 0;
  std::atomic<int64_t> next_{0};
  int active_ = 0;
  uint64_t gen_ = 0;
  bool stop_ = false;
};

}  // namespace

// ---- configurations and classes ------------------------------------------------------------

std::span<const FaConfig> fa_configs() {
  return config_table();
}

int find_fa_config(std::string_view name) {
  const auto& t = config_table();
  for (size_t i = 0; i < t.size(); ++i)
    if (t[i].name == name) return static_cast<int>(i);
  return -1;
}

std::string fa_layout_text(const FaConfig& cfg) {
  const FaLayoutRule& L = cfg.layout;
  std::vector<std::string> parts;
  parts.push_back(L.tn ? "TN (A m x k, B n x k, row-major)" : "any transposes");
  const auto mult = [&](std::string_view what, int64_t g) {
    if (g > 1) parts.push_back(fmt::format("{} % {}", what, g));
  };
  mult("m", L.m);
  mult("n", L.n);
  mult("k", L.k);
  mult("lda", L.ld_a);
  mult("ldb", L.ld_b);
  mult("ldc", L.ld_c);
  const auto align = [&](std::string_view what, int64_t g, DType t) {
    if (g > 1) parts.push_back(fmt::format("{} {}-byte aligned", what, g * static_cast<int64_t>(dtype_size(t))));
  };
  align("A", L.ptr_a, cfg.a);
  align("B", L.ptr_b, cfg.b);
  align("C", L.ptr_c, cfg.out);
  if (parts.size() == 1) parts.push_back("odd extents, leading dimensions and offsets");
  if (cfg.batched) parts.push_back("strided batches");
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : "; ") + p;
  return out;
}

std::string_view fa_class_name(FaClass c) {
  switch (c) {
    case FaClass::kNormal:
      return "normal";
    case FaClass::kUniform:
      return "uniform";
    case FaClass::kSameSign:
      return "same_sign";
    case FaClass::kLogUniform:
      return "log_uniform";
    case FaClass::kSubnormal:
      return "subnormal";
    case FaClass::kNearOverflow:
      return "near_overflow";
    case FaClass::kSmallInt:
      return "small_int";
    case FaClass::kNanInf:
      return "nan_inf";
  }
  return "?";
}

StatusOr<std::vector<int>> fa_select(const FaOptions& o) {
  std::vector<int> sel;
  if (o.configs.empty()) {
    sel.resize(fa_configs().size());
    std::iota(sel.begin(), sel.end(), 0);
    return sel;
  }
  for (const std::string& name : o.configs) {
    const int i = find_fa_config(name);
    if (i < 0) {
      std::string known;
      for (const FaConfig& c : fa_configs()) known += fmt::format("{}{}", known.empty() ? "" : ", ", c.name);
      return invalid_argument(fmt::format("unknown config '{}' (known: {})", name, known));
    }
    if (std::find(sel.begin(), sel.end(), i) == sel.end()) sel.push_back(i);
  }
  return sel;
}

uint64_t fa_rotating_seed() {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const uint64_t ns = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(now).count());
  const uint64_t s = fa_mix64(ns ^ (static_cast<uint64_t>(::getpid()) << 40)) & ((uint64_t{1} << 53) - 1);
  return s == 0 ? 1 : s;
}

StatusOr<std::vector<int>> fa_parse_devices(std::string_view spec, int present) {
  std::vector<int> out;
  const auto number = [](std::string_view t, int& v) {
    const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    return !t.empty() && ec == std::errc() && end == t.data() + t.size() && v >= 0;
  };
  if (spec == "all") {
    for (int d = 0; d < present; ++d) out.push_back(d);
  } else if (spec.find(',') == std::string_view::npos) {
    int n = 0;
    if (!number(spec, n) || n < 1)
      return invalid_argument(fmt::format("--devices '{}': expected all, a count or a list like 0,2", spec));
    if (n > present) return invalid_argument(fmt::format("--devices {}: {} CUDA device(s) present", n, present));
    for (int d = 0; d < n; ++d) out.push_back(d);
  } else {
    size_t pos = 0;
    while (pos <= spec.size()) {
      const size_t end = std::min(spec.find(',', pos), spec.size());
      int d = 0;
      if (!number(spec.substr(pos, end - pos), d))
        return invalid_argument(fmt::format("--devices '{}': expected all, a count or a list like 0,2", spec));
      if (d >= present) return invalid_argument(fmt::format("--devices: device {} of {} present", d, present));
      if (std::find(out.begin(), out.end(), d) != out.end())
        return invalid_argument(fmt::format("--devices: device {} named twice", d));
      out.push_back(d);
      pos = end + 1;
    }
  }
  if (out.empty()) return invalid_argument("--devices: no CUDA device present");
  return out;
}

// ---- cases -------------------------------------------------------------------------------

TensorDesc fa_desc_a(const FaCase& c) {
  const int64_t rows = c.trans_a ? c.k : c.m, cols = c.trans_a ? c.m : c.k;
  return TensorDesc{c.cfg().a, {c.batch, rows, cols}, {c.stride_a, c.lda, 1}, c.off_a};
}

TensorDesc fa_desc_b(const FaCase& c) {
  const int64_t rows = c.trans_b ? c.n : c.k, cols = c.trans_b ? c.k : c.n;
  return TensorDesc{c.cfg().b, {c.batch, rows, cols}, {c.stride_b, c.ldb, 1}, c.off_b};
}

TensorDesc fa_desc_c(const FaCase& c) {
  return TensorDesc{c.cfg().out, {c.batch, c.m, c.n}, {c.stride_c, c.ldc, 1}, c.off_c};
}

namespace {

/// The recipe of one input of class `cls` in dtype `t`.
ValueRecipe class_recipe(FaClass cls, DType t, uint64_t seed, Rng& r) {
  ValueRecipe v;
  v.seed = seed;
  const bool integer = !dtype_is_float(t);
  switch (cls) {
    case FaClass::kNormal:
    case FaClass::kNanInf:
      v.cls = ValueClass::kNormal;
      v.scale = integer ? 40 : 1;
      break;
    case FaClass::kUniform:
      v.cls = ValueClass::kUniform;
      v.scale = integer ? 127 : 1;
      break;
    case FaClass::kSameSign:
      v.cls = ValueClass::kSameSign;
      v.scale = integer ? 127 : 1;
      break;
    case FaClass::kLogUniform:
      v.cls = ValueClass::kLogUniform;
      // Within the dtype's normal range, so that products stay normal in fp32 where they can.
      switch (t) {
        case DType::kF16:
          v.exp_min = -14, v.exp_max = 15;
          break;
        case DType::kE4M3:
          v.exp_min = -6, v.exp_max = 8;
          break;
        case DType::kE5M2:
          v.exp_min = -14, v.exp_max = 15;
          break;
        case DType::kI8:
          v.exp_min = 0, v.exp_max = 7;
          break;
        default:
          v.exp_min = -40, v.exp_max = 40;
          break;
      }
      break;
    case FaClass::kSubnormal:
      v.cls = ValueClass::kSubnormal;
      break;
    case FaClass::kNearOverflow:
      v.cls = ValueClass::kNearOverflow;
      v.overflow_factor = 4;
      break;
    case FaClass::kSmallInt:
      v.cls = ValueClass::kSmallInt;
      v.int_range = 1;  // set by the caller
      break;
  }
  if (cls == FaClass::kNanInf) {
    const double rates[] = {0.002, 0.02, 0.1};
    v.inject.kinds = kSpecialAll;
    v.inject.rate = r.pick(rates);
    v.inject.at = r.chance(0.3) ? static_cast<uint8_t>(kAtFirst | kAtLast) : uint8_t{0};
  }
  return v;
}

}  // namespace

FaCase fa_make_case(const FaOptions& o, const std::vector<int>& configs, int64_t index) {
  FaCase c;
  c.index = index;
  c.config = configs[static_cast<size_t>(index % static_cast<int64_t>(configs.size()))];
  const FaConfig& cfg = c.cfg();
  Rng r{fa_mix64(o.seed * 0x9e3779b97f4a7c15ull ^ fa_mix64(static_cast<uint64_t>(index)))};
  const uint64_t value_seed = r.next();
  c.cls = static_cast<FaClass>(r.below(kFaClasses));
  const bool integer = !dtype_is_float(cfg.acc);
  const FaLayoutRule& L = cfg.layout;
  const int64_t max_mn = std::max<int64_t>(o.max_mn, 1), max_k = std::max<int64_t>(o.max_k, 1);

  // Shapes within the config's layout rule (FaLayoutRule): multiples where the library
  // documents one, odd ones everywhere else; small ones often. (For a rule of all 1s the
  // draws are those of every earlier version of this generator.)
  const auto dim = [&](int64_t maxv, int64_t g) {
    const int64_t units = std::max<int64_t>(maxv / g, 1);
    const int64_t v = r.chance(0.2)
                          ? 1 + static_cast<int64_t>(r.below(static_cast<uint64_t>(std::min<int64_t>(units, 4))))
                          : 1 + static_cast<int64_t>(r.below(static_cast<uint64_t>(units)));
    return v * g;
  };
  c.m = dim(max_mn, L.m);
  c.n = dim(max_mn, L.n);
  int64_t k;
  if (r.chance(c.cls == FaClass::kSameSign ? 0.25 : 0.1)) {
    k = max_k;  // the long same-sign reductions where truncating accumulation shows
  } else if (r.chance(0.2)) {
    k = 1 + static_cast<int64_t>(r.below(static_cast<uint64_t>(std::min<int64_t>(32, max_k))));
  } else {
    k = std::clamp<int64_t>(static_cast<int64_t>(std::exp2(r.unit() * std::log2(static_cast<double>(max_k) + 1))), 1,
                            max_k);
  }
  k = round_up(k, L.k);
  if (k > max_k) k = std::max<int64_t>(L.k, max_k / L.k * L.k);
  c.k = k;

  if (L.tn) {
    c.trans_a = false;
    c.trans_b = true;
  } else {
    c.trans_a = r.chance(0.5);
    c.trans_b = r.chance(0.5);
  }
  // Leading dimensions: the row, rounded up to the rule's multiple, plus padding in multiples.
  const auto ld = [&](int64_t cols, int64_t g) {
    return round_up(cols, g) + (r.chance(0.5) ? 0 : g * (1 + static_cast<int64_t>(r.below(g == 1 ? 16 : 2))));
  };
  const auto offset = [&](int64_t g) {
    return r.chance(0.5) ? int64_t{0} : g * (1 + static_cast<int64_t>(r.below(g == 1 ? 31 : 3)));
  };
  const int64_t a_rows = c.trans_a ? c.k : c.m, a_cols = c.trans_a ? c.m : c.k;
  const int64_t b_rows = c.trans_b ? c.n : c.k, b_cols = c.trans_b ? c.k : c.n;
  c.lda = ld(a_cols, L.ld_a);
  c.ldb = ld(b_cols, L.ld_b);
  c.ldc = ld(c.n, L.ld_c);
  c.off_a = offset(L.ptr_a);
  c.off_b = offset(L.ptr_b);
  c.off_c = offset(L.ptr_c);
  c.batch = cfg.batched && r.chance(0.3) ? 2 + static_cast<int64_t>(r.below(3)) : 1;
  // Batch strides keep every entry as aligned as the first (rows * ld is a multiple of ld's
  // multiple, itself a multiple of the pointer's: see fa_layout_text's check in the tests).
  const auto stride = [&](int64_t rows, int64_t ldv, int64_t g) {
    return rows * ldv + (c.batch > 1 && r.chance(0.5) ? g * (1 + static_cast<int64_t>(r.below(g == 1 ? 40 : 3))) : 0);
  };
  c.stride_a = stride(a_rows, c.lda, L.ptr_a);
  c.stride_b = stride(b_rows, c.ldb, L.ptr_b);
  c.stride_c = stride(c.m, c.ldc, L.ptr_c);

  // alpha, beta: exact in the scale type (fp32, or int32 for int8).
  if (integer) {
    const double alphas[] = {1, 1, 1, -1, 2, 3}, betas[] = {0, 0, 0, 1, -2};
    c.alpha = r.pick(alphas);
    c.beta = r.pick(betas);
  } else if (c.cls == FaClass::kSmallInt) {
    const double alphas[] = {1, 1, 2, -1}, betas[] = {0, 0, 1};
    c.alpha = r.pick(alphas);
    c.beta = r.pick(betas);
  } else {
    const double alphas[] = {1, 1, 1, -1, 0.5, -1.5, 2, static_cast<double>(0.3f)};
    const double betas[] = {0, 0, 0, 0, 1, -0.5, 0.75};
    c.alpha = r.pick(alphas);
    c.beta = r.pick(betas);
  }
  if (cfg.scaled) {
    const auto scale = [&] {
      switch (r.below(4)) {
        case 0:
          return 1.0;
        case 1:
          return std::ldexp(1.0, static_cast<int>(r.below(13)) - 6);
        default: {
          // Not a power of two (one more rounding in the model); pow2 only for the exact tier.
          const double s = static_cast<double>(static_cast<float>(std::exp2(r.unit() * 8 - 4)));
          if (c.cls != FaClass::kSmallInt) return s;
          return std::ldexp(1.0, static_cast<int>(r.below(9)) - 4);
        }
      }
    };
    c.scale_a = scale();
    c.scale_b = scale();
    if (c.cls == FaClass::kSmallInt && c.beta != 0) c.scale_a = c.scale_b = 1;  // C is not scaled
  }

  c.ra = class_recipe(c.cls, cfg.a, value_seed, r);
  c.rb = class_recipe(c.cls, cfg.b, value_seed, r);
  c.rb.inject = c.ra.inject;
  // C, read when beta != 0: integers for the exact paths, else N(0,1) (with A's injection).
  c.rc = class_recipe(FaClass::kNormal, cfg.out, value_seed, r);
  if (integer) {
    c.rc.cls = ValueClass::kSmallInt;
    c.rc.int_range = 100;
  } else if (c.cls == FaClass::kSmallInt) {
    c.rc.cls = ValueClass::kSmallInt;
    c.rc.int_range = 4;
  } else if (c.cls == FaClass::kNanInf) {
    c.rc.inject = c.ra.inject;
  }

  if (c.cls == FaClass::kSmallInt) {
    int64_t range;
    if (integer) {
      const int64_t ranges[] = {1, 3, 15, 100, 127, 128};
      range = r.pick(ranges);
    } else {
      const int64_t lim = std::min(int_limit(cfg.a), int_limit(cfg.b));
      if (r.chance(0.5)) {
        // The largest range the exact tier still holds for (0 when even 1 does not).
        int64_t lo = 0, hi = lim;
        while (lo < hi) {
          const int64_t mid = lo + (hi - lo + 1) / 2;
          c.ra.int_range = c.rb.int_range = mid;
          if (fa_exact(c)) {
            lo = mid;
          } else {
            hi = mid - 1;
          }
        }
        range = std::max<int64_t>(lo, 1);
      } else {
        range = 1 + static_cast<int64_t>(r.below(static_cast<uint64_t>(lim)));
      }
    }
    c.ra.int_range = c.rb.int_range = range;
  }
  return c;
}

// ---- bound models --------------------------------------------------------------------------

GemmBoundModel fa_ceiling_model(const FaCase& c) {
  const FaConfig& cfg = c.cfg();
  GemmBoundModel m;
  // Products are exact in the block when 2p(in) <= block bits: the wider input decides.
  m.in = precision_bits(cfg.a) >= precision_bits(cfg.b) ? cfg.a : cfg.b;
  m.acc = cfg.acc;
  m.out = cfg.out;
  m.k = c.k;
  m.alpha_abs = std::fabs(c.alpha);
  m.has_beta = c.beta != 0;
  m.accumulation = cfg.accumulation;
  m.block = cfg.block;
  m.block_bits = cfg.block_bits;
  m.any_split = cfg.accumulation == Accumulation::kTruncatingBlock;
  m.scale_a = std::fabs(c.scale_a);
  m.scale_b = std::fabs(c.scale_b);
  // cuBLAS and cuBLASLt with a narrow output add beta*C to alpha*A*B already converted to the
  // output type (bf16_out_bf16: up to 43x the plain ceiling at k = 2, beta = 1): a legitimate
  // order, bounded by the product_to_out model (harness/bounds.h).
  m.product_to_out = true;
  return m;
}

GemmBoundModel fa_expected_model(const FaCase& c) {
  GemmBoundModel m = fa_ceiling_model(c);
  m.any_split = false;
  m.promote_every = c.cfg().expected_promote_every;
  return m;
}

BoundPair fa_bounds(const FaCase& c) {
  BoundPair p = gemm_bounds(fa_ceiling_model(c));
  const BoundPair e = gemm_bounds(fa_expected_model(c));
  p.expected.rel_out = std::min(e.expected.rel_out, p.ceiling.rel_out);
  p.expected.rel_mag = std::min(e.expected.rel_mag, p.ceiling.rel_mag);
  p.expected.floor = std::min(e.expected.floor, p.ceiling.floor);
  return p;
}

bool fa_exact(const FaCase& c) {
  const FaConfig& cfg = c.cfg();
  if (!dtype_is_float(cfg.acc)) return true;  // int8 -> int32
  if (c.cls != FaClass::kSmallInt) return false;
  GemmBoundModel m = fa_ceiling_model(c);
  const int64_t range = std::max(c.ra.int_range, c.rb.int_range);
  const double c_abs = c.beta != 0 ? static_cast<double>(c.rc.int_range) : 0.0;
  for (DType in : {cfg.a, cfg.b}) {
    m.in = in;  // every integer of the range exact in both inputs
    if (!gemm_exact_tier_holds(m, range, std::fabs(c.beta), c_abs)) return false;
  }
  // C itself must hold its integers exactly.
  return c.beta == 0 || static_cast<double>(c.rc.int_range) <= static_cast<double>(int_limit(cfg.out));
}

double fa_overflow_limit(const FaCase& c) {
  const FaConfig& cfg = c.cfg();
  if (!dtype_is_float(cfg.acc)) return kInf;
  // The raw accumulator (before alpha and the scales) overflows past max_finite(acc).
  const double through = std::fabs(c.alpha) * std::fabs(c.scale_a) * std::fabs(c.scale_b);
  const double acc_limit = max_finite(cfg.acc) * std::min(1.0, through);
  // An intermediate held in the output type (measured on cuBLASLt's fp16-output path, see
  // the header) overflows where mag (|alpha|, scales and |beta||C| included) passes the
  // output's range: the device check's default limit (check_compare: out_max).
  return std::min(acc_limit, max_finite(cfg.out));
}

// ---- the element judge -----------------------------------------------------------------------

FaJudgement fa_judge(double o, double r, double mag, const BoundPair& b, bool exact, double out_max,
                     double overflow_limit) {
  FaJudgement j;
  const double tol = b.ceiling.tol(std::fabs(r), mag);
  j.ceiling = tol;
  // Partial sums are bounded by mag; where it can pass the accumulator's range or the
  // output's (an intermediate held in the output type), or is itself NaN/Inf, a correct
  // kernel may overflow in the middle of its reduction in some order: Inf of either sign, or
  // Inf - Inf = NaN, also where the exact result is an Inf of one sign (then NaN only).
  const double limit = std::min(overflow_limit, out_max);
  const bool may_overflow = !(mag * (1.0 + b.ceiling.rel_mag) + b.ceiling.floor < limit);
  if (std::isnan(r)) {
    j.naninf = !std::isnan(o);
    return j;
  }
  if (std::isinf(r)) {
    j.naninf = !((std::isinf(o) && std::signbit(o) == std::signbit(r)) || (std::isnan(o) && may_overflow));
    return j;
  }
  if ((std::isnan(o) || std::isinf(o)) && may_overflow) return j;
  if (std::isnan(o)) {
    j.naninf = true;
    return j;
  }
  if (std::isinf(o)) {
    // Overflow of the final rounding: only where the exact result may round past the
    // largest finite output, and with the reference's sign.
    j.naninf = !(std::fabs(r) + tol > out_max && std::signbit(o) == std::signbit(r));
    return j;
  }
  j.compared = true;
  j.err = std::fabs(o - r);
  j.ratio = accuracy_ratio(j.err, std::fabs(r), mag, b.ceiling);
  j.ratio_expected = accuracy_ratio(j.err, std::fabs(r), mag, b.expected);
  j.above_expected = j.err > b.expected.tol(std::fabs(r), mag);
  if (exact) {
    j.not_exact = o != r;  // the exact tier replaces the bound (+0 == -0)
  } else {
    j.above_ceiling = j.err > tol;
  }
  return j;
}

// ---- the table ---------------------------------------------------------------------------------

void FaRow::merge(const FaRow& o) {
  cases += o.cases;
  not_run += o.not_run;
  exact_cases += o.exact_cases;
  elements += o.elements;
  compared += o.compared;
  ceiling_failures += o.ceiling_failures;
  naninf_failures += o.naninf_failures;
  exact_failures += o.exact_failures;
  gap_writes += o.gap_writes;
  expected_exceedances += o.expected_exceedances;
  // Ties go to the lowest case index, so the merged table does not depend on thread timing.
  if (o.max_ratio > max_ratio) {
    max_ratio = o.max_ratio;
    worst_case = o.worst_case;
  } else if (o.max_ratio == max_ratio && o.worst_case >= 0 && (worst_case < 0 || o.worst_case < worst_case)) {
    worst_case = o.worst_case;
  }
  max_ratio_expected = std::max(max_ratio_expected, o.max_ratio_expected);
}

FaRow FaTable::config_total(int config) const {
  FaRow t;
  for (int c = 0; c < kFaClasses; ++c) t.merge(at(config, static_cast<FaClass>(c)));
  return t;
}

FaRow FaTable::total() const {
  FaRow t;
  for (const FaRow& r : rows) t.merge(r);
  return t;
}

void FaTable::merge(const FaTable& o) {
  for (size_t i = 0; i < rows.size(); ++i) rows[i].merge(o.rows[i]);
}

void FaPhaseSeconds::add(const FaPhaseSeconds& o) {
  seconds_inputs += o.seconds_inputs;
  seconds_inputs_device += o.seconds_inputs_device;
  seconds_reference += o.seconds_reference;
  seconds_reference_device += o.seconds_reference_device;
  seconds_vendor += o.seconds_vendor;
  seconds_judge += o.seconds_judge;
  seconds_wait += o.seconds_wait;
  seconds_launch += o.seconds_launch;
}

nlohmann::json FaPhaseSeconds::json() const {
  return {{"inputs", seconds_inputs},       {"inputs_device", seconds_inputs_device},
          {"reference", seconds_reference}, {"reference_device", seconds_reference_device},
          {"vendor", seconds_vendor},       {"launch", seconds_launch},
          {"judge", seconds_judge},         {"wait", seconds_wait}};
}

void FaReport::merge(const FaReport& o) {
  table.merge(o.table);
  failures.insert(failures.end(), o.failures.begin(), o.failures.end());
  std::stable_sort(failures.begin(), failures.end(),
                   [](const FaFailure& a, const FaFailure& b) { return a.c.index < b.c.index; });
  if (failures.size() > 1000) failures.resize(1000);
  not_run_reason.resize(std::max(not_run_reason.size(), o.not_run_reason.size()));
  not_run_case.resize(not_run_reason.size(), -1);
  for (size_t i = 0; i < o.not_run_reason.size(); ++i) {
    const int64_t theirs = i < o.not_run_case.size() ? o.not_run_case[i] : -1;
    if (theirs >= 0 && (not_run_case[i] < 0 || theirs < not_run_case[i])) {
      not_run_case[i] = theirs;
      not_run_reason[i] = o.not_run_reason[i];
    }
  }
  if (configs.empty()) configs = o.configs;
  cases += o.cases;
  planted += o.planted;
  seconds = std::max(seconds, o.seconds);
  add(o);
  shards.insert(shards.end(), o.shards.begin(), o.shards.end());
  // Several shards on one GPU describe it once.
  if (device.empty())
    device = o.device;
  else if (("; " + device + "; ").find("; " + o.device + "; ") == std::string::npos)
    device += "; " + o.device;
  ref_check.cases += o.ref_check.cases;
  ref_check.elements += o.ref_check.elements;
  ref_check.identical += o.ref_check.identical;
  ref_check.max_diff = std::max(ref_check.max_diff, o.ref_check.max_diff);
}

// ---- reports -----------------------------------------------------------------------------------

namespace {

std::string model_text(const FaConfig& cfg) {
  if (!dtype_is_float(cfg.acc)) return "exact (int32 accumulation)";
  if (cfg.accumulation == Accumulation::kRoundNearest) return "round to nearest in fp32, any order";
  return fmt::format("truncating blocks b={}, {} bits, any split", cfg.block, cfg.block_bits);
}

std::string expected_text(const FaConfig& cfg) {
  if (!dtype_is_float(cfg.acc)) return "= ceiling";
  if (cfg.accumulation == Accumulation::kRoundNearest) return "gamma~ (lambda 3) [HM]";
  if (cfg.expected_promote_every > 0)
    return fmt::format("mean truncation + lambda 3, promoted every {}", cfg.expected_promote_every);
  return "mean truncation + lambda 3, no split";
}

std::string types_text(const FaConfig& cfg) {
  return fmt::format("{} x {} -> {}{}", dtype_name(cfg.a), dtype_name(cfg.b), dtype_name(cfg.out),
                     cfg.fast_accum ? ", fast accumulation" : "");
}

std::string replay(const FaCase& c, const FaOptions& o) {
  return fmt::format("assay false-alarm --seed {} --first-case {} --cases 1 --max-k {} --max-mn {} --configs {}",
                     o.seed, c.index, o.max_k, o.max_mn, c.cfg().name);
}

std::string shape_text(const FaCase& c) {
  return fmt::format(
      "m={} n={} k={} batch={} trans_a={} trans_b={} lda={} ldb={} ldc={} off_a={} off_b={} off_c={} "
      "stride_a={} stride_b={} stride_c={} alpha={} beta={} scale_a={} scale_b={}",
      c.m, c.n, c.k, c.batch, c.trans_a ? 1 : 0, c.trans_b ? 1 : 0, c.lda, c.ldb, c.ldc, c.off_a, c.off_b, c.off_c,
      c.stride_a, c.stride_b, c.stride_c, fmt_num(c.alpha), fmt_num(c.beta), fmt_num(c.scale_a), fmt_num(c.scale_b));
}

nlohmann::json row_json(const FaRow& r) {
  return {{"cases", r.cases},
          {"not_run", r.not_run},
          {"exact_cases", r.exact_cases},
          {"elements", r.elements},
          {"compared", r.compared},
          {"ceiling_failures", r.ceiling_failures},
          {"naninf_failures", r.naninf_failures},
          {"exact_failures", r.exact_failures},
          {"gap_writes", r.gap_writes},
          {"expected_exceedances", r.expected_exceedances},
          {"max_ratio", r.max_ratio},
          {"max_ratio_expected", r.max_ratio_expected},
          {"worst_case", r.worst_case}};
}

}  // namespace

std::string fa_failure_line(const FaFailure& f, const FaOptions& o) {
  const FaCase& c = f.c;
  std::string where = f.kind == "gap" ? fmt::format("element=(linear {})", f.i)
                                      : fmt::format("element=(b={},i={},j={})", f.batch, f.i, f.j);
  std::string values =
      f.kind == "gap"
          ? fmt::format("value={}", fmt_num(f.value))
          : fmt::format("value={} ref={} mag={} bound={} ratio={}", fmt_num(f.value), fmt_num(f.ref), fmt_num(f.mag),
                        fmt_num(f.bound), fmt_num(f.bound > 0 ? std::fabs(f.value - f.ref) / f.bound : kInf));
  return fmt::format("{} config={} class={} case={} seed={} {} {} {} replay: {}", f.kind, c.cfg().name,
                     fa_class_name(c.cls), c.index, o.seed, shape_text(c), where, values, replay(c, o));
}

std::string fa_markdown(const FaReport& r, const FaOptions& o) {
  const FaRow tot = r.table.total();
  const bool device_ref = !r.shards.empty() && r.shards.front().device_reference;
  std::string md = fmt::format(
      "# Vendor GEMMs against their hard ceilings (assay false-alarm)\n\n"
      "Device: {}. Seed {}{}, cases [{}, {}): {} run, {} not run (the library declined); m, n <= {}, k <= {}. "
      "{:.1f} s ({:.0f} cases/s{}; inputs {:.1f} s host + {:.1f} s device, references {:.1f} s host{}, vendor {:.1f} s{}, "
      "judge {:.1f} s, "
      "waiting for the device {:.1f} s{}).\n\n",
      r.device, o.seed, o.seed_rotated ? " (rotating: drawn from the clock; replay lines carry it)" : "", o.first_case,
      o.first_case + o.cases, tot.cases, tot.not_run, o.max_mn, o.max_k, r.seconds,
      r.seconds > 0 ? static_cast<double>(tot.cases) / r.seconds : 0.0,
      r.shards.size() > 1 ? fmt::format(" over {} shards", r.shards.size()) : "", r.seconds_inputs,
      r.seconds_inputs_device, r.seconds_reference, device_ref ? fmt::format(" + {:.1f} s device", r.seconds_reference_device) : "",
      r.seconds_vendor, device_ref ? fmt::format(" device (launching {:.1f} s host)", r.seconds_launch) : "",
      r.seconds_judge, r.seconds_wait, r.shards.size() > 1 ? "; each summed over the shards" : "");
  if (!r.stopped.empty()) md += fmt::format("**Not every case ran:** {}.\n\n", r.stopped);
  if (r.shards.size() > 1) {
    md += "| shard | device | cases | s | cases/s | inputs host | inputs device | ref host | ref device | launch | "
          "vendor | judge | wait |\n"
          "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
    for (size_t i = 0; i < r.shards.size(); ++i) {
      const FaShard& h = r.shards[i];
      md += fmt::format(
          "| {} | {} | {} | {:.1f} | {:.0f} | {:.1f} | {:.1f} | {:.1f} | {:.1f} | {:.1f} | {:.1f} | {:.1f} | {:.1f} |\n",
          i, h.device, h.cases, h.seconds, h.seconds > 0 ? static_cast<double>(h.cases) / h.seconds : 0.0,
          h.seconds_inputs, h.seconds_inputs_device, h.seconds_reference, h.seconds_reference_device, h.seconds_launch, h.seconds_vendor,
          h.seconds_judge, h.seconds_wait);
    }
    md += "\n";
  }
  if (device_ref)
    md += fmt::format(
        "Reference: fp64 on the device (references/device/gemm_f64_batch.h, the host reference's order of "
        "operations); the host reference (references/host/gemm.h) recomputed every case whose index is a multiple "
        "of {} ({} cases, {} elements): {} of them the same bits, max difference {:.3g} x 2^-53 mag (an element "
        "beyond 2 gamma_(k+4)(2^-53) mag, or a bit on the exact tier, would have stopped the campaign).\n\n",
        o.check_every, r.ref_check.cases, r.ref_check.elements, r.ref_check.identical, r.ref_check.max_diff);
  md += fmt::format(
      "Every output element is compared with the fp64 reference on the same rounded inputs "
      "(references/host/gemm.h). `ceiling`: elements above the hard ceiling of harness/bounds.h under the "
      "config's model (a correct library never exceeds it: a failure means the model's derivation is wrong "
      "for that path); `NaN/Inf`: NaN/Inf pattern differs from the reference's outside the overflow zone; "
      "`exact`: small-integer elements of the exact tier that are not bit-exact; `gap`: elements outside "
      "the output view that changed. `max err/ceiling` is the accuracy ratio; `> expected` counts elements "
      "above gemm_bounds' expected level (warnings, not failures).\n\n");
  md += tot.failures() == 0
            ? fmt::format("**PASS**: no element above its ceiling in {} cases ({} elements).\n\n", tot.cases,
                          tot.elements)
            : fmt::format("**FAIL**: {} ceiling, {} NaN/Inf, {} exact-tier, {} gap failures in {} cases.\n\n",
                          tot.ceiling_failures, tot.naninf_failures, tot.exact_failures, tot.gap_writes, tot.cases);
  if (r.planted > 0) md += fmt::format("Planted errors (test hook): {}.\n\n", r.planted);
  md +=
      "## Bound models\n\n| config | library | types | layouts fuzzed | ceiling model | expected level | source "
      "|\n|---|---|---|---|---|---|---|\n";
  for (int ci : r.configs) {
    const FaConfig& cfg = fa_configs()[static_cast<size_t>(ci)];
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", cfg.name,
                      cfg.library == FaLibrary::kCublas ? "cuBLAS (cublasGemmEx)" : "cuBLASLt", types_text(cfg),
                      fa_layout_text(cfg), model_text(cfg), expected_text(cfg), cfg.model_note);
  }
  // The layout rules, each once, with the documentation they implement.
  md +=
      "\nLayouts: each configuration's cases meet its library's documented requirements, so that a declined "
      "case is the library's doing (reported under Not run), never the generator's:\n\n";
  std::vector<std::string_view> sources;
  for (int ci : r.configs) {
    const std::string_view src = fa_configs()[static_cast<size_t>(ci)].layout.source;
    if (std::find(sources.begin(), sources.end(), src) != sources.end()) continue;
    sources.push_back(src);
    std::string names;
    for (int cj : r.configs)
      if (fa_configs()[static_cast<size_t>(cj)].layout.source == src)
        names += fmt::format("{}{}", names.empty() ? "" : ", ", fa_configs()[static_cast<size_t>(cj)].name);
    md += fmt::format("- {}: {}\n", names, src);
  }
  md +=
      "\nOverflow zone: where mag (|alpha| |A||B| with the scales, + |beta||C|) can pass the accumulator's or "
      "the output type's largest finite value, a NaN or an Inf of either sign is accepted (the device check's "
      "rule; measured: cuBLASLt's fp16-output path holds an intermediate in fp16 and returned -Inf where the "
      "exact result was +250368).\n";
  md +=
      "\n## Per configuration and value class\n\n"
      "| config | class | cases | not run | exact cases | elements | compared | ceiling | NaN/Inf | exact | gap | "
      "max err/ceiling | > expected | max err/expected |\n"
      "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  const auto line = [&](std::string_view cfg, std::string_view cls, const FaRow& w) {
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.4g} | {} | {:.4g} |\n", cfg, cls,
                      w.cases, w.not_run, w.exact_cases, w.elements, w.compared, w.ceiling_failures, w.naninf_failures,
                      w.exact_failures, w.gap_writes, w.max_ratio, w.expected_exceedances, w.max_ratio_expected);
  };
  for (int ci : r.configs) {
    const FaConfig& cfg = fa_configs()[static_cast<size_t>(ci)];
    for (int cl = 0; cl < kFaClasses; ++cl) {
      const FaRow& w = r.table.at(ci, static_cast<FaClass>(cl));
      if (w.cases + w.not_run > 0) line(cfg.name, fa_class_name(static_cast<FaClass>(cl)), w);
    }
    line(cfg.name, "**all**", r.table.config_total(ci));
  }
  if (!r.failures.empty()) {
    md += fmt::format("\n## Failures (first {} of {})\n\n", std::min<size_t>(r.failures.size(), 50), tot.failures());
    for (size_t i = 0; i < r.failures.size() && i < 50; ++i) md += "- `" + fa_failure_line(r.failures[i], o) + "`\n";
  }
  bool any_not_run = false;
  for (int ci : r.configs) any_not_run = any_not_run || !r.not_run_reason[static_cast<size_t>(ci)].empty();
  if (any_not_run) {
    md += "\n## Not run\n\n";
    for (int ci : r.configs) {
      const std::string& why = r.not_run_reason[static_cast<size_t>(ci)];
      if (!why.empty())
        md += fmt::format("- {}: {} case(s), first: {}\n", fa_configs()[static_cast<size_t>(ci)].name,
                          r.table.config_total(ci).not_run, why);
    }
  }
  return md;
}

nlohmann::json fa_json(const FaReport& r, const FaOptions& o) {
  nlohmann::json j;
  j["device"] = r.device;
  j["seed"] = o.seed;
  j["seed_source"] = o.seed_rotated ? "rotate" : "given";
  j["first_case"] = o.first_case;
  j["cases_requested"] = o.cases;
  j["max_k"] = o.max_k;
  j["max_mn"] = o.max_mn;
  j["seconds"] = r.seconds;
  j["max_seconds"] = o.max_seconds;
  j["stopped"] = r.stopped;
  j["cases_per_second"] = r.seconds > 0 ? static_cast<double>(r.table.total().cases) / r.seconds : 0.0;
  j["seconds_phases"] = r.json();
  nlohmann::json shards = nlohmann::json::array();
  for (const FaShard& h : r.shards)
    shards.push_back({{"device", h.device},
                      {"cases", h.cases},
                      {"seconds", h.seconds},
                      {"cases_per_second", h.seconds > 0 ? static_cast<double>(h.cases) / h.seconds : 0.0},
                      {"device_reference", h.device_reference},
                      {"seconds_phases", h.json()}});
  j["shards"] = shards;
  j["reference"] = {{"device", !r.shards.empty() && r.shards.front().device_reference},
                    {"check_every", o.check_every},
                    {"checked_cases", r.ref_check.cases},
                    {"checked_elements", r.ref_check.elements},
                    {"identical_elements", r.ref_check.identical},
                    {"max_diff_ulps_of_mag", r.ref_check.max_diff}};
  j["planted"] = r.planted;
  j["total"] = row_json(r.table.total());
  nlohmann::json configs = nlohmann::json::array();
  for (int ci : r.configs) {
    const FaConfig& cfg = fa_configs()[static_cast<size_t>(ci)];
    nlohmann::json cj = {{"config", cfg.name},
                         {"library", cfg.library == FaLibrary::kCublas ? "cublas" : "cublaslt"},
                         {"a", dtype_name(cfg.a)},
                         {"b", dtype_name(cfg.b)},
                         {"out", dtype_name(cfg.out)},
                         {"fast_accum", cfg.fast_accum},
                         {"layout", fa_layout_text(cfg)},
                         {"layout_source", cfg.layout.source},
                         {"ceiling_model", model_text(cfg)},
                         {"expected_level", expected_text(cfg)},
                         {"model_source", cfg.model_note},
                         {"not_run_reason", r.not_run_reason[static_cast<size_t>(ci)]},
                         {"total", row_json(r.table.config_total(ci))}};
    nlohmann::json classes = nlohmann::json::object();
    for (int cl = 0; cl < kFaClasses; ++cl)
      classes[std::string(fa_class_name(static_cast<FaClass>(cl)))] =
          row_json(r.table.at(ci, static_cast<FaClass>(cl)));
    cj["classes"] = classes;
    configs.push_back(cj);
  }
  j["configs"] = configs;
  nlohmann::json fails = nlohmann::json::array();
  for (const FaFailure& f : r.failures) {
    fails.push_back({{"kind", f.kind},
                     {"config", f.c.cfg().name},
                     {"class", fa_class_name(f.c.cls)},
                     {"case", f.c.index},
                     {"shape", shape_text(f.c)},
                     {"element", {f.batch, f.i, f.j}},
                     {"value", f.value},
                     {"ref", f.ref},
                     {"mag", f.mag},
                     {"bound", f.bound},
                     {"replay", replay(f.c, o)}});
  }
  j["failures"] = fails;
  return j;
}

// ---- the campaign's values ---------------------------------------------------------------------

static_assert(static_cast<int32_t>(ValueClass::kNormal) == kFaGenNormal &&
              static_cast<int32_t>(ValueClass::kUniform) == kFaGenUniform &&
              static_cast<int32_t>(ValueClass::kSameSign) == kFaGenSameSign &&
              static_cast<int32_t>(ValueClass::kSmallInt) == kFaGenSmallInt &&
              static_cast<int32_t>(ValueClass::kNaN) == kFaGenNaN &&
              static_cast<int32_t>(ValueClass::kLogUniform) == kFaGenLogUniform &&
              static_cast<int32_t>(ValueClass::kNearOverflow) == kFaGenNearOverflow &&
              static_cast<int32_t>(ValueClass::kSubnormal) == kFaGenSubnormal &&
              static_cast<int32_t>(ValueClass::kSignedZero) == kFaGenSignedZero);
static_assert(kSpecialNaN == kFaSpecialNaN && kSpecialPosInf == kFaSpecialPosInf &&
              kSpecialNegInf == kFaSpecialNegInf && kAtFirst == kFaAtFirst && kAtLast == kFaAtLast);

bool fa_gen_supports(const ValueRecipe& r) {
  switch (r.cls) {
    case ValueClass::kPareto:
    case ValueClass::kMeanSpread:
    case ValueClass::kOneHot:
    case ValueClass::kPermutation:
      return false;
    default:
      return !(r.inject.active() && (r.inject.at & kAtTile) != 0);
  }
}

FaGen fa_gen(const ValueRecipe& r, DType t, uint64_t stream, uint64_t numel) {
  FaGen g;
  g.key = fa_value_key(r.seed, stream);
  g.inject_key = fa_mix64(g.key ^ kFaInjectKey);
  g.numel = numel;
  g.cls = static_cast<int32_t>(r.cls);
  g.scale = r.scale;
  g.int_range = std::max<int64_t>(r.int_range, 0);
  g.lo = static_cast<double>(r.exp_min);
  g.width = static_cast<double>(std::max<int64_t>(r.exp_max - r.exp_min, 0));
  if (r.cls == ValueClass::kNearOverflow) {
    g.max = max_finite(t);
    g.factor = std::max(r.overflow_factor, 1.0);
    g.log2_factor = fa_poly_ln(g.factor) / kFaLn2;
  }
  if (r.cls == ValueClass::kSubnormal && dtype_is_float(t)) {
    g.sub_lo = std::ilogb(min_subnormal(t));
    g.sub_bits = std::ilogb(min_normal(t)) - g.sub_lo;
  }
  if (r.inject.active()) {
    g.inject_kinds = r.inject.kinds;
    g.inject_at = r.inject.at;
    g.inject_rate = r.inject.rate;
  }
  return g;
}

namespace {

/// The bytes of a pattern writer (write_gap_canary, write_output_poison) for `t`,
/// little-endian, as FaRegion holds them.
uint64_t pattern_of(void (*write)(DType, void*), DType t) {
  unsigned char b[8] = {};
  write(t, b);
  uint64_t v = 0;
  for (size_t i = dtype_size(t); i-- > 0;) v = (v << 8) | b[i];
  return v;
}

FaRegion region(uint64_t dst, const TensorDesc& d, int32_t mode) {
  FaRegion r;
  r.dst = dst;
  r.extent = d.extent();
  r.offset = d.offset;
  r.batch = d.shape[0];
  r.rows = d.shape[1];
  r.cols = d.shape[2];
  r.stride = d.strides[0];
  r.ld = d.strides[1];
  r.dtype = d.dtype;
  r.size = static_cast<uint8_t>(dtype_size(d.dtype));
  r.mode = mode;
  r.canary = pattern_of(write_gap_canary, d.dtype);
  r.poison = pattern_of(write_output_poison, d.dtype);
  return r;
}

FaRegion values_region(uint64_t dst, const TensorDesc& d, const ValueRecipe& rc, uint64_t stream) {
  FaRegion r = region(dst, d, kFaRegionValues);
  r.gen = fa_gen(rc, d.dtype, stream, static_cast<uint64_t>(d.numel()));
  return r;
}

FaRegion scale_region(uint64_t dst, double scale) {
  FaRegion r = region(dst, TensorDesc{DType::kF32, {1, 1, 1}, {1, 1, 1}, 0}, kFaRegionConstant);
  r.constant = scale;
  return r;
}

}  // namespace

Status fa_case_regions(const FaBatch& batch, size_t i, std::vector<FaRegion>& regions) {
  const FaCase& c = batch.cases[i];
  const FaSlot& s = batch.slots[i];
  for (const ValueRecipe* r : {&c.ra, &c.rb, &c.rc})
    if (!fa_gen_supports(*r))
      return invalid_argument(fmt::format(
          "false-alarm: case {} draws a value class the campaign's generator does not have (fa_gen_supports)",
          c.index));
  regions.push_back(values_region(s.a, fa_desc_a(c), c.ra, 1));
  regions.push_back(values_region(s.b, fa_desc_b(c), c.rb, 2));
  regions.push_back(scale_region(s.scale_a, c.scale_a));
  regions.push_back(scale_region(s.scale_b, c.scale_b));
  // beta == 0: C is not read (BLAS), so it holds the output poison: an unwritten element shows.
  regions.push_back(c.beta != 0 ? values_region(s.c, fa_desc_c(c), c.rc, 3)
                                : region(s.c, fa_desc_c(c), kFaRegionPoison));
  return ok_status();
}

Status fa_batch_regions(const FaBatch& batch, std::vector<FaRegion>& regions) {
  regions.clear();
  regions.reserve(5 * batch.cases.size());
  for (size_t i = 0; i < batch.cases.size(); ++i) ASSAY_RETURN_IF_ERROR(fa_case_regions(batch, i, regions));
  return ok_status();
}

Status fa_materialize(const FaBatch& batch, size_t i, unsigned char* image) {
  thread_local std::vector<FaRegion> regions;
  regions.clear();
  ASSAY_RETURN_IF_ERROR(fa_case_regions(batch, i, regions));
  for (const FaRegion& r : regions)
    for (int64_t lin = 0; lin < r.extent; ++lin) fa_region_element(r, lin, image);
  return ok_status();
}

double fa_value(const ValueRecipe& r, DType t, uint64_t stream, uint64_t numel, uint64_t index) {
  if (!fa_gen_supports(r))
    return recipe_value(r, TensorDesc::contiguous(t, {static_cast<int64_t>(numel)}), stream, index);
  return fa_gen_value(fa_gen(r, t, stream, numel), index);
}

namespace {

/// Element bits -> double by table (8- and 16-bit types) or a plain load: what
/// load_as_double gives, without its switch per element.
class Decoder {
 public:
  explicit Decoder(DType t) : t_(t), es_(dtype_size(t)) {
    switch (t) {
      case DType::kF16:
      case DType::kBF16:
      case DType::kE4M3:
      case DType::kE5M2:
        table_ = table(t).data();
        break;
      default:
        break;
    }
  }
  double operator()(const unsigned char* base, int64_t lin) const {
    const unsigned char* p = base + lin * static_cast<int64_t>(es_);
    if (table_ != nullptr) {
      if (es_ == 1) return table_[*p];
      uint16_t h;
      std::memcpy(&h, p, 2);
      return table_[h];
    }
    switch (t_) {
      case DType::kF32:
      case DType::kTF32: {
        float f;
        std::memcpy(&f, p, 4);
        return f;
      }
      case DType::kI8:
        return static_cast<int8_t>(*p);
      case DType::kI32: {
        int32_t v;
        std::memcpy(&v, p, 4);
        return v;
      }
      default:
        return load_as_double(t_, p);
    }
  }

 private:
  static const std::vector<double>& table(DType t) {
    static const std::vector<double> f16 = build(DType::kF16), bf16 = build(DType::kBF16), e4m3 = build(DType::kE4M3),
                                     e5m2 = build(DType::kE5M2);
    switch (t) {
      case DType::kF16:
        return f16;
      case DType::kBF16:
        return bf16;
      case DType::kE4M3:
        return e4m3;
      default:
        return e5m2;
    }
  }
  static std::vector<double> build(DType t) {
    const size_t n = size_t{1} << (8 * dtype_size(t));
    std::vector<double> v(n);
    for (size_t i = 0; i < n; ++i) {
      unsigned char b[2] = {static_cast<unsigned char>(i & 0xff), static_cast<unsigned char>(i >> 8)};
      v[i] = load_as_double(t, b);
    }
    return v;
  }
  DType t_;
  size_t es_;
  const double* table_ = nullptr;
};

}  // namespace

void fa_reference(int64_t m, int64_t n, int64_t k, double alpha, const double* a, const double* bt, double beta,
                  const double* c, double* ref, double* mag) {
  // ref::gemm_reference_rows per element: acc += av * bv; s += |av| |bv| over q in order,
  // then r = alpha acc, sm = |alpha| s (+ beta c, + |beta| |c|). Four independent elements
  // per pass only interleave those chains; each keeps its own order.
  const auto finish = [&](int64_t i, int64_t j, double acc, double s) {
    double r = alpha * acc;
    double sm = std::fabs(alpha) * s;
    if (beta != 0.0) {
      const double cv = c[i * n + j];
      r += beta * cv;
      sm += std::fabs(beta) * std::fabs(cv);
    }
    ref[i * n + j] = r;
    mag[i * n + j] = sm;
  };
  for (int64_t i = 0; i < m; ++i) {
    const double* ai = a + i * k;
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) {
      const double *b0 = bt + j * k, *b1 = b0 + k, *b2 = b1 + k, *b3 = b2 + k;
      double c0 = 0, c1 = 0, c2 = 0, c3 = 0, s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      for (int64_t q = 0; q < k; ++q) {
        const double av = ai[q], aa = std::fabs(av);
        c0 += av * b0[q];
        s0 += aa * std::fabs(b0[q]);
        c1 += av * b1[q];
        s1 += aa * std::fabs(b1[q]);
        c2 += av * b2[q];
        s2 += aa * std::fabs(b2[q]);
        c3 += av * b3[q];
        s3 += aa * std::fabs(b3[q]);
      }
      finish(i, j, c0, s0);
      finish(i, j + 1, c1, s1);
      finish(i, j + 2, c2, s2);
      finish(i, j + 3, c3, s3);
    }
    for (; j < n; ++j) {
      const double* bj = bt + j * k;
      double acc = 0, s = 0;
      for (int64_t q = 0; q < k; ++q) {
        acc += ai[q] * bj[q];
        s += std::fabs(ai[q]) * std::fabs(bj[q]);
      }
      finish(i, j, acc, s);
    }
  }
}

// ---- the batch layout ------------------------------------------------------------------------

void fa_layout(FaBatch& batch) {
  batch.slots.assign(batch.cases.size(), FaSlot{});
  size_t pos = 0;
  for (size_t i = 0; i < batch.cases.size(); ++i) {
    const FaCase& c = batch.cases[i];
    FaSlot& s = batch.slots[i];
    s.a = scratch_round_up(pos);
    pos = s.a + static_cast<size_t>(fa_desc_a(c).extent()) * dtype_size(c.cfg().a);
    s.b = scratch_round_up(pos);
    pos = s.b + static_cast<size_t>(fa_desc_b(c).extent()) * dtype_size(c.cfg().b);
    s.scale_a = scratch_round_up(pos);
    s.scale_b = s.scale_a + 256;
    pos = s.scale_b + sizeof(float);
  }
  batch.out_begin = scratch_round_up(pos);
  pos = batch.out_begin;
  for (size_t i = 0; i < batch.cases.size(); ++i) {
    const FaCase& c = batch.cases[i];
    batch.slots[i].c = scratch_round_up(pos);
    pos = batch.slots[i].c + static_cast<size_t>(fa_desc_c(c).extent()) * dtype_size(c.cfg().out);
  }
  batch.bytes = scratch_round_up(pos);
  batch.ref_at.assign(batch.cases.size(), 0);
  uint64_t at = 0;
  for (size_t i = 0; i < batch.cases.size(); ++i) {
    const FaCase& c = batch.cases[i];
    batch.ref_at[i] = at;
    at += static_cast<uint64_t>(c.batch * c.m * c.n);
  }
  batch.ref_elements = static_cast<size_t>(at);
}

namespace {

int32_t f64_input(DType t) {
  switch (t) {
    case DType::kF16:
      return device_ref::kInF16;
    case DType::kBF16:
      return device_ref::kInBF16;
    case DType::kE4M3:
      return device_ref::kInE4M3;
    case DType::kE5M2:
      return device_ref::kInE5M2;
    case DType::kI8:
      return device_ref::kInI8;
    case DType::kI32:
      return device_ref::kInI32;
    default:
      return device_ref::kInF32;  // fp32, and tf32 in fp32 storage (the configs use no fp64)
  }
}

}  // namespace

void fa_device_problems(const FaBatch& batch, std::vector<device_ref::F64GemmProblem>& problems,
                        std::vector<device_ref::F64GemmTile>& tiles) {
  problems.clear();
  tiles.clear();
  for (size_t i = 0; i < batch.cases.size(); ++i) {
    const FaCase& c = batch.cases[i];
    const FaConfig& cfg = c.cfg();
    const FaSlot& s = batch.slots[i];
    device_ref::F64GemmProblem p;
    p.a_type = f64_input(cfg.a);
    p.b_type = f64_input(cfg.b);
    p.c_type = f64_input(cfg.out);
    p.trans_a = c.trans_a ? 1 : 0;
    p.trans_b = c.trans_b ? 1 : 0;
    p.m = c.m;
    p.n = c.n;
    p.k = c.k;
    p.batch = c.batch;
    p.lda = c.lda;
    p.ldb = c.ldb;
    p.ldc = c.ldc;
    p.stride_a = c.stride_a;
    p.stride_b = c.stride_b;
    p.stride_c = c.stride_c;
    p.a = s.a + static_cast<uint64_t>(c.off_a) * dtype_size(cfg.a);
    p.b = s.b + static_cast<uint64_t>(c.off_b) * dtype_size(cfg.b);
    p.c = s.c + static_cast<uint64_t>(c.off_c) * dtype_size(cfg.out);
    p.alpha = c.alpha;
    p.beta = c.beta;
    p.scale_a = c.scale_a;
    p.scale_b = c.scale_b;
    p.out = batch.ref_at[i];
    device_ref::f64_gemm_append_tiles(p, static_cast<int32_t>(i), tiles);
    problems.push_back(p);
  }
}

bool fa_reference_agrees(double ref_d, double mag_d, double ref_h, double mag_h, int64_t k, bool exact) {
  const auto same = [](double d, double h) {
    if (std::isnan(h) || std::isnan(d)) return std::isnan(h) && std::isnan(d);
    return d == h;  // +0 == -0: the judge compares |out - ref|
  };
  if (exact) return same(ref_d, ref_h) && same(mag_d, mag_h);
  if (!std::isfinite(ref_h) || !std::isfinite(ref_d) || !std::isfinite(mag_h) || !std::isfinite(mag_d))
    return same(ref_d, ref_h) && same(mag_d, mag_h);
  // Each side is sum_q a_q b_q in some order, every product and partial sum rounded, then alpha
  // and beta C: within gamma_{k+3}(u) mag of the exact value [Higham (3.5)], mag itself within
  // gamma_{k+1}(u); so the two differ by at most 2 gamma_{k+4}(u) max(mag) (+ an underflow floor).
  const double nu = static_cast<double>(k + 4) * 0x1p-53;
  const double tol = 2.0 * nu / (1.0 - nu) * std::max(mag_h, mag_d) + static_cast<double>(k + 4) * 0x1p-1074;
  return std::fabs(ref_d - ref_h) <= tol && std::fabs(mag_d - mag_h) <= tol;
}

// ---- the campaign ---------------------------------------------------------------------------------

namespace {

/// The fp64 reference of one case on its (rounded) inputs, dequantised by the scales.
struct CaseRef {
  std::vector<double> ref, mag;  // batch * m * n, row-major per entry
  Status status;                 // the inputs could not be drawn (fa_case_regions)
};

struct Scratch {
  std::vector<double> a, bt, c;
  std::vector<unsigned char> image;  // the case's inputs, laid out alone (fa_layout of one case)
  FaBatch one;
};

/// The host reference of case c: its inputs drawn on the host (fa_materialize, the device's
/// functions) into a layout of its own, decoded, then fa_reference per batch entry.
Status compute_reference(const FaCase& c, CaseRef& out, Scratch& s) {
  FaBatch& one = s.one;
  one.cases.assign(1, c);
  fa_layout(one);
  s.image.resize(one.bytes);
  ASSAY_RETURN_IF_ERROR(fa_materialize(one, 0, s.image.data()));
  const FaSlot& slot = one.slots[0];
  const FaConfig& cfg = c.cfg();
  const Decoder da(cfg.a), db(cfg.b), dc(cfg.out);
  const int64_t m = c.m, n = c.n, k = c.k;
  s.a.resize(static_cast<size_t>(m * k));
  s.bt.resize(static_cast<size_t>(n * k));
  if (c.beta != 0) s.c.resize(static_cast<size_t>(m * n));
  out.ref.assign(static_cast<size_t>(c.batch * m * n), 0.0);
  out.mag.assign(out.ref.size(), 0.0);
  const unsigned char* A = s.image.data() + slot.a;
  const unsigned char* B = s.image.data() + slot.b;
  const unsigned char* C = s.image.data() + slot.c;
  for (int64_t bi = 0; bi < c.batch; ++bi) {
    // Each input element decoded once, into canonical copies with k contiguous: A as m x k,
    // B transposed as n x k.
    const int64_t oa = c.off_a + bi * c.stride_a, ob = c.off_b + bi * c.stride_b;
    if (c.trans_a) {
      for (int64_t q = 0; q < k; ++q)
        for (int64_t i2 = 0; i2 < m; ++i2)
          s.a[static_cast<size_t>(i2 * k + q)] = c.scale_a * da(A, oa + q * c.lda + i2);
    } else {
      for (int64_t i2 = 0; i2 < m; ++i2)
        for (int64_t q = 0; q < k; ++q) s.a[static_cast<size_t>(i2 * k + q)] = c.scale_a * da(A, oa + i2 * c.lda + q);
    }
    if (c.trans_b) {
      for (int64_t j = 0; j < n; ++j)
        for (int64_t q = 0; q < k; ++q) s.bt[static_cast<size_t>(j * k + q)] = c.scale_b * db(B, ob + j * c.ldb + q);
    } else {
      for (int64_t q = 0; q < k; ++q)
        for (int64_t j = 0; j < n; ++j) s.bt[static_cast<size_t>(j * k + q)] = c.scale_b * db(B, ob + q * c.ldb + j);
    }
    if (c.beta != 0) {
      for (int64_t i2 = 0; i2 < m; ++i2)
        for (int64_t j = 0; j < n; ++j)
          s.c[static_cast<size_t>(i2 * n + j)] = dc(C, c.off_c + bi * c.stride_c + i2 * c.ldc + j);
    }
    fa_reference(m, n, k, c.alpha, s.a.data(), s.bt.data(), c.beta, c.beta != 0 ? s.c.data() : nullptr,
                 out.ref.data() + bi * m * n, out.mag.data() + bi * m * n);
  }
  return ok_status();
}

/// Moves one finite element of the output by 4 ceilings (FaPlant::kPerturb); false if none.
/// One case's ref and mag (batch * m * n each): the host's or the device's.
struct RefView {
  const double* ref = nullptr;
  const double* mag = nullptr;
};

bool plant_perturbation(const FaBatch& batch, size_t i, const RefView& cr, const BoundPair& bp) {
  const FaCase& c = batch.cases[i];
  const DType t = c.cfg().out;
  const size_t es = dtype_size(t);
  unsigned char* res = batch.result + (batch.slots[i].c - batch.out_begin);
  for (int64_t e = 0; e < c.batch * c.m * c.n; ++e) {
    const int64_t bi = e / (c.m * c.n), ij = e % (c.m * c.n), i2 = ij / c.n, j = ij % c.n;
    const int64_t lin = c.off_c + bi * c.stride_c + i2 * c.ldc + j;
    unsigned char* p = res + static_cast<size_t>(lin) * es;
    const double o = load_as_double(t, p), r = cr.ref[static_cast<size_t>(e)], mg = cr.mag[static_cast<size_t>(e)];
    if (!std::isfinite(o) || !std::isfinite(r) || !std::isfinite(mg)) continue;
    const double tol = bp.ceiling.tol(std::fabs(r), mg);
    const double moved = dtype_is_float(t) ? o + 4 * tol : o + std::max(1.0, std::ceil(4 * tol));
    if (!(std::fabs(moved) < max_finite(t))) continue;
    store_as(t, moved, p);
    return true;
  }
  return false;
}

struct CaseOutcome {
  std::vector<FaFailure> failures;  // at most a few per kind
  bool planted = false;
};

void judge_case(const FaBatch& batch, size_t i, const RefView& cr, FaPlant plant, FaTable& table, CaseOutcome& out) {
  const FaCase& c = batch.cases[i];
  const FaConfig& cfg = c.cfg();
  FaRow& row = table.at(c.config, c.cls);
  if (!batch.status[i].ok()) {
    ++row.not_run;
    return;
  }
  ++row.cases;
  const BoundPair bp = fa_bounds(c);
  const bool exact = fa_exact(c);
  row.exact_cases += exact ? 1 : 0;
  if (plant == FaPlant::kPerturb) out.planted = plant_perturbation(batch, i, cr, bp);
  const DType t = cfg.out;
  const size_t es = dtype_size(t);
  const Decoder dec(t);
  const double out_max = max_finite(t), limit = fa_overflow_limit(c);
  const unsigned char* res = batch.result + (batch.slots[i].c - batch.out_begin);
  // What C held before the vendor (fa_case_regions): the output poison in the view where
  // beta == 0, the gap canary around it; both are constants of the dtype, so the host knows
  // them without having drawn the case.
  unsigned char poison[8], canary[8];
  write_output_poison(t, poison);
  write_gap_canary(t, canary);
  int kept[4] = {0, 0, 0, 0};
  const auto keep = [&](int kind, const char* name, int64_t bi, int64_t i2, int64_t j, double v, double r, double mg,
                        double bound) {
    if (kept[kind]++ >= 3) return;
    out.failures.push_back(FaFailure{name, c, bi, i2, j, v, r, mg, bound});
  };
  for (int64_t bi = 0; bi < c.batch; ++bi) {
    for (int64_t i2 = 0; i2 < c.m; ++i2) {
      for (int64_t j = 0; j < c.n; ++j) {
        const size_t e = static_cast<size_t>((bi * c.m + i2) * c.n + j);
        const int64_t lin = c.off_c + bi * c.stride_c + i2 * c.ldc + j;
        const double o = dec(res, lin);
        const double r = cr.ref[e], mg = cr.mag[e];
        FaJudgement jd = fa_judge(o, r, mg, bp, exact, out_max, limit);
        // beta == 0: C held the output poison (a NaN with a payload no arithmetic produces);
        // still there, the element was never written, which the overflow zone does not excuse.
        if (c.beta == 0 && !jd.naninf && std::memcmp(res + lin * static_cast<int64_t>(es), poison, es) == 0)
          jd.naninf = true;
        ++row.elements;
        if (jd.compared) {
          ++row.compared;
          FaRow one;
          one.max_ratio = jd.ratio;
          one.worst_case = c.index;
          row.merge(one);  // max ratio and its case, ties to the lowest index
          row.max_ratio_expected = std::max(row.max_ratio_expected, jd.ratio_expected);
          row.expected_exceedances += jd.above_expected ? 1 : 0;
        }
        if (jd.above_ceiling) {
          ++row.ceiling_failures;
          keep(0, "ceiling", bi, i2, j, o, r, mg, jd.ceiling);
        }
        if (jd.naninf) {
          ++row.naninf_failures;
          keep(1, "naninf", bi, i2, j, o, r, mg, jd.ceiling);
        }
        if (jd.not_exact) {
          ++row.exact_failures;
          keep(2, "exact", bi, i2, j, o, r, mg, jd.ceiling);
        }
      }
    }
  }
  // Outside the view (padding, offsets, gaps between batch entries): nothing may change. The
  // gaps in allocation order: before the first row, between rows, after the last.
  const auto gap = [&](int64_t from, int64_t to) {
    for (int64_t lin = from; lin < to; ++lin) {
      const size_t off = static_cast<size_t>(lin) * es;
      if (std::memcmp(res + off, canary, es) != 0) {
        ++row.gap_writes;
        keep(3, "gap", 0, lin, 0, load_as_double(t, res + off), 0, 0, 0);
      }
    }
  };
  int64_t pos = 0;
  for (int64_t bi = 0; bi < c.batch; ++bi)
    for (int64_t i2 = 0; i2 < c.m; ++i2) {
      const int64_t start = c.off_c + bi * c.stride_c + i2 * c.ldc;
      gap(pos, start);
      pos = start + c.n;
    }
  gap(pos, fa_desc_c(c).extent());
}

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

namespace {

/// Case indices for the shards of one campaign: each takes the next index from one counter.
struct CaseSource {
  std::atomic<int64_t> next{0};
  int64_t end = 0;
};

/// What the shards share: the case counter, the printed failure lines and progress.
struct Shared {
  CaseSource source;
  std::mutex mu;
  int64_t printed = 0, done = 0, next_progress = 0, failures = 0, not_run = 0;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
};

/// Past the time budget or after a stop signal: no new case is taken (the taken ones finish,
/// so the cases run stay one contiguous range of indices).
bool should_stop(const FaOptions& o, Shared& shared) {
  if (stop_signal() != 0) return true;
  return o.max_seconds > 0 &&
         std::chrono::duration<double>(std::chrono::steady_clock::now() - shared.start).count() >= o.max_seconds;
}

/// One batch in flight: its cases and layout, and the host references of those cases that
/// have one (all without a device reference, else the sampled ones).
struct Stage {
  FaBatch batch;
  std::vector<CaseRef> host;
  std::vector<uint8_t> has_host;
  double launch_seconds = 0;  ///< host wall of backend.launch (an emulated vendor: the whole run)
  bool active = false;
};

/// Compares case i's device reference with the host's: the first element that disagrees
/// (fa_reference_agrees), or -1; counts into `check`.
int64_t mismatch_element(const FaCase& c, const CaseRef& h, const FaBatch& b, size_t i, FaRefCheck& check) {
  const bool exact = fa_exact(c);
  const size_t n = static_cast<size_t>(c.batch * c.m * c.n);
  const double* rd = b.ref + b.ref_at[i];
  const double* md = b.mag + b.ref_at[i];
  for (size_t e = 0; e < n; ++e) {
    const double r0 = rd[e], m0 = md[e], r1 = h.ref[e], m1 = h.mag[e];
    ++check.elements;
    const bool nan_pair = std::isnan(r0) && std::isnan(r1);
    if ((nan_pair || std::memcmp(&r0, &r1, 8) == 0) &&
        ((std::isnan(m0) && std::isnan(m1)) || std::memcmp(&m0, &m1, 8) == 0))
      ++check.identical;
    if (std::isfinite(r0) && std::isfinite(r1) && std::isfinite(m1) && m1 > 0)
      check.max_diff = std::max(check.max_diff, std::fabs(r0 - r1) / (0x1p-53 * m1));
    if (!fa_reference_agrees(r0, m0, r1, m1, c.k, exact)) return static_cast<int64_t>(e);
  }
  return -1;
}

/// One shard: batches from the shared counter through `backend`, two in flight (the host
/// lays out and checks batch i + 1 while the device runs batch i).
StatusOr<FaReport> run_shard(const FaOptions& o, const std::vector<int>& sel, FaBackend& backend, int threads,
                             Shared& shared) {
  Pool pool(threads);
  FaReport report;
  report.configs = sel;
  report.not_run_reason.assign(fa_configs().size(), "");
  report.not_run_case.assign(fa_configs().size(), -1);
  report.device = backend.describe();
  const bool device_ref = backend.device_reference();
  const auto t_start = std::chrono::steady_clock::now();
  std::vector<FaTable> tables(static_cast<size_t>(pool.size()));
  std::vector<Scratch> scratch(static_cast<size_t>(pool.size()));
  Stage stages[2];
  std::optional<FaCase> pending;  // taken from the counter but not fitting the last batch
  int64_t batch_no = 0;

  // Fills stage `st` with the next cases; false when none is left.
  const auto take = [&](Stage& st) {
    FaBatch& batch = st.batch;
    batch.cases.clear();
    size_t estimate = 0;
    while (static_cast<int64_t>(batch.cases.size()) < std::max<int64_t>(o.batch_cases, 1)) {
      if (!pending) {
        if (should_stop(o, shared)) break;
        const int64_t idx = shared.source.next.fetch_add(1);
        if (idx >= shared.source.end) break;
        pending = fa_make_case(o, sel, o.first_case + idx);
      }
      const FaCase& c = *pending;
      const FaConfig& cfg = c.cfg();
      const size_t need = static_cast<size_t>(fa_desc_a(c).extent()) * dtype_size(cfg.a) +
                          static_cast<size_t>(fa_desc_b(c).extent()) * dtype_size(cfg.b) +
                          static_cast<size_t>(fa_desc_c(c).extent()) * dtype_size(cfg.out) +
                          static_cast<size_t>(c.batch * c.m * c.n) * 16 + 4 * 256;
      if (!batch.cases.empty() && estimate + need > static_cast<size_t>(o.batch_bytes)) break;
      batch.cases.push_back(c);
      pending.reset();
      estimate += need;
    }
    return !batch.cases.empty();
  };

  // The host reference of stage st's cases that get one, on the pool, longest first.
  const auto host_refs = [&](Stage& st) {
    const FaBatch& batch = st.batch;
    const size_t n = batch.cases.size();
    st.host.resize(n);
    st.has_host.assign(n, 0);
    std::vector<size_t> order;
    for (size_t i = 0; i < n; ++i) {
      const int64_t idx = batch.cases[i].index;
      if (!device_ref || (o.check_every > 0 && idx % o.check_every == 0)) {
        st.has_host[i] = 1;
        order.push_back(i);
      } else {
        st.host[i].ref.clear();
        st.host[i].mag.clear();
      }
    }
    std::sort(order.begin(), order.end(), [&](size_t x, size_t y) {
      const FaCase &a = batch.cases[x], &b = batch.cases[y];
      return a.batch * a.m * a.n * a.k > b.batch * b.m * b.n * b.k;
    });
    const auto count = static_cast<int64_t>(order.size());  // before the lambda takes `order`
    pool.start(count, [&st, order = std::move(order), &scratch](int64_t i, int w) {
      const size_t ci = order[static_cast<size_t>(i)];
      st.host[ci].status = compute_reference(st.batch.cases[ci], st.host[ci], scratch[static_cast<size_t>(w)]);
    });
  };

  // Waits for stage st's device work, checks the device reference against the sample,
  // judges every case and collects its failures.
  const auto finish = [&](Stage& st) -> Status {
    FaBatch& batch = st.batch;
    const size_t n = batch.cases.size();
    auto t0 = std::chrono::steady_clock::now();
    ASSAY_RETURN_IF_ERROR(backend.wait(batch));
    report.seconds_wait += since(t0);
    if (batch.device_seconds_inputs >= 0) report.seconds_inputs_device += batch.device_seconds_inputs;
    if (batch.device_seconds_reference >= 0) report.seconds_reference_device += batch.device_seconds_reference;
    for (size_t i = 0; i < n; ++i)
      if (st.has_host[i] && !st.host[i].status.ok()) return st.host[i].status;
    report.seconds_vendor += batch.device_seconds_vendor >= 0 ? batch.device_seconds_vendor : st.launch_seconds;
    if (device_ref) {
      if (n > 0 && (batch.ref == nullptr || batch.mag == nullptr))
        return internal_error("false-alarm: the backend promised a device reference but gave no ref/mag buffers");
      for (size_t i = 0; i < n; ++i) {
        if (!st.has_host[i]) continue;
        ++report.ref_check.cases;
        const int64_t e = mismatch_element(batch.cases[i], st.host[i], batch, i, report.ref_check);
        if (e >= 0) {
          const FaCase& c = batch.cases[i];
          const size_t at = batch.ref_at[i] + static_cast<size_t>(e);
          const std::string msg = fmt::format(
              "false-alarm: the device fp64 reference disagrees with the host's (infrastructure error, no verdict "
              "on the vendor): config={} case={} element {} of batch * m * n: device ref={:.17g} mag={:.17g}, host "
              "ref={:.17g} mag={:.17g}; {}; replay: {}",
              c.cfg().name, c.index, e, batch.ref[at], batch.mag[at], st.host[i].ref[static_cast<size_t>(e)],
              st.host[i].mag[static_cast<size_t>(e)], shape_text(c), replay(c, o));
          fmt::print(stderr, "assay: {}\n", msg);
          return internal_error(msg);
        }
      }
    }
    t0 = std::chrono::steady_clock::now();
    std::vector<CaseOutcome> outcomes(n);
    pool.start(static_cast<int64_t>(n), [&](int64_t i, int w) {
      const size_t ci = static_cast<size_t>(i);
      const RefView rv = st.has_host[ci] && !device_ref
                             ? RefView{st.host[ci].ref.data(), st.host[ci].mag.data()}
                             : RefView{batch.ref + batch.ref_at[ci], batch.mag + batch.ref_at[ci]};
      judge_case(batch, ci, rv, o.plant, tables[static_cast<size_t>(w)], outcomes[ci]);
    });
    pool.wait();
    report.seconds_judge += since(t0);

    int64_t failures = 0, not_run = 0;
    std::lock_guard<std::mutex> lock(shared.mu);
    for (size_t i = 0; i < n; ++i) {
      const FaCase& c = batch.cases[i];
      const size_t ci = static_cast<size_t>(c.config);
      if (!batch.status[i].ok()) {
        ++not_run;
        if (report.not_run_case[ci] < 0 || c.index < report.not_run_case[ci]) {
          report.not_run_case[ci] = c.index;
          report.not_run_reason[ci] =
              fmt::format("{} (case {}: {})", batch.status[i].message(), c.index, shape_text(c));
        }
      }
      report.planted += outcomes[i].planted ? 1 : 0;
      for (FaFailure& f : outcomes[i].failures) {
        ++failures;
        if (!o.quiet && shared.printed < o.max_print) {
          fmt::print("{}\n", fa_failure_line(f, o));
          ++shared.printed;
        }
        if (report.failures.size() < 1000) report.failures.push_back(std::move(f));
      }
    }
    shared.done += static_cast<int64_t>(n);
    shared.failures += failures;
    shared.not_run += not_run;
    if (!o.quiet && (shared.done >= shared.next_progress || shared.done == shared.source.end)) {
      const double t = since(shared.start);
      fmt::print("false-alarm: {}/{} cases, {} failing elements kept, {} not run, {:.1f} s ({:.0f} cases/s)\n",
                 shared.done, shared.source.end, shared.failures, shared.not_run, t,
                 t > 0 ? static_cast<double>(shared.done) / t : 0.0);
      std::fflush(stdout);
      shared.next_progress = shared.done + std::max<int64_t>(shared.source.end / 10, 1);
    }
    return ok_status();
  };

  for (;;) {
    Stage& cur = stages[batch_no % 2];
    Stage& prev = stages[(batch_no + 1) % 2];
    const bool have = take(cur);
    if (have) {
      FaBatch& batch = cur.batch;
      const size_t n = batch.cases.size();
      auto t0 = std::chrono::steady_clock::now();
      fa_layout(batch);
      batch.slot = static_cast<int>(batch_no % 2);
      batch.ref = batch.mag = nullptr;
      batch.device_seconds_inputs = batch.device_seconds_reference = batch.device_seconds_vendor = -1;
      ASSAY_RETURN_IF_ERROR(backend.reserve(batch));
      batch.status.assign(n, ok_status());
      report.seconds_inputs += since(t0);
      // The backend draws and launches this batch on a thread of its own (a GPU queues it
      // behind the batch in flight; an emulated vendor runs it there) while the pool draws
      // and computes the host references of its sampled cases and then judges the batch
      // before: enqueuing a batch's vendor calls is serial host work as long as the judge's.
      t0 = std::chrono::steady_clock::now();
      host_refs(cur);
      Status launched = ok_status();
      std::thread launcher([&backend, &cur, &launched] {
        const auto t_launch = std::chrono::steady_clock::now();
        launched = backend.launch(cur.batch);
        cur.launch_seconds = since(t_launch);
      });
      pool.wait();
      report.seconds_reference += since(t0);
      Status finished = ok_status();
      if (prev.active) {
        finished = finish(prev);
        prev.active = false;
      }
      launcher.join();
      report.seconds_launch += cur.launch_seconds;
      if (!launched.ok()) return launched;
      if (!finished.ok()) return finished;
    } else if (prev.active) {
      ASSAY_RETURN_IF_ERROR(finish(prev));
      prev.active = false;
    }
    if (!have) break;
    cur.active = true;
    ++batch_no;
  }
  for (const FaTable& t : tables) report.table.merge(t);  // failures: sorted by the merge
  report.seconds = since(t_start);
  report.cases = report.table.total().cases;
  FaShard sh;
  static_cast<FaPhaseSeconds&>(sh) = report;
  sh.device = report.device;
  sh.cases = report.cases;
  sh.seconds = report.seconds;
  sh.device_reference = device_ref;
  report.shards = {sh};
  return report;
}

}  // namespace

StatusOr<FaReport> run_false_alarm(const FaOptions& o, std::span<FaBackend* const> backends) {
  ASSAY_ASSIGN_OR_RETURN(const std::vector<int> sel, fa_select(o));
  if (o.cases < 0 || o.first_case < 0) return invalid_argument("--cases and --first-case must be >= 0");
  if (o.max_k < 1 || o.max_mn < 1) return invalid_argument("--max-k and --max-mn must be >= 1");
  if (o.check_every < 0) return invalid_argument("--check-every must be >= 0");
  if (backends.empty()) return invalid_argument("false-alarm: no backend");
  const int total = o.threads > 0 ? o.threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const int shards = static_cast<int>(backends.size());
  const int per_shard = std::max(1, total / shards);
  Shared shared;
  shared.source.end = o.cases;
  std::vector<StatusOr<FaReport>> results(backends.size(), internal_error("false-alarm: shard did not run"));
  if (shards == 1) {
    results[0] = run_shard(o, sel, *backends[0], per_shard, shared);
  } else {
    std::vector<std::thread> workers;
    for (size_t s = 0; s < backends.size(); ++s)
      workers.emplace_back([&, s] {
        results[s] = run_shard(o, sel, *backends[s], per_shard, shared);
        // A shard that stops takes no more cases; the others finish what they hold and stop.
        if (!results[s].ok()) shared.source.next.store(shared.source.end);
      });
    for (std::thread& t : workers) t.join();
  }
  FaReport merged;
  for (size_t s = 0; s < results.size(); ++s) {
    if (!results[s].ok()) return results[s].status();
    merged.merge(*results[s]);
  }
  merged.configs = sel;
  merged.seconds = since(shared.start);
  merged.cases = merged.table.total().cases;
  const int64_t taken = std::min(shared.source.next.load(), shared.source.end);
  if (taken < o.cases)
    merged.stopped = stop_signal() != 0
                         ? fmt::format("stopped by signal {} after {} of {} cases", stop_signal(), taken, o.cases)
                         : fmt::format("stopped at the time budget ({} s) after {} of {} cases", o.max_seconds, taken,
                                       o.cases);
  return merged;
}

StatusOr<FaReport> run_false_alarm(const FaOptions& o, FaBackend& backend) {
  FaBackend* one[] = {&backend};
  return run_false_alarm(o, std::span<FaBackend* const>(one));
}

}  // namespace assay

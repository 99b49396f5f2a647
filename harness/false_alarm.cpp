// assay false-alarm, host part (see false_alarm.h): configurations and their bound models,
// cases, staging, the fp64 reference, the element judge, the table and its reports, and
// the campaign loop. No CUDA headers: the vendor runs behind FaBackend.
#include "harness/false_alarm.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <limits>
#include <mutex>
#include <numeric>
#include <thread>

#include <fmt/format.h>

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

FaConfig rn_f32(std::string_view name) {
  FaConfig c;
  c.name = name;
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
  c.accumulation = Accumulation::kTruncatingBlock;
  c.block = 4;
  c.block_bits = 24;
  c.model_note = kNoteBlock;
  return c;
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
  c.tn_only = true;
  c.batched = true;
  c.granule = 16;  // fp8: pointers, leading dimensions and extents 16-byte aligned
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
  if (lib == FaLibrary::kCublasLt) {
    c.tn_only = true;  // IMMA with the regular column order: TN, m and k multiples of 4
    c.batched = true;
    c.granule = 4;
  }
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

/// splitmix64: a small counter-based mixer; cases are a pure function of (seed, index).
uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

struct Rng {
  uint64_t s;
  uint64_t next() { return mix64(s += 0x632be59bd9b4e019ull); }
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

size_t align256(size_t x) {
  return (x + 255) / 256 * 256;
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
  Rng r{mix64(o.seed * 0x9e3779b97f4a7c15ull ^ mix64(static_cast<uint64_t>(index)))};
  const uint64_t value_seed = r.next();
  c.cls = static_cast<FaClass>(r.below(kFaClasses));
  const bool integer = !dtype_is_float(cfg.acc);
  const int64_t g = cfg.granule;
  const int64_t max_mn = std::max<int64_t>(o.max_mn, 1), max_k = std::max<int64_t>(o.max_k, 1);

  // Shapes: multiples of the granule; small ones often, odd ones wherever the granule is 1.
  const auto dim = [&](int64_t maxv) {
    const int64_t units = std::max<int64_t>(maxv / g, 1);
    const int64_t v = r.chance(0.2)
                          ? 1 + static_cast<int64_t>(r.below(static_cast<uint64_t>(std::min<int64_t>(units, 4))))
                          : 1 + static_cast<int64_t>(r.below(static_cast<uint64_t>(units)));
    return v * g;
  };
  c.m = dim(max_mn);
  c.n = dim(max_mn);
  int64_t k;
  if (r.chance(c.cls == FaClass::kSameSign ? 0.25 : 0.1)) {
    k = max_k;  // the long same-sign reductions where truncating accumulation shows
  } else if (r.chance(0.2)) {
    k = 1 + static_cast<int64_t>(r.below(static_cast<uint64_t>(std::min<int64_t>(32, max_k))));
  } else {
    k = std::clamp<int64_t>(static_cast<int64_t>(std::exp2(r.unit() * std::log2(static_cast<double>(max_k) + 1))), 1,
                            max_k);
  }
  k = round_up(k, g);
  if (k > max_k) k = std::max<int64_t>(g, max_k / g * g);
  c.k = k;

  if (cfg.tn_only) {
    c.trans_a = false;
    c.trans_b = true;
  } else {
    c.trans_a = r.chance(0.5);
    c.trans_b = r.chance(0.5);
  }
  const auto pad = [&] {
    return r.chance(0.5) ? int64_t{0} : g * (1 + static_cast<int64_t>(r.below(g == 1 ? 16 : 2)));
  };
  const auto offset = [&] {
    return r.chance(0.5) ? int64_t{0} : g * (1 + static_cast<int64_t>(r.below(g == 1 ? 31 : 3)));
  };
  const int64_t a_rows = c.trans_a ? c.k : c.m, a_cols = c.trans_a ? c.m : c.k;
  const int64_t b_rows = c.trans_b ? c.n : c.k, b_cols = c.trans_b ? c.k : c.n;
  c.lda = a_cols + pad();
  c.ldb = b_cols + pad();
  c.ldc = c.n + pad();
  c.off_a = offset();
  c.off_b = offset();
  c.off_c = offset();
  c.batch = cfg.batched && r.chance(0.3) ? 2 + static_cast<int64_t>(r.below(3)) : 1;
  const auto stride = [&](int64_t rows, int64_t ld) {
    return rows * ld + (c.batch > 1 && r.chance(0.5) ? g * (1 + static_cast<int64_t>(r.below(g == 1 ? 40 : 3))) : 0);
  };
  c.stride_a = stride(a_rows, c.lda);
  c.stride_b = stride(b_rows, c.ldb);
  c.stride_c = stride(c.m, c.ldc);

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
  return max_finite(cfg.acc) * std::min(1.0, through);
}

// ---- the element judge -----------------------------------------------------------------------

FaJudgement fa_judge(double o, double r, double mag, const BoundPair& b, bool exact, double out_max,
                     double overflow_limit) {
  FaJudgement j;
  const double tol = b.ceiling.tol(std::fabs(r), mag);
  j.ceiling = tol;
  // Partial sums are bounded by mag; where it can pass the accumulator's range (or is itself
  // NaN/Inf), a correct kernel may overflow in the middle of its reduction in some order:
  // Inf, or Inf - Inf = NaN, also where the exact result is an Inf of one sign.
  const bool may_overflow = !(mag * (1.0 + b.ceiling.rel_mag) + b.ceiling.floor < overflow_limit);
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
  std::string md = fmt::format(
      "# Vendor GEMMs against their hard ceilings (assay false-alarm)\n\n"
      "Device: {}. Seed {}, cases [{}, {}): {} run, {} not run (the library declined); m, n <= {}, k <= {}. "
      "{:.1f} s ({:.0f} cases/s; inputs {:.1f} s, references {:.1f} s, vendor {:.1f} s, judge {:.1f} s).\n\n"
      "Every output element is compared with the fp64 host reference on the same rounded inputs "
      "(references/host/gemm.h). `ceiling`: elements above the hard ceiling of harness/bounds.h under the "
      "config's model (a correct library never exceeds it: a failure means the model's derivation is wrong "
      "for that path); `NaN/Inf`: NaN/Inf pattern differs from the reference's outside the overflow zone; "
      "`exact`: small-integer elements of the exact tier that are not bit-exact; `gap`: elements outside "
      "the output view that changed. `max err/ceiling` is the accuracy ratio; `> expected` counts elements "
      "above gemm_bounds' expected level (warnings, not failures).\n\n",
      r.device, o.seed, o.first_case, o.first_case + o.cases, tot.cases, tot.not_run, o.max_mn, o.max_k, r.seconds,
      r.seconds > 0 ? static_cast<double>(tot.cases) / r.seconds : 0.0, r.seconds_inputs, r.seconds_reference,
      r.seconds_vendor, r.seconds_judge);
  md += tot.failures() == 0
            ? fmt::format("**PASS**: no element above its ceiling in {} cases ({} elements).\n\n", tot.cases,
                          tot.elements)
            : fmt::format("**FAIL**: {} ceiling, {} NaN/Inf, {} exact-tier, {} gap failures in {} cases.\n\n",
                          tot.ceiling_failures, tot.naninf_failures, tot.exact_failures, tot.gap_writes, tot.cases);
  if (r.planted > 0) md += fmt::format("Planted errors (test hook): {}.\n\n", r.planted);
  md +=
      "## Bound models\n\n| config | library | types | ceiling model | expected level | source "
      "|\n|---|---|---|---|---|---|\n";
  for (int ci : r.configs) {
    const FaConfig& cfg = fa_configs()[static_cast<size_t>(ci)];
    md += fmt::format("| {} | {} | {} | {} | {} | {} |\n", cfg.name,
                      cfg.library == FaLibrary::kCublas ? "cuBLAS (cublasGemmEx)" : "cuBLASLt", types_text(cfg),
                      model_text(cfg), expected_text(cfg), cfg.model_note);
  }
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
  j["first_case"] = o.first_case;
  j["cases_requested"] = o.cases;
  j["max_k"] = o.max_k;
  j["max_mn"] = o.max_mn;
  j["seconds"] = r.seconds;
  j["seconds_phases"] = {{"inputs", r.seconds_inputs},
                         {"reference", r.seconds_reference},
                         {"vendor", r.seconds_vendor},
                         {"judge", r.seconds_judge}};
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

// ---- staging ---------------------------------------------------------------------------------

void fa_layout(FaBatch& batch) {
  batch.slots.assign(batch.cases.size(), FaSlot{});
  size_t pos = 0;
  for (size_t i = 0; i < batch.cases.size(); ++i) {
    const FaCase& c = batch.cases[i];
    FaSlot& s = batch.slots[i];
    s.a = align256(pos);
    pos = s.a + static_cast<size_t>(fa_desc_a(c).extent()) * dtype_size(c.cfg().a);
    s.b = align256(pos);
    pos = s.b + static_cast<size_t>(fa_desc_b(c).extent()) * dtype_size(c.cfg().b);
    s.scales = align256(pos);
    pos = s.scales + 2 * sizeof(float);
  }
  batch.out_begin = align256(pos);
  pos = batch.out_begin;
  for (size_t i = 0; i < batch.cases.size(); ++i) {
    const FaCase& c = batch.cases[i];
    batch.slots[i].c = align256(pos);
    pos = batch.slots[i].c + static_cast<size_t>(fa_desc_c(c).extent()) * dtype_size(c.cfg().out);
  }
  batch.bytes = align256(pos);
}

void fa_materialize(const FaBatch& batch, size_t i) {
  const FaCase& c = batch.cases[i];
  const FaSlot& s = batch.slots[i];
  materialize(fa_desc_a(c), c.ra, 1, batch.image + s.a);
  materialize(fa_desc_b(c), c.rb, 2, batch.image + s.b);
  const float scales[2] = {static_cast<float>(c.scale_a), static_cast<float>(c.scale_b)};
  std::memcpy(batch.image + s.scales, scales, sizeof scales);
  // beta == 0: C is not read (BLAS), so it holds the output poison: an unwritten element shows.
  if (c.beta != 0) {
    materialize(fa_desc_c(c), c.rc, 3, batch.image + s.c);
  } else {
    materialize_output(fa_desc_c(c), batch.image + s.c);
  }
}

// ---- the campaign ---------------------------------------------------------------------------------

namespace {

/// The fp64 reference of one case on the staged (rounded) inputs, dequantised by the scales.
struct CaseRef {
  std::vector<double> ref, mag;  // batch * m * n, row-major per entry
};

struct Scratch {
  std::vector<double> a, bt, c;
};

void compute_reference(const FaBatch& batch, size_t i, CaseRef& out, Scratch& s) {
  const FaCase& c = batch.cases[i];
  const FaSlot& slot = batch.slots[i];
  const FaConfig& cfg = c.cfg();
  const size_t ea = dtype_size(cfg.a), eb = dtype_size(cfg.b), ec = dtype_size(cfg.out);
  const int64_t m = c.m, n = c.n, k = c.k;
  s.a.resize(static_cast<size_t>(m * k));
  s.bt.resize(static_cast<size_t>(n * k));
  if (c.beta != 0) s.c.resize(static_cast<size_t>(m * n));
  out.ref.assign(static_cast<size_t>(c.batch * m * n), 0.0);
  out.mag.assign(out.ref.size(), 0.0);
  const unsigned char* A = batch.image + slot.a;
  const unsigned char* B = batch.image + slot.b;
  const unsigned char* C = batch.image + slot.c;
  for (int64_t bi = 0; bi < c.batch; ++bi) {
    // Canonical copies with k contiguous: A as m x k, B transposed as n x k.
    for (int64_t i2 = 0; i2 < m; ++i2)
      for (int64_t q = 0; q < k; ++q) {
        const int64_t lin = c.off_a + bi * c.stride_a + (c.trans_a ? q * c.lda + i2 : i2 * c.lda + q);
        s.a[static_cast<size_t>(i2 * k + q)] = c.scale_a * load_as_double(cfg.a, A + static_cast<size_t>(lin) * ea);
      }
    for (int64_t j = 0; j < n; ++j)
      for (int64_t q = 0; q < k; ++q) {
        const int64_t lin = c.off_b + bi * c.stride_b + (c.trans_b ? j * c.ldb + q : q * c.ldb + j);
        s.bt[static_cast<size_t>(j * k + q)] = c.scale_b * load_as_double(cfg.b, B + static_cast<size_t>(lin) * eb);
      }
    if (c.beta != 0) {
      for (int64_t i2 = 0; i2 < m; ++i2)
        for (int64_t j = 0; j < n; ++j) {
          const int64_t lin = c.off_c + bi * c.stride_c + i2 * c.ldc + j;
          s.c[static_cast<size_t>(i2 * n + j)] = load_as_double(cfg.out, C + static_cast<size_t>(lin) * ec);
        }
    }
    ref::GemmProblem<double> p{
        m, n, k, false, true, c.alpha, c.beta, s.a.data(), k, s.bt.data(), k, c.beta != 0 ? s.c.data() : nullptr, n};
    ref::gemm_reference(p, out.ref.data() + bi * m * n, out.mag.data() + bi * m * n, 1);
  }
}

/// Moves one finite element of the output by 4 ceilings (FaPlant::kPerturb); false if none.
bool plant_perturbation(const FaBatch& batch, size_t i, const CaseRef& cr, const BoundPair& bp) {
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

void judge_case(const FaBatch& batch, size_t i, const CaseRef& cr, FaPlant plant, FaTable& table, CaseOutcome& out) {
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
  const double out_max = max_finite(t), limit = fa_overflow_limit(c);
  const unsigned char* res = batch.result + (batch.slots[i].c - batch.out_begin);
  const unsigned char* before = batch.image + batch.slots[i].c;
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
        const double o = load_as_double(t, res + static_cast<size_t>(lin) * es);
        const double r = cr.ref[e], mg = cr.mag[e];
        const FaJudgement jd = fa_judge(o, r, mg, bp, exact, out_max, limit);
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
  // Outside the view (padding, offsets, gaps between batch entries): nothing may change.
  const int64_t extent = fa_desc_c(c).extent();
  for (int64_t lin = 0; lin < extent; ++lin) {
    bool covered = false;
    const int64_t rel = lin - c.off_c;
    if (rel >= 0) {
      const int64_t bi = c.stride_c > 0 ? rel / c.stride_c : 0;
      const int64_t rem = rel - bi * c.stride_c;
      covered = bi < c.batch && rem / c.ldc < c.m && rem % c.ldc < c.n;
    }
    if (covered) continue;
    const size_t off = static_cast<size_t>(lin) * es;
    if (std::memcmp(res + off, before + off, es) != 0) {
      ++row.gap_writes;
      keep(3, "gap", 0, lin, 0, load_as_double(t, res + off), 0, 0, 0);
    }
  }
}

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

StatusOr<FaReport> run_false_alarm(const FaOptions& o, FaBackend& backend) {
  ASSAY_ASSIGN_OR_RETURN(const std::vector<int> sel, fa_select(o));
  if (o.cases < 0 || o.first_case < 0) return invalid_argument("--cases and --first-case must be >= 0");
  if (o.max_k < 1 || o.max_mn < 1) return invalid_argument("--max-k and --max-mn must be >= 1");
  const int threads = o.threads > 0 ? o.threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  Pool pool(threads);
  FaReport report;
  report.configs = sel;
  report.not_run_reason.assign(fa_configs().size(), "");
  report.device = backend.describe();
  const auto t_start = std::chrono::steady_clock::now();
  int64_t printed = 0, done = 0, next_progress = 0;
  std::vector<FaTable> tables(static_cast<size_t>(threads));
  std::vector<Scratch> scratch(static_cast<size_t>(threads));

  while (done < o.cases) {
    FaBatch batch;
    size_t estimate = 0;
    while (done < o.cases && static_cast<int64_t>(batch.cases.size()) < std::max<int64_t>(o.batch_cases, 1)) {
      FaCase c = fa_make_case(o, sel, o.first_case + done);
      const FaConfig& cfg = c.cfg();
      const size_t need = static_cast<size_t>(fa_desc_a(c).extent()) * dtype_size(cfg.a) +
                          static_cast<size_t>(fa_desc_b(c).extent()) * dtype_size(cfg.b) +
                          static_cast<size_t>(fa_desc_c(c).extent()) * dtype_size(cfg.out) +
                          static_cast<size_t>(c.batch * c.m * c.n) * 16 + 4 * 256;
      if (!batch.cases.empty() && estimate + need > static_cast<size_t>(o.batch_bytes)) break;
      batch.cases.push_back(c);
      estimate += need;
      ++done;
    }
    const size_t n = batch.cases.size();
    fa_layout(batch);
    ASSAY_RETURN_IF_ERROR(backend.reserve(batch.bytes, batch.bytes - batch.out_begin, &batch.image, &batch.result));
    batch.status.assign(n, ok_status());

    auto t0 = std::chrono::steady_clock::now();
    pool.start(static_cast<int64_t>(n), [&](int64_t i, int) { fa_materialize(batch, static_cast<size_t>(i)); });
    pool.wait();
    report.seconds_inputs += since(t0);

    // References on the pool (longest first) while the backend runs the batch.
    std::vector<CaseRef> refs(n);
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(), [&](size_t x, size_t y) {
      const FaCase &a = batch.cases[x], &b = batch.cases[y];
      return a.batch * a.m * a.n * a.k > b.batch * b.m * b.n * b.k;
    });
    t0 = std::chrono::steady_clock::now();
    pool.start(static_cast<int64_t>(n), [&](int64_t i, int w) {
      const size_t ci = order[static_cast<size_t>(i)];
      compute_reference(batch, ci, refs[ci], scratch[static_cast<size_t>(w)]);
    });
    const Status run = backend.run(batch);
    report.seconds_vendor += since(t0);
    pool.wait();
    report.seconds_reference += since(t0);
    if (!run.ok()) return run;

    t0 = std::chrono::steady_clock::now();
    std::vector<CaseOutcome> outcomes(n);
    pool.start(static_cast<int64_t>(n), [&](int64_t i, int w) {
      judge_case(batch, static_cast<size_t>(i), refs[static_cast<size_t>(i)], o.plant, tables[static_cast<size_t>(w)],
                 outcomes[static_cast<size_t>(i)]);
    });
    pool.wait();
    report.seconds_judge += since(t0);

    for (size_t i = 0; i < n; ++i) {
      if (!batch.status[i].ok() && report.not_run_reason[static_cast<size_t>(batch.cases[i].config)].empty())
        report.not_run_reason[static_cast<size_t>(batch.cases[i].config)] = batch.status[i].message();
      report.planted += outcomes[i].planted ? 1 : 0;
      for (FaFailure& f : outcomes[i].failures) {
        if (!o.quiet && printed < o.max_print) {
          fmt::print("{}\n", fa_failure_line(f, o));
          ++printed;
        }
        if (report.failures.size() < 1000) report.failures.push_back(std::move(f));
      }
    }
    if (!o.quiet && done >= next_progress) {
      FaTable sum;
      for (const FaTable& t : tables) sum.merge(t);
      const FaRow tot = sum.total();
      fmt::print("false-alarm: {}/{} cases, {} failures, {} not run, {:.1f} s\n", done, o.cases, tot.failures(),
                 tot.not_run, since(t_start));
      std::fflush(stdout);
      next_progress = done + std::max<int64_t>(o.cases / 10, 1);
    }
  }
  for (const FaTable& t : tables) report.table.merge(t);
  std::stable_sort(report.failures.begin(), report.failures.end(),
                   [](const FaFailure& a, const FaFailure& b) { return a.c.index < b.c.index; });
  report.seconds = since(t_start);
  report.cases = report.table.total().cases;
  return report;
}

}  // namespace assay

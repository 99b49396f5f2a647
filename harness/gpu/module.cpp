// Driver-API kernel loading (module.h). The driver is reached through
// cudaGetDriverEntryPointByVersion, never linked: without a driver the
// program still starts and every call here fails with one line.
#include "harness/gpu/module.h"

#include <cuda.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>

#include <fmt/format.h>

namespace assay::gpu {
namespace {

// The error code a cudaError_t-returning launcher reports for the last
// failure on this thread (launch_or_report); set wherever an error is made.
thread_local cudaError_t t_last_code = cudaSuccess;

Status fail(Status s, cudaError_t code) {
  t_last_code = code;
  return s;
}

// ---- the driver, through the runtime's entry-point query ------------------------
struct Driver {
  PFN_cuInit_v2000 init = nullptr;
  PFN_cuGetErrorName_v6000 error_name = nullptr;
  PFN_cuGetErrorString_v6000 error_string = nullptr;
  PFN_cuCtxGetCurrent_v4000 ctx_get_current = nullptr;
  PFN_cuModuleLoadDataEx_v2010 module_load_data_ex = nullptr;
  PFN_cuModuleUnload_v2000 module_unload = nullptr;
  PFN_cuModuleGetFunction_v2000 module_get_function = nullptr;
  PFN_cuFuncSetAttribute_v9000 func_set_attribute = nullptr;
  PFN_cuLaunchKernel_v4000 launch_kernel = nullptr;
  // Optional: drivers older than 12.3 / 12.4 lack them; used for better errors.
  PFN_cuModuleGetFunctionCount_v12040 module_get_function_count = nullptr;
  PFN_cuModuleEnumerateFunctions_v12040 module_enumerate_functions = nullptr;
  PFN_cuFuncGetName_v12030 func_get_name = nullptr;
  PFN_cuFuncGetParamInfo_v12040 func_get_param_info = nullptr;
};

// `version` is the ABI version of the typedef (the _vNNNNN suffix).
template <typename Fn>
Status entry_point(const char* symbol, unsigned version, Fn& out, bool required) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t e = cudaGetDriverEntryPointByVersion(symbol, &p, version, cudaEnableDefault, &q);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return fail(unavailable(fmt::format("CUDA driver unavailable: cudaGetDriverEntryPointByVersion({}) failed: {} ({})",
                                        symbol, cudaGetErrorName(e), cudaGetErrorString(e))),
                e);
  }
  if (q != cudaDriverEntryPointSuccess || p == nullptr) {
    if (!required) return ok_status();
    return fail(unavailable(fmt::format("CUDA driver too old: it has no {} (ABI {})", symbol, version)),
                cudaErrorInsufficientDriver);
  }
  out = reinterpret_cast<Fn>(p);
  return ok_status();
}

StatusOr<Driver> load_driver() {
  Driver d;
  ASSAY_RETURN_IF_ERROR(entry_point("cuInit", 2000, d.init, true));
  ASSAY_RETURN_IF_ERROR(entry_point("cuGetErrorName", 6000, d.error_name, true));
  ASSAY_RETURN_IF_ERROR(entry_point("cuGetErrorString", 6000, d.error_string, true));
  ASSAY_RETURN_IF_ERROR(entry_point("cuCtxGetCurrent", 4000, d.ctx_get_current, true));
  ASSAY_RETURN_IF_ERROR(entry_point("cuModuleLoadDataEx", 2010, d.module_load_data_ex, true));
  ASSAY_RETURN_IF_ERROR(entry_point("cuModuleUnload", 2000, d.module_unload, true));
  ASSAY_RETURN_IF_ERROR(entry_point("cuModuleGetFunction", 2000, d.module_get_function, true));
  ASSAY_RETURN_IF_ERROR(entry_point("cuFuncSetAttribute", 9000, d.func_set_attribute, true));
  ASSAY_RETURN_IF_ERROR(entry_point("cuLaunchKernel", 4000, d.launch_kernel, true));
  ASSAY_RETURN_IF_ERROR(entry_point("cuModuleGetFunctionCount", 12040, d.module_get_function_count, false));
  ASSAY_RETURN_IF_ERROR(entry_point("cuModuleEnumerateFunctions", 12040, d.module_enumerate_functions, false));
  ASSAY_RETURN_IF_ERROR(entry_point("cuFuncGetName", 12030, d.func_get_name, false));
  ASSAY_RETURN_IF_ERROR(entry_point("cuFuncGetParamInfo", 12040, d.func_get_param_info, false));
  if (const CUresult r = d.init(0); r != CUDA_SUCCESS) {
    const char* name = nullptr;
    const char* text = nullptr;
    d.error_name(r, &name);
    d.error_string(r, &text);
    return fail(unavailable(fmt::format("CUDA driver unavailable: cuInit failed: {} ({})", name ? name : "?",
                                        text ? text : "?")),
                static_cast<cudaError_t>(r));
  }
  return d;
}

// Looked up once per process; a failure is kept (and returned, with its
// code, every time).
const StatusOr<Driver>& driver() {
  struct Loaded {
    StatusOr<Driver> driver;
    cudaError_t code;
  };
  static const Loaded loaded = [] {
    t_last_code = cudaSuccess;
    StatusOr<Driver> d = load_driver();
    return Loaded{std::move(d), t_last_code};
  }();
  if (!loaded.driver.ok()) t_last_code = loaded.code != cudaSuccess ? loaded.code : cudaErrorInsufficientDriver;
  return loaded.driver;
}

// "what: call failed: CUDA_ERROR_X (text)", carrying the driver's code
// (CUresult and cudaError_t share numbering for the codes both have).
Status cu_error(const Driver& d, CUresult r, const char* call, const std::string& what,
                StatusCode code = StatusCode::kInternal) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (d.error_name(r, &name) != CUDA_SUCCESS) name = nullptr;
  if (d.error_string(r, &text) != CUDA_SUCCESS) text = nullptr;
  return fail(Status(code, fmt::format("{}: {} failed: {} ({})", what, call,
                                       name ? name : fmt::format("CUresult {}", static_cast<int>(r)),
                                       text ? text : "no description")),
              static_cast<cudaError_t>(r));
}

// The calling thread's current context; if none is current, the runtime's
// primary context of the current device is made current (cudaFree(0)).
StatusOr<CUcontext> current_context(const Driver& d, const std::string& what) {
  CUcontext ctx = nullptr;
  if (CUresult r = d.ctx_get_current(&ctx); r != CUDA_SUCCESS) return cu_error(d, r, "cuCtxGetCurrent", what);
  if (ctx == nullptr) {
    if (const cudaError_t e = cudaFree(nullptr); e != cudaSuccess) {
      (void)cudaGetLastError();
      return fail(internal_error(fmt::format("{}: no CUDA context (cudaFree(0) failed: {} ({}))", what,
                                             cudaGetErrorName(e), cudaGetErrorString(e))),
                  e);
    }
    if (CUresult r = d.ctx_get_current(&ctx); r != CUDA_SUCCESS) return cu_error(d, r, "cuCtxGetCurrent", what);
    if (ctx == nullptr)
      return fail(internal_error(fmt::format("{}: no current CUDA context after the runtime initialised", what)),
                  cudaErrorDeviceUninitialized);
  }
  return ctx;
}

std::string one_line(std::string s, size_t max_len = 400) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ';';
  while (!s.empty() && (s.back() == ';' || s.back() == ' ' || s.back() == '\0')) s.pop_back();
  if (s.size() > max_len) s = s.substr(0, max_len) + "...";
  return s;
}

std::string image_name(const std::string& path) {
  return fmt::format("kernel image '{}'", path);
}

// ---- signatures -------------------------------------------------------------------
std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool is_identifier(std::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

std::optional<ArgKind> scalar_kind(const std::string& type) {
  static const std::map<std::string, ArgKind> kTypes = {
      {"bool", ArgKind::kBool},         {"int", ArgKind::kI32},
      {"signed", ArgKind::kI32},        {"signed int", ArgKind::kI32},
      {"int32_t", ArgKind::kI32},       {"i32", ArgKind::kI32},
      {"unsigned", ArgKind::kU32},      {"unsigned int", ArgKind::kU32},
      {"uint32_t", ArgKind::kU32},      {"u32", ArgKind::kU32},
      {"long", ArgKind::kI64},          {"long int", ArgKind::kI64},
      {"long long", ArgKind::kI64},     {"long long int", ArgKind::kI64},
      {"int64_t", ArgKind::kI64},       {"ptrdiff_t", ArgKind::kI64},
      {"intptr_t", ArgKind::kI64},      {"i64", ArgKind::kI64},
      {"unsigned long", ArgKind::kU64}, {"unsigned long long", ArgKind::kU64},
      {"uint64_t", ArgKind::kU64},      {"size_t", ArgKind::kU64},
      {"uintptr_t", ArgKind::kU64},     {"u64", ArgKind::kU64},
      {"float", ArgKind::kF32},         {"f32", ArgKind::kF32},
      {"double", ArgKind::kF64},        {"f64", ArgKind::kF64},
  };
  auto it = kTypes.find(type);
  if (it == kTypes.end()) return std::nullopt;
  return it->second;
}

StatusOr<KernelArg> parse_param(std::string_view text, size_t index) {
  std::string_view p = trim(text);
  const auto where = [&] { return fmt::format("signature parameter {} '{}'", index, std::string(p)); };
  bool null_pointer = false;
  if (const size_t eq = p.find('='); eq != std::string_view::npos) {
    if (trim(p.substr(eq + 1)) != "null")
      return invalid_argument(fmt::format("{}: the only default allowed is '= null' (an unused pointer)", where()));
    null_pointer = true;
    p = trim(p.substr(0, eq));
  }
  // Tokens: identifiers (with ::) and '*'.
  std::vector<std::string> tokens;
  bool pointer = false;
  for (size_t i = 0; i < p.size();) {
    const char c = p[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (c == '*') {
      pointer = true;
      tokens.emplace_back("*");
      ++i;
    } else if (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':') {
      size_t j = i;
      while (j < p.size() && (std::isalnum(static_cast<unsigned char>(p[j])) || p[j] == '_' || p[j] == ':')) ++j;
      tokens.emplace_back(p.substr(i, j - i));
      i = j;
    } else {
      return invalid_argument(fmt::format("{}: unexpected character '{}'", where(), c));
    }
  }
  if (tokens.size() < 2 || !is_identifier(tokens.back()))
    return invalid_argument(fmt::format("{}: expected '<type> <name>'", where()));
  KernelArg arg;
  arg.name = tokens.back();
  tokens.pop_back();
  std::string type;
  for (std::string t : tokens) {
    if (t.rfind("std::", 0) == 0) t = t.substr(5);
    if (t == "const" || t == "volatile" || t == "__restrict__" || t == "__restrict" || t == "restrict" || t == "*")
      continue;
    type += (type.empty() ? "" : " ") + t;
  }
  if (pointer) {
    arg.kind = null_pointer ? ArgKind::kNullPointer : ArgKind::kPointer;
    return arg;
  }
  if (null_pointer) return invalid_argument(fmt::format("{}: '= null' is for pointer parameters only", where()));
  const auto kind = scalar_kind(type);
  if (!kind)
    return invalid_argument(
        fmt::format("{}: unsupported type '{}' (pointers, bool, int32/uint32, int64/uint64, "
                    "float, double)",
                    where(), type));
  arg.kind = *kind;
  return arg;
}

std::string names_of(const std::map<std::string, const void*>& m) {
  std::string s;
  for (const auto& [k, v] : m) s += (s.empty() ? "" : ", ") + k;
  return s.empty() ? "none" : s;
}

std::string keys_of(const nlohmann::json& j) {
  std::string s;
  if (j.is_object())
    for (auto it = j.begin(); it != j.end(); ++it) s += (s.empty() ? "" : ", ") + it.key();
  return s.empty() ? "none" : s;
}

template <typename T>
void put(std::array<unsigned char, 8>& slot, T v) {
  static_assert(sizeof(T) <= 8);
  std::memcpy(slot.data(), &v, sizeof(T));
}

// An integer scalar of kind `k` from `v`: JSON integers (and booleans as 0/1)
// only, range-checked; a float with an integral value is accepted too.
Status put_integer(std::array<unsigned char, 8>& slot, ArgKind k, const nlohmann::json& v, const std::string& where) {
  __int128 x = 0;
  if (v.is_boolean()) {
    x = v.get<bool>() ? 1 : 0;
  } else if (v.is_number_unsigned()) {
    x = v.get<uint64_t>();
  } else if (v.is_number_integer()) {
    x = v.get<int64_t>();
  } else if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!std::isfinite(d) || d != std::trunc(d) || std::fabs(d) > 9.3e18)
      return invalid_argument(fmt::format("{}: {} is not an integer", where, v.dump()));
    x = static_cast<__int128>(d);
  } else {
    return invalid_argument(fmt::format("{}: {} is not a number", where, v.dump()));
  }
  __int128 lo = 0, hi = 0;
  switch (k) {
    case ArgKind::kBool:
      lo = 0, hi = 1;
      break;
    case ArgKind::kI32:
      lo = std::numeric_limits<int32_t>::min(), hi = std::numeric_limits<int32_t>::max();
      break;
    case ArgKind::kU32:
      lo = 0, hi = std::numeric_limits<uint32_t>::max();
      break;
    case ArgKind::kI64:
      lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
      break;
    case ArgKind::kU64:
      lo = 0, hi = std::numeric_limits<uint64_t>::max();
      break;
    default:
      return internal_error("put_integer: not an integer kind");
  }
  if (x < lo || x > hi)
    return invalid_argument(fmt::format("{}: {} is out of range for {}", where, v.dump(), arg_kind_name(k)));
  switch (k) {
    case ArgKind::kBool:
      put(slot, static_cast<bool>(x));
      break;
    case ArgKind::kI32:
      put(slot, static_cast<int32_t>(x));
      break;
    case ArgKind::kU32:
      put(slot, static_cast<uint32_t>(x));
      break;
    case ArgKind::kI64:
      put(slot, static_cast<int64_t>(x));
      break;
    case ArgKind::kU64:
      put(slot, static_cast<uint64_t>(x));
      break;
    default:
      break;
  }
  return ok_status();
}

}  // namespace

// ---- formats and images ---------------------------------------------------------------
std::string_view image_format_name(ImageFormat f) {
  switch (f) {
    case ImageFormat::kAuto:
      return "auto";
    case ImageFormat::kCubin:
      return "cubin";
    case ImageFormat::kPtx:
      return "PTX";
    case ImageFormat::kFatbin:
      return "fatbin";
  }
  return "?";
}

StatusOr<ImageFormat> identify_kernel_image(std::string_view b, const std::string& where) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(b[i]); };
  if (b.size() < 4)
    return invalid_argument(fmt::format("{}: {} bytes: too short for a cubin, fatbin or PTX file", where, b.size()));
  if (byte(0) == 0x7F && b.substr(1, 3) == "ELF") {
    // e_machine (offset 18, little-endian): EM_CUDA = 190.
    if (b.size() < 20) return invalid_argument(fmt::format("{}: truncated ELF header", where));
    const unsigned machine = byte(18) | (byte(19) << 8);
    if (machine != 190)
      return invalid_argument(
          fmt::format("{}: an ELF file for machine {}, not a CUDA cubin (EM_CUDA = 190); "
                      "a host object or library?",
                      where, machine));
    return ImageFormat::kCubin;
  }
  // Fatbinary header magic 0xBA55ED50, little-endian.
  if (byte(0) == 0x50 && byte(1) == 0xED && byte(2) == 0x55 && byte(3) == 0xBA) return ImageFormat::kFatbin;
  // PTX: text (no NUL, no control bytes other than whitespace) with a .version directive.
  const std::string_view head = b.substr(0, 1 << 16);
  const bool text = std::all_of(head.begin(), head.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u >= 0x20 || u == '\n' || u == '\r' || u == '\t' || u == '\f';
  });
  if (text && head.find(".version") != std::string_view::npos) return ImageFormat::kPtx;
  std::string first;
  for (size_t i = 0; i < std::min<size_t>(8, b.size()); ++i) first += fmt::format("{}{:02x}", i ? " " : "", byte(i));
  return invalid_argument(fmt::format("{}: not a cubin (ELF), fatbin or PTX file (starts with bytes {}{})", where,
                                      first, text ? "; text without a .version directive" : ""));
}

StatusOr<KernelImage> read_kernel_image(const std::string& path, ImageFormat expected) {
  namespace fs = std::filesystem;
  const std::string where = image_name(path);
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (ec || !fs::exists(st)) return fail(not_found(fmt::format("{}: no such file", where)), cudaErrorFileNotFound);
  if (fs::is_directory(st))
    return fail(invalid_argument(fmt::format("{}: is a directory, not a file", where)), cudaErrorFileNotFound);
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return fail(not_found(fmt::format("{}: cannot open: {}", where, std::strerror(errno))), cudaErrorFileNotFound);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return fail(internal_error(fmt::format("{}: read error", where)), cudaErrorFileNotFound);
  KernelImage img;
  img.path = path;
  img.bytes = ss.str();
  auto f = identify_kernel_image(img.bytes, where);
  if (!f.ok()) return fail(f.status(), cudaErrorInvalidKernelImage);
  if (expected != ImageFormat::kAuto && *f != expected)
    return fail(invalid_argument(fmt::format("{}: holds {}, expected {}", where, image_format_name(*f),
                                             image_format_name(expected))),
                cudaErrorInvalidKernelImage);
  img.format = *f;
  if (img.format == ImageFormat::kPtx) img.bytes.push_back('\0');  // the driver reads PTX as a C string
  return img;
}

// ---- signatures and arguments ---------------------------------------------------------
std::string_view arg_kind_name(ArgKind k) {
  switch (k) {
    case ArgKind::kPointer:
      return "pointer";
    case ArgKind::kNullPointer:
      return "null pointer";
    case ArgKind::kBool:
      return "bool";
    case ArgKind::kI32:
      return "int32";
    case ArgKind::kU32:
      return "uint32";
    case ArgKind::kI64:
      return "int64";
    case ArgKind::kU64:
      return "uint64";
    case ArgKind::kF32:
      return "float";
    case ArgKind::kF64:
      return "double";
  }
  return "?";
}

size_t arg_size(ArgKind k) {
  switch (k) {
    case ArgKind::kBool:
      return 1;
    case ArgKind::kI32:
    case ArgKind::kU32:
    case ArgKind::kF32:
      return 4;
    default:
      return 8;
  }
}

StatusOr<std::vector<KernelArg>> parse_signature(std::string_view signature) {
  std::vector<KernelArg> out;
  const std::string_view s = trim(signature);
  if (s.empty() || s == "void") return out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == ',') {
      ASSAY_ASSIGN_OR_RETURN(KernelArg a, parse_param(s.substr(start, i - start), out.size()));
      out.push_back(std::move(a));
      start = i + 1;
    }
  }
  return out;
}

LaunchDims LaunchDims::cover_2d(int64_t cols, int64_t rows, uint32_t block_x, uint32_t block_y, uint32_t shared_bytes) {
  const auto blocks = [](int64_t extent, uint32_t b, int64_t limit) {
    if (extent <= 0 || b == 0) return uint32_t{0};
    return static_cast<uint32_t>(std::min((extent + b - 1) / b, limit));
  };
  LaunchDims d;
  d.grid = {blocks(cols, block_x, 2147483647), blocks(rows, block_y, 65535), 1};
  d.block = {block_x, block_y, 1};
  d.shared_bytes = shared_bytes;
  return d;
}

StatusOr<PackedArgs> pack_args(const std::vector<KernelArg>& signature, const LaunchBindings& b) {
  PackedArgs out;
  out.storage.assign(signature.size(), {});  // sized first: pointers into it stay valid
  out.pointers.resize(signature.size());
  for (size_t i = 0; i < signature.size(); ++i) {
    const KernelArg& a = signature[i];
    auto& slot = out.storage[i];
    out.pointers[i] = slot.data();
    const std::string where = fmt::format("kernel parameter {} '{}' ({})", i, a.name, arg_kind_name(a.kind));
    switch (a.kind) {
      case ArgKind::kPointer: {
        auto it = b.tensors.find(a.name);
        if (it == b.tensors.end())
          return fail(invalid_argument(fmt::format("{}: no tensor '{}' in the launch (tensors: {})", where, a.name,
                                                   names_of(b.tensors))),
                      cudaErrorInvalidValue);
        put(slot, it->second);
        break;
      }
      case ArgKind::kNullPointer:
        put(slot, static_cast<const void*>(nullptr));
        break;
      case ArgKind::kF32:
      case ArgKind::kF64: {
        if (!b.scalars.is_object() || !b.scalars.contains(a.name))
          return fail(invalid_argument(fmt::format("{}: no scalar '{}' in the launch (scalars: {})", where, a.name,
                                                   keys_of(b.scalars))),
                      cudaErrorInvalidValue);
        const nlohmann::json& v = b.scalars.at(a.name);
        if (!v.is_number())
          return fail(invalid_argument(fmt::format("{}: {} is not a number", where, v.dump())), cudaErrorInvalidValue);
        const double d = v.get<double>();
        if (a.kind == ArgKind::kF32)
          put(slot, static_cast<float>(d));
        else
          put(slot, d);
        break;
      }
      default: {
        if (!b.scalars.is_object() || !b.scalars.contains(a.name))
          return fail(invalid_argument(fmt::format("{}: no scalar '{}' in the launch (scalars: {})", where, a.name,
                                                   keys_of(b.scalars))),
                      cudaErrorInvalidValue);
        if (Status s = put_integer(slot, a.kind, b.scalars.at(a.name), where); !s.ok())
          return fail(s, cudaErrorInvalidValue);
      }
    }
  }
  return out;
}

// ---- modules --------------------------------------------------------------------------
Status driver_available() {
  const auto& d = driver();
  return d.ok() ? ok_status() : d.status();
}

StatusOr<std::unique_ptr<KernelModule>> KernelModule::load(const KernelImage& image) {
  const std::string where = image_name(image.path);
  const auto& dr = driver();
  if (!dr.ok())
    return fail(Status(dr.status().code(), fmt::format("{}: {}", where, dr.status().message())), t_last_code);
  const Driver& d = *dr;
  ASSAY_RETURN_IF_ERROR(current_context(d, where).status());
  // The JIT's error log says which PTX line it rejects; keep its first lines.
  std::string log(8192, '\0');
  CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* vals[] = {log.data(), reinterpret_cast<void*>(static_cast<uintptr_t>(log.size()))};
  CUmodule mod = nullptr;
  const CUresult r = d.module_load_data_ex(&mod, image.bytes.data(), 2, opts, vals);
  if (r != CUDA_SUCCESS) {
    log.resize(std::strlen(log.c_str()));
    const bool bad_image = r == CUDA_ERROR_INVALID_IMAGE || r == CUDA_ERROR_INVALID_PTX ||
                           r == CUDA_ERROR_NO_BINARY_FOR_GPU || r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION ||
                           r == CUDA_ERROR_INVALID_SOURCE;
    Status s = cu_error(d, r, fmt::format("cuModuleLoadDataEx ({})", image_format_name(image.format)).c_str(), where,
                        bad_image ? StatusCode::kInvalidArgument : StatusCode::kInternal);
    if (!log.empty()) s = Status(s.code(), one_line(s.message() + ": " + log));
    if (r == CUDA_ERROR_NO_BINARY_FOR_GPU)
      s = Status(s.code(), s.message() + "; build the image for this GPU's architecture, or ship PTX");
    return fail(s, static_cast<cudaError_t>(r));
  }
  std::unique_ptr<KernelModule> m(new KernelModule());
  m->module_ = mod;
  m->path_ = image.path;
  return m;
}

KernelModule::~KernelModule() {
  if (module_ == nullptr) return;
  const auto& d = driver();
  if (d.ok()) (void)d->module_unload(static_cast<CUmodule>(module_));
}

std::vector<std::string> KernelModule::function_names() const {
  std::vector<std::string> out;
  const auto& dr = driver();
  if (!dr.ok()) return out;
  const Driver& d = *dr;
  if (!d.module_get_function_count || !d.module_enumerate_functions || !d.func_get_name) return out;
  unsigned n = 0;
  if (d.module_get_function_count(&n, static_cast<CUmodule>(module_)) != CUDA_SUCCESS || n == 0) return out;
  std::vector<CUfunction> fns(n);
  if (d.module_enumerate_functions(fns.data(), n, static_cast<CUmodule>(module_)) != CUDA_SUCCESS) return out;
  for (CUfunction f : fns) {
    const char* name = nullptr;
    if (d.func_get_name(&name, f) == CUDA_SUCCESS && name != nullptr) out.emplace_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

StatusOr<void*> KernelModule::function(const std::string& symbol) const {
  const auto& dr = driver();
  if (!dr.ok()) return dr.status();
  const Driver& d = *dr;
  CUfunction f = nullptr;
  const CUresult r = d.module_get_function(&f, static_cast<CUmodule>(module_), symbol.c_str());
  if (r == CUDA_ERROR_NOT_FOUND) {
    std::string held;
    for (const auto& n : function_names()) held += (held.empty() ? "" : ", ") + n;
    return fail(not_found(fmt::format("{} has no kernel '{}' ({}); a C++ kernel needs extern \"C\" or its mangled "
                                      "name",
                                      image_name(path_), symbol,
                                      held.empty() ? "the driver cannot list its kernels" : "it holds: " + held)),
                cudaErrorSymbolNotFound);
  }
  if (r != CUDA_SUCCESS)
    return cu_error(d, r, "cuModuleGetFunction", fmt::format("{}: kernel '{}'", image_name(path_), symbol));
  return static_cast<void*>(f);
}

Status KernelModule::check_signature(void* function, const std::string& symbol,
                                     const std::vector<KernelArg>& signature) const {
  const auto& dr = driver();
  if (!dr.ok()) return dr.status();
  const Driver& d = *dr;
  if (!d.func_get_param_info) return ok_status();  // driver older than 12.4: nothing to compare with
  const auto f = static_cast<CUfunction>(function);
  std::vector<size_t> sizes;
  for (size_t i = 0;; ++i) {
    size_t offset = 0, size = 0;
    const CUresult r = d.func_get_param_info(f, i, &offset, &size);
    if (r == CUDA_ERROR_INVALID_VALUE) break;   // past the last parameter
    if (r != CUDA_SUCCESS) return ok_status();  // not supported for this function: skip the check
    sizes.push_back(size);
    if (i > 4096) break;
  }
  const std::string where = fmt::format("kernel '{}' in {}", symbol, image_name(path_));
  if (sizes.size() != signature.size())
    return fail(invalid_argument(fmt::format("{}: the kernel takes {} parameters, the spec's signature has {}", where,
                                             sizes.size(), signature.size())),
                cudaErrorInvalidValue);
  for (size_t i = 0; i < sizes.size(); ++i)
    if (sizes[i] != arg_size(signature[i].kind))
      return fail(invalid_argument(fmt::format("{}: parameter {} ('{}', {}) is {} bytes in the kernel, {} in the "
                                               "signature",
                                               where, i, signature[i].name, arg_kind_name(signature[i].kind), sizes[i],
                                               arg_size(signature[i].kind))),
                  cudaErrorInvalidValue);
  return ok_status();
}

Status launch_function(void* function, const std::string& what, const std::vector<KernelArg>& signature,
                       const LaunchDimsFn& dims, const LaunchBindings& bindings, cudaStream_t stream) {
  const auto& dr = driver();
  if (!dr.ok()) return dr.status();
  const Driver& d = *dr;
  ASSAY_ASSIGN_OR_RETURN(PackedArgs args, pack_args(signature, bindings));
  if (!dims) return fail(invalid_argument(fmt::format("{}: no launch geometry given", what)), cudaErrorInvalidValue);
  StatusOr<LaunchDims> g = dims(bindings.scalars);
  if (!g.ok())
    return fail(Status(g.status().code(), fmt::format("{}: launch geometry: {}", what, g.status().message())),
                cudaErrorInvalidConfiguration);
  const LaunchDims& l = *g;
  if (l.grid[0] == 0 || l.grid[1] == 0 || l.grid[2] == 0) return ok_status();  // empty output: nothing to launch
  if (l.block[0] == 0 || l.block[1] == 0 || l.block[2] == 0)
    return fail(
        invalid_argument(fmt::format("{}: block {}x{}x{} has a zero extent", what, l.block[0], l.block[1], l.block[2])),
        cudaErrorInvalidConfiguration);
  const auto f = static_cast<CUfunction>(function);
  if (l.shared_bytes > 48 * 1024) {
    // Above 48 KiB of dynamic shared memory a kernel must opt in.
    if (CUresult r =
            d.func_set_attribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(l.shared_bytes));
        r != CUDA_SUCCESS)
      return cu_error(d, r, "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)", what);
  }
  const CUresult r = d.launch_kernel(f, l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1], l.block[2],
                                     l.shared_bytes, reinterpret_cast<CUstream>(stream), args.pointers.data(), nullptr);
  if (r != CUDA_SUCCESS)
    return cu_error(d, r, "cuLaunchKernel",
                    fmt::format("{} (grid {}x{}x{}, block {}x{}x{}, {} B shared)", what, l.grid[0], l.grid[1],
                                l.grid[2], l.block[0], l.block[1], l.block[2], l.shared_bytes));
  return ok_status();
}

// ---- DriverKernel -----------------------------------------------------------------------
struct DriverKernel::State {
  std::string path, symbol;
  std::vector<KernelArg> signature;
  Status signature_status;  // a malformed text signature: every launch fails with it
  LaunchDimsFn dims;
  ImageFormat format = ImageFormat::kAuto;

  std::mutex mu;
  std::optional<StatusOr<KernelImage>> image;  // read once
  struct Loaded {
    StatusOr<void*> function;  // or why there is none
    cudaError_t code;          // the failure's code, for launch_or_report
  };
  std::map<CUcontext, Loaded> functions;  // per context, loaded once
  std::set<std::string> reported;         // messages already printed by launch_or_report

  std::string what() const { return fmt::format("kernel '{}' in {}", symbol, image_name(path)); }
};

DriverKernel::DriverKernel(std::string path, std::string symbol, std::vector<KernelArg> signature, LaunchDimsFn dims,
                           ImageFormat format)
    : state_(std::make_shared<State>()) {
  state_->path = std::move(path);
  state_->symbol = std::move(symbol);
  state_->signature = std::move(signature);
  state_->dims = std::move(dims);
  state_->format = format;
}

DriverKernel::DriverKernel(std::string path, std::string symbol, std::string_view signature, LaunchDimsFn dims,
                           ImageFormat format)
    : DriverKernel(std::move(path), std::move(symbol), std::vector<KernelArg>{}, std::move(dims), format) {
  auto sig = parse_signature(signature);
  if (sig.ok())
    state_->signature = std::move(sig).value();
  else
    state_->signature_status = invalid_argument(fmt::format("{}: {}", state_->what(), sig.status().message()));
}

const std::string& DriverKernel::path() const {
  return state_->path;
}
const std::string& DriverKernel::symbol() const {
  return state_->symbol;
}

Status DriverKernel::check_offline() const {
  if (!state_->signature_status.ok()) return fail(state_->signature_status, cudaErrorInvalidValue);
  return read_kernel_image(state_->path, state_->format).status();
}

Status DriverKernel::launch(const LaunchBindings& bindings, cudaStream_t stream) const {
  t_last_code = cudaSuccess;
  State& s = *state_;
  if (!s.signature_status.ok()) return fail(s.signature_status, cudaErrorInvalidValue);
  const auto& dr = driver();
  if (!dr.ok())
    return fail(Status(dr.status().code(), fmt::format("{}: {}", s.what(), dr.status().message())), t_last_code);
  ASSAY_ASSIGN_OR_RETURN(CUcontext ctx, current_context(*dr, s.what()));
  void* fn = nullptr;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.functions.find(ctx);
    if (it == s.functions.end()) {
      if (!s.image) s.image = read_kernel_image(s.path, s.format);
      t_last_code = cudaSuccess;
      StatusOr<void*> f = [&]() -> StatusOr<void*> {
        if (!s.image->ok())
          return fail(s.image->status(), s.image->status().code() == StatusCode::kNotFound
                                             ? cudaErrorFileNotFound
                                             : cudaErrorInvalidKernelImage);
        ASSAY_ASSIGN_OR_RETURN(std::unique_ptr<KernelModule> m, KernelModule::load(**s.image));
        ASSAY_ASSIGN_OR_RETURN(void* found, m->function(s.symbol));
        ASSAY_RETURN_IF_ERROR(m->check_signature(found, s.symbol, s.signature));
        // The module lives as long as its context: unloading it at exit would
        // race the runtime's own teardown of the primary context.
        (void)m.release();
        return found;
      }();
      const cudaError_t code = f.ok() ? cudaSuccess : (t_last_code != cudaSuccess ? t_last_code : cudaErrorUnknown);
      it = s.functions.emplace(ctx, State::Loaded{std::move(f), code}).first;
    }
    if (!it->second.function.ok()) return fail(it->second.function.status(), it->second.code);
    fn = *it->second.function;
  }
  return launch_function(fn, s.what(), s.signature, s.dims, bindings, stream);
}

cudaError_t DriverKernel::launch_or_report(const LaunchBindings& bindings, cudaStream_t stream) const {
  const Status st = launch(bindings, stream);
  if (st.ok()) return cudaSuccess;
  const cudaError_t code = t_last_code != cudaSuccess ? t_last_code : cudaErrorUnknown;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->reported.insert(st.message()).second) std::fprintf(stderr, "assay: error: %s\n", st.message().c_str());
  }
  return code;
}

}  // namespace assay::gpu

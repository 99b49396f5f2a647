// Kernels built elsewhere: a cubin, PTX or fatbin file (nvcc -cubin/-ptx/
// -fatbin, an ahead-of-time compiled Triton kernel, NVRTC output) loaded
// through the CUDA driver API and launched with cuLaunchKernel. The spec
// states the launch signature (one KernelArg per kernel parameter, bound by
// name to a tensor or to a scalar) and how grid, block and dynamic shared
// memory follow from the scalars.
//
// The driver is reached through cudaGetDriverEntryPointByVersion, not by
// linking libcuda: an executable that uses this still starts (and runs its
// CPU tests) on a machine without a driver, and every driver call fails
// there with one line that says so.
//
// Errors are one line and name the file: a missing file, a file that is not
// a cubin / PTX / fatbin, a PTX JIT error (first lines of the JIT log), a
// missing kernel symbol (with the kernels the image does hold), a signature
// whose parameter count or sizes disagree with the kernel's own, a scalar
// missing from the bindings, a driver error (its name and text).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <cuda_runtime.h>
#include <nlohmann/json.hpp>

#include "harness/status.h"

namespace assay::gpu {

/// What a kernel image file holds; kAuto: tell from its first bytes.
enum class ImageFormat { kAuto, kCubin, kPtx, kFatbin };
std::string_view image_format_name(ImageFormat f);

/// A kernel image read from disk and identified by content (ELF with
/// e_machine EM_CUDA: cubin; magic 0xBA55ED50: fatbin; text with a
/// `.version` directive: PTX). No CUDA call: works without a GPU.
struct KernelImage {
  std::string path;
  ImageFormat format = ImageFormat::kAuto;
  std::string bytes;  ///< file contents; PTX is NUL-terminated for the driver
};

/// Reads and identifies `path`; with `expected` != kAuto the content must be
/// of that format. Errors: not-found (no such file), invalid-argument (not a
/// kernel image, or not the expected one).
StatusOr<KernelImage> read_kernel_image(const std::string& path, ImageFormat expected = ImageFormat::kAuto);
/// Identifies an in-memory image; `where` names it in errors.
StatusOr<ImageFormat> identify_kernel_image(std::string_view bytes, const std::string& where);

/// One kernel parameter, in declaration order, as the spec describes it.
enum class ArgKind : uint8_t {
  kPointer,      ///< device pointer to the tensor named `name`
  kNullPointer,  ///< a pointer the kernel does not use here (Triton's scratch pointers): passed as null
  kBool,         ///< 1 byte, from a scalar (true/false or 0/1)
  kI32,
  kU32,
  kI64,
  kU64,
  kF32,  ///< from a scalar, rounded to nearest float
  kF64,
};
struct KernelArg {
  ArgKind kind = ArgKind::kPointer;
  std::string name;  ///< tensor name (kPointer), scalar key (scalars), a label (kNullPointer)
};
std::string_view arg_kind_name(ArgKind k);
/// Bytes the argument occupies in the kernel's parameter buffer (1, 4 or 8).
size_t arg_size(ArgKind k);

/// Parses a C-like parameter list, e.g.
///   "const float* A, const float* B, float* C, int64_t m, int32_t trans_a, float alpha, void* scratch = null"
/// Types: any pointer (`T*`, `T* __restrict__`) -> kPointer, or kNullPointer
/// with the suffix `= null`; bool; int / int32_t; unsigned / uint32_t;
/// int64_t / long long / ptrdiff_t; uint64_t / size_t; float; double.
/// `const`, `__restrict__`, `restrict` are ignored. One-line error naming the
/// offending parameter.
StatusOr<std::vector<KernelArg>> parse_signature(std::string_view signature);

/// Launch geometry. A zero in any grid extent means "nothing to launch" (an
/// empty output): the launch is skipped and succeeds.
struct LaunchDims {
  std::array<uint32_t, 3> grid{1, 1, 1};
  std::array<uint32_t, 3> block{1, 1, 1};
  uint32_t shared_bytes = 0;  ///< dynamic shared memory; above 48 KiB the kernel's limit is raised first

  /// grid = ceil(cols / block_x) x ceil(rows / block_y), each clamped to the
  /// hardware limit (2^31-1 along x, 65535 along y): a kernel that covers a
  /// larger extent must loop (grid-stride).
  static LaunchDims cover_2d(int64_t cols, int64_t rows, uint32_t block_x, uint32_t block_y, uint32_t shared_bytes = 0);
};

/// What a launch binds the signature to: device pointers by tensor name and
/// scalars by key (a JSON object, like Case::params: integers stay exact).
struct LaunchBindings {
  std::map<std::string, const void*> tensors;
  nlohmann::json scalars = nlohmann::json::object();
};

/// Grid, block and shared memory from the launch's scalars.
using LaunchDimsFn = std::function<StatusOr<LaunchDims>(const nlohmann::json& scalars)>;

/// Kernel parameters packed for cuLaunchKernel: `pointers[i]` points at the
/// value of parameter i inside `storage`. CPU-only.
struct PackedArgs {
  std::vector<std::array<unsigned char, 8>> storage;
  std::vector<void*> pointers;
};
/// Packs `bindings` per `signature`. Errors (invalid-argument, one line) name
/// the parameter: unknown tensor, missing scalar, non-integer or
/// out-of-range value for an integer kind.
StatusOr<PackedArgs> pack_args(const std::vector<KernelArg>& signature, const LaunchBindings& bindings);

/// A CUDA module loaded into the calling thread's current context (the
/// runtime's primary context of the current device; made current if none
/// is). Unloaded on destruction.
class KernelModule {
 public:
  static StatusOr<std::unique_ptr<KernelModule>> load(const KernelImage& image);
  ~KernelModule();
  KernelModule(const KernelModule&) = delete;
  KernelModule& operator=(const KernelModule&) = delete;

  const std::string& path() const { return path_; }
  /// The kernel named `symbol` (an extern "C" name, or the mangled one);
  /// opaque CUfunction. not-found names the kernels the image holds.
  StatusOr<void*> function(const std::string& symbol) const;
  /// Names of the kernels in the image (empty where the driver is older than 12.4).
  std::vector<std::string> function_names() const;
  /// Checks `signature` against the kernel's parameter count and sizes
  /// (driver 12.4+; skipped on older drivers).
  Status check_signature(void* function, const std::string& symbol, const std::vector<KernelArg>& signature) const;

 private:
  KernelModule() = default;
  void* module_ = nullptr;  // CUmodule
  std::string path_;
};

/// Launches an opaque CUfunction: packs `bindings`, computes the geometry
/// from `dims`, raises the dynamic shared-memory limit if needed, and calls
/// cuLaunchKernel on `stream`. Never synchronises.
Status launch_function(void* function, const std::string& what, const std::vector<KernelArg>& signature,
                       const LaunchDimsFn& dims, const LaunchBindings& bindings, cudaStream_t stream);

/// A kernel built elsewhere, as a spec declares it: image file, kernel
/// symbol, signature and geometry. Copyable and thread-safe; the image is
/// read on first use and loaded once per CUDA context (one per device), so
/// lanes on several GPUs each launch their own copy. Declaring one does no
/// I/O and no CUDA call, so a spec can hold it in a static.
class DriverKernel {
 public:
  DriverKernel(std::string path, std::string symbol, std::vector<KernelArg> signature, LaunchDimsFn dims,
               ImageFormat format = ImageFormat::kAuto);
  /// Same, with the signature as text (parse_signature); a malformed
  /// signature makes every launch fail with the parse error.
  DriverKernel(std::string path, std::string symbol, std::string_view signature, LaunchDimsFn dims,
               ImageFormat format = ImageFormat::kAuto);

  const std::string& path() const;
  const std::string& symbol() const;
  /// Reads and identifies the image, parses the signature: every check that
  /// needs no GPU.
  Status check_offline() const;
  /// Loads (once per context), checks the signature, launches on `stream`.
  Status launch(const LaunchBindings& bindings, cudaStream_t stream) const;
  /// launch() for launchers that must return a cudaError_t (the testbeds'
  /// launch callbacks): a failure is printed to stderr as one line (once per
  /// distinct message) and mapped to the matching cudaError_t (the driver's
  /// code where there is one: CUresult and cudaError_t share numbering).
  cudaError_t launch_or_report(const LaunchBindings& bindings, cudaStream_t stream) const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

/// Whether the CUDA driver API is reachable; the error says why not.
Status driver_available();

}  // namespace assay::gpu

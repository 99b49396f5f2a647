/* The C ABI of assay's core, for hosts that cannot link C++: the Python package (python/assay,
 * through ctypes) in particular. Plain C types, JSON strings for declarations and results, and
 * C callbacks for what the host supplies (a reference, a bound, a launcher, a fork).
 *
 * Conventions:
 * - Functions returning int give 0 on success, else a nonzero code; functions returning char*
 *   give a JSON document owned by the caller (release it with assay_free), or NULL on error.
 *   assay_last_error() then says why, in one line (per thread).
 * - Callbacks return 0 on success; a nonzero return from a reference or bound callback is an
 *   infrastructure error (the callback may set the message with assay_set_error first). A
 *   launcher returns a cudaError_t value (0 = cudaSuccess).
 * - Tensors are handed out as assay_tensor: shape and strides in elements, outermost first;
 *   `data` is a device pointer at element [0, ..., 0] for launchers and host fp64 values (same
 *   strides) for references and bounds.
 */
#ifndef ASSAY_CAPI_H_
#define ASSAY_CAPI_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ASSAY_API __attribute__((visibility("default")))

typedef struct {
  const char* name;
  const char* dtype; /* "fp32", "fp16", "bf16", "fp64", "i32", ... */
  int role;          /* 0 in, 1 out, 2 inout */
  int rank;
  const int64_t* shape;
  const int64_t* strides;
  void* data;
} assay_tensor;

/* Fills ref[o] (and, where the bound model needs it, mag[o]: per-element magnitudes such as
 * sum |a||b|) for each output o in declaration order, dense in row-major order of its shape. */
typedef int (*assay_reference_fn)(void* user, const char* params_json, int ntensors, const assay_tensor* tensors,
                                  double* const* ref, double* const* mag);
/* Fills tol[o] from ref[o] and mag[o]; arith_json is the variant's declared arithmetic
 * ({"fast_math": bool, "ftz": bool, "tiles": {...}}). */
typedef int (*assay_bound_fn)(void* user, const char* params_json, const char* arith_json, int ntensors,
                              const assay_tensor* tensors, const double* const* ref, const double* const* mag,
                              double* const* tol);
/* Runs the kernel on `stream` (a cudaStream_t) of CUDA device `device`; returns a cudaError_t. */
typedef int (*assay_launch_fn)(void* user, const char* params_json, int ntensors, const assay_tensor* tensors,
                               void* stream, int device);
/* Starts a worker process: forks; the child closes close_fds, calls assay_worker_serve on
 * (in_fd, out_fd) and exits with its result. Returns the child's pid to the parent, -1 on error. */
typedef int (*assay_fork_fn)(void* user, int device, int in_fd, int out_fd, int nclose, const int* close_fds);
/* Judges a batch of cases (a JSON array): index of the first failing one, -1 for none, -2 to stop. */
typedef int (*assay_judge_fn)(void* user, const char* cases_json);
/* Progress of a campaign, about once a second: {"cases", "failures", "elapsed_s", "time_left_s", "shrinking"}. */
typedef void (*assay_progress_fn)(void* user, const char* progress_json);
/* One array of a host evaluation: what is "input", "ref" or "tol", index the tensor or output. */
typedef void (*assay_array_fn)(void* user, const char* what, int index, int64_t n, const double* data);

ASSAY_API const char* assay_version(void);
ASSAY_API const char* assay_last_error(void);
ASSAY_API void assay_set_error(const char* message);
ASSAY_API void assay_free(char* p);

/* Ops and variants (python/README.md documents the declaration JSON). bound may be NULL when the
 * declaration names one of assay's bound models. Registrations last for the process. */
ASSAY_API int assay_register_op(const char* decl_json, assay_reference_fn reference, assay_bound_fn bound, void* user);
ASSAY_API int assay_add_variant(const char* op, const char* decl_json, assay_launch_fn launch, void* user);
/* {"ops": [names]} */
ASSAY_API char* assay_list_ops(void);
/* An op's params, tensors and variants with their contracts. */
ASSAY_API char* assay_describe_op(const char* op);

/* Cases. */
ASSAY_API char* assay_generate(const char* op, const char* variant, uint64_t seed, int64_t index, int64_t max_dim);
ASSAY_API int assay_validate(const char* case_json);
/* {"outside": null | "the rule broken"} */
ASSAY_API char* assay_outside_contract(const char* case_json, const char* variant);
/* The op's shrink candidates of a case, a JSON array. */
ASSAY_API char* assay_shrink_candidates(const char* case_json);
/* Greedy shrinking with the host's judge: {"minimal": case, "steps": n, "evals": n}. */
ASSAY_API char* assay_shrink(const char* case_json, assay_judge_fn judge, void* user, int max_evals);
/* The host side of a case without a GPU: inputs materialised and decoded, the op's prepare,
 * reference and bound under `variant`'s arithmetic; arrays go to `sink` (dense, row-major). */
ASSAY_API int assay_host_evaluate(const char* case_json, const char* variant, assay_array_fn sink, void* user);

/* Corpus. */
ASSAY_API char* assay_write_entry(const char* root, const char* case_json, const char* found_json);
ASSAY_API char* assay_read_entry(const char* path);
ASSAY_API char* assay_list_entries(const char* paths_json);

/* Running on a GPU. assay_device_count asks in a forked child, so this process never
 * initialises CUDA (its forked workers could not use it otherwise); -1 without a GPU. */
ASSAY_API int assay_device_count(void);
/* A campaign (options: python/README.md); fork == NULL runs lanes in this process. */
ASSAY_API char* assay_run_campaign(const char* op, const char* options_json, assay_fork_fn fork, void* fork_user,
                                   assay_progress_fn progress, void* progress_user);
/* One case through `variants_json` (an array; empty: the case's variant or the op's defaults):
 * {"verdicts": [...]}. Crashes come back as verdicts of kind crash. */
ASSAY_API char* assay_run_case(const char* case_json, const char* variants_json, const char* options_json,
                               assay_fork_fn fork, void* fork_user);
/* The worker protocol (harness/worker.h) on in_fd/out_fd; plan_json: {"seed", "max_dim", "target",
 * "lanes", "repeat"}. Returns the worker's exit code. */
ASSAY_API int assay_worker_serve(const char* op, const char* plan_json, int device, int in_fd, int out_fd);

#ifdef __cplusplus
}
#endif

#endif /* ASSAY_CAPI_H_ */

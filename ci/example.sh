#!/usr/bin/env bash
# Builds the example consumer projects (examples/*/CMakeLists.txt) against an
# installed assay, the way a kernel repository would use it, and runs their
# tests: install build/ into a temporary prefix, configure the examples with
# find_package(assay) under CMake's default generator and under Ninja, build
# them, run their CTest entries.
#
# The examples are configured together (examples/CMakeLists.txt adds each one
# as a subdirectory: one CUDA toolchain detection per generator); each is also a
# project of its own, built alone the same way.
#
# Without a GPU, every selfcheck must pass and every GPU entry must be reported
# as skipped (never as passed); with one, the GPU entries fuzz each example's
# kernels inside their contracts.
#
#   bash ci/example.sh            # after build/ is built (ci/test.sh does that)
#   ASSAY_BUILD_DIR=other-build ASSAY_KEEP=1 bash ci/example.sh
set -euo pipefail
cd "$(dirname "$0")/.."
build="${ASSAY_BUILD_DIR:-build}"
jobs="$(nproc)"
work="$(mktemp -d "${TMPDIR:-/tmp}/assay-example.XXXXXX")"
if [[ "${ASSAY_KEEP:-0}" == 1 ]]; then
  echo "example: keeping $work"
else
  trap 'rm -rf "$work"' EXIT
fi

if [[ ! -f "$build/CMakeCache.txt" ]]; then
  echo "example: $build is not a configured assay build (run ci/test.sh first)" >&2
  exit 2
fi
cmake --build "$build" -j"$jobs" --target assay
cmake --install "$build" --prefix "$work/prefix" > /dev/null

# The CTest entries each example must have (a selfcheck, and a fuzz test per kernel).
expected=(my_assay.selfcheck my_assay.fuzz.gemm.my_gemm my_assay.fuzz.gemm.my_gemm_aot
          sgemm_assay.selfcheck sgemm_assay.fuzz.gemm.sgemm_tiled
          rmsnorm_assay.selfcheck rmsnorm_assay.fuzz.rmsnorm_bwd.rmsnorm_bwd_atomic
          adamw_assay.selfcheck adamw_assay.fuzz.adamw.float4 adamw_assay.fuzz.adamw.ptx)

# Both the default generator (Unix Makefiles) and Ninja: the package must not depend on either.
for gen in "Unix Makefiles" Ninja; do
  tag="${gen// /-}"
  echo "example: configuring and building with the $gen generator"
  cmake -S examples -B "$work/build-$tag" -G "$gen" -DCMAKE_PREFIX_PATH="$work/prefix" > "$work/configure-$tag.log" ||
    { cat "$work/configure-$tag.log"; exit 1; }
  cmake --build "$work/build-$tag" -j"$jobs"

  # The consumers' tests, discovered from their specs when ctest starts.
  listing="$(ctest --test-dir "$work/build-$tag" -N)"
  echo "$listing"
  for t in "${expected[@]}"; do
    grep -q " $t\$" <<<"$listing" || { echo "example ($gen): CTest entry $t is missing" >&2; exit 1; }
  done

  log="$work/ctest-$tag.log"
  ctest --test-dir "$work/build-$tag" --output-on-failure -j"$jobs" 2>&1 | tee "$log"
  if ! nvidia-smi -L > /dev/null 2>&1; then
    # No GPU: the GPU entries must show as skipped, not as passed.
    for t in "${expected[@]}"; do
      [[ "$t" == *.selfcheck ]] && continue
      grep -Eq "$t .*Skipped" "$log" || { echo "example ($gen): $t was not reported as skipped without a GPU" >&2; exit 1; }
    done
  fi
  # A case outside the SGEMM's contract (the fixture has trans_a = true and m = 7) is refused
  # before any GPU is looked for: exit 2 and one line naming the rule, never a kernel failure.
  sed 's/"variant": "tiled"/"variant": "sgemm_tiled"/' tests/fixtures/gemm_case_v1.json > "$work/outside.json"
  set +e
  why="$("$work/build-$tag/tiled-sgemm/sgemm_assay" triage "$work/outside.json" 2>&1)"
  rc=$?
  set -e
  echo "example ($gen): triage of a case outside the contract: exit $rc: $why"
  [[ $rc == 2 && "$why" == *"outside the contract of gemm [sgemm_tiled]: trans_a in {false}"* ]] ||
    { echo "example ($gen): expected exit 2 naming the rule trans_a in {false}" >&2; exit 1; }
done
echo "example: ${#expected[@]} entries of $(ls -d examples/*/CMakeLists.txt | wc -l) examples built against the installed assay with both generators; tests passed"

#!/usr/bin/env bash
# Session 7 GPU checks (issue 7, the GEMM family): GPU tests by FILTER, fuzz of FUZZ_OPS for
# FUZZ_SECONDS each, then optionally the per-kernel bench (BENCH_OPS, --per-variant) and the GEMM
# throughput (THROUGHPUT=1). Runs from the repository root of a checkout that carries gpu-bundle/
# (ci/gpu-bundle.sh); logs and failing corpus entries are packed into $OUT/session7.tgz.
# BENCH_LARGE=1 keeps the bench's large-case breakdown (the 4096^3 wall-time target).
set -u
B=gpu-bundle
O="${OUT:-/tmp/assay-out}"
L="$O/logs"
mkdir -p "$L" /work/main/build
for z in $B/*.gz; do [ -e "$z" ] && gunzip -f "$z"; done  # ci/gpu-bundle.sh compresses the binaries
cp $B/ext/module_kernel.ptx /work/main/build/ 2>/dev/null
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}" PATH="$PATH:/usr/local/cuda/bin" ASSAY_BINARY="$PWD/$B/assay"
A=$B/assay
if [ -n "${FILTER:-}" ]; then
  timeout "${TEST_TIMEOUT:-300}" $B/assay_tests --gtest_filter="$FILTER" --gtest_output="xml:$L/tests.xml" > "$L/tests.log" 2>&1
  echo "GPU tests rc=$?"; grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED  \]" "$L/tests.log" | sort -u | head -40
fi
for op in ${FUZZ_OPS:-}; do
  timeout 90 $A fuzz $op --time "${FUZZ_SECONDS:-10}" --seed "${FUZZ_SEED:-7}" --keep-going --corpus "$O/corpus" --json "$L/fuzz_$op.json" > "$L/fuzz_$op.log" 2>&1
  echo "fuzz $op rc=$?: $(grep -A12 '^variant' "$L/fuzz_$op.log" | tr -s ' ' | tr '\n' ';' | cut -c1-700)"
done
if [ -n "${BENCH_OPS:-}" ]; then
  timeout "${BENCH_TIMEOUT:-300}" $A bench --ops "$BENCH_OPS" --seconds "${BENCH_SECONDS:-2}" --lanes 8 --per-variant --skip-mutants $([ "${BENCH_LARGE:-0}" = 1 ] || echo --skip-large) --out "$L/bench" > "$L/bench.log" 2>&1
  echo "bench rc=$?"; grep -E "^\| " "$L/bench.log" | grep -v "^| variants\|---" | head -80
fi
if [ "${THROUGHPUT:-0}" = 1 ]; then
  timeout "${THROUGHPUT_TIMEOUT:-240}" $A throughput --ops gemm --reps "${REPS:-10}" --out "$L/throughput" > "$L/throughput.log" 2>&1
  echo "throughput rc=$?"; grep -E "^\| |^- " "$L/throughput.log" | head -90
fi
tar czf "$O/session7.tgz" -C "$O" logs corpus 2>/dev/null || tar czf "$O/session7.tgz" -C "$O" logs
rm -rf "$L" "$O/corpus"

#!/usr/bin/env bash
# Issue 3 ("measured, not assumed") on a GPU machine: the vendor false-alarm
# campaign (120,000 cases: cuBLAS fp32 pedantic / tf32 / fp16 / bf16, cuBLASLt
# fp8 e4m3 and e5m2 x e4m3 with and without fast accumulation, int8) judged
# against the hard ceilings of harness/bounds.h, then the GPU tests of the
# campaign and of the cuBLASLt wrapper (and their CPU halves). Everything is
# logged under $OUT: logs/, false-alarm/false-alarm.{md,json}, a summary (with
# the cases/s and the per-phase seconds, and the library's own log of any
# configuration it still declines).
#
#   ASSAY_BINARY=gpu-bundle/assay OUT=/tmp/out ci/gpu-false-alarm.sh
#
# ASSAY_BINARY defaults to $BUNDLE/assay (BUNDLE: gpu-bundle, made by
# ci/gpu-bundle.sh), ASSAY_TESTS to assay_tests beside it. Exit status: 0 when
# the campaign found no failure and the tests passed; else the first non-zero.
set -u
B="${BUNDLE:-gpu-bundle}"
export ASSAY_BINARY="${ASSAY_BINARY:-$PWD/$B/assay}"
ASSAY_TESTS="${ASSAY_TESTS:-$(dirname "$ASSAY_BINARY")/assay_tests}"
O="${OUT:-/tmp/assay-out}"
L="$O/logs"
mkdir -p "$L" "$O/false-alarm"
export PATH="$PATH:/usr/local/cuda/bin"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
summary="$L/false-alarm-summary.txt"
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }
status=0

nvidia-smi > "$L/nvidia-smi.txt" 2>&1
note "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1)"
note "host: $(nproc) cores"

run() {  # name, timeout (s), command...
  local name=$1 t=$2; shift 2
  local t0 rc
  t0=$(date +%s.%N)
  timeout "$t" "$@" > "$L/$name.log" 2>&1
  rc=$?
  note "$name: rc=$rc $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f s", b-a}')"
  if [[ $rc -ne 0 && $status -eq 0 ]]; then status=$rc; fi
}

# The campaign: exit 0 no failure, 1 an element above its ceiling (or a NaN/Inf,
# exact-tier or gap failure), 3 infrastructure (or a config that ran no case).
run false_alarm 1800 "$ASSAY_BINARY" false-alarm --cases 120000 --seed 1 --out "$O/false-alarm"
grep -E "^\*\*(PASS|FAIL)\*\*|^Device:" "$L/false_alarm.log" | tee -a "$summary"
grep -E "\*\*all\*\*" "$L/false_alarm.log" | tee -a "$summary"
grep -E "^(ceiling|naninf|exact|gap) config=" "$L/false_alarm.log" | head -20 | tee -a "$summary"
grep -A30 -E "^## Not run" "$L/false_alarm.log" | grep -E "^- " | tee -a "$summary"

# Every case is drawn within its library's documented layout rules (the report's "layouts
# fuzzed" column): a config that still has declined cases gets a few of them again with
# cuBLASLt's and cuBLAS's own logging on, which names what the library refused. Diagnostic
# only: its exit status does not count.
declined=$(grep -A30 -E "^## Not run" "$L/false_alarm.log" | sed -n 's/^- \([a-z0-9_]*\): .*/\1/p' | paste -sd, -)
if [[ -n "$declined" ]]; then
  note "declined configs: $declined (cuBLASLt/cuBLAS logs: $L/cublaslt-declined.log, $L/cublas-declined.log)"
  mkdir -p "$L/declined-report"
  CUBLASLT_LOG_LEVEL=5 CUBLASLT_LOG_FILE="$L/cublaslt-declined.log" \
    CUBLAS_LOGINFO_DBG=1 CUBLAS_LOGDEST_DBG="$L/cublas-declined.log" \
    timeout 300 "$ASSAY_BINARY" false-alarm --cases 40 --seed 1 --configs "$declined" --out "$L/declined-report" \
    > "$L/declined_replay.log" 2>&1
  grep -iE "error|not supported|unsupported|fail" "$L/cublaslt-declined.log" 2>/dev/null | sort | uniq -c \
    | sort -rn | head -10 | tee -a "$summary"
fi

# The GPU tests (a 360-case campaign, the planted errors, the cuBLASLt wrapper)
# and the CPU tests of the campaign and of the bound derivations it relies on.
run false_alarm_tests 900 "$ASSAY_TESTS" \
  --gtest_filter='FalseAlarm*:CublasLtGpu*:GemmBounds.*' --gtest_output="xml:$L/false_alarm_tests.xml"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[ measured \]" "$L/false_alarm_tests.log" | tee -a "$summary"

note "status: $status"
exit "$status"

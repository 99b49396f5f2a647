#!/usr/bin/env bash
# Every GPU check of a session in one run: the full test suite, a 60 s fuzz
# of the correct GEMM variants, a campaign against each mutant, and the
# small-case throughput at several lane counts. Logs and the JSON reports go
# to $OUT/results.tgz; a summary is printed last.
set -u
B="${BUNDLE:-gpu-bundle}"
O="${OUT:-/tmp/assay-out}"
L="$O/logs"
mkdir -p "$L"
export ASSAY_BINARY="$PWD/$B/assay"
export PATH="$PATH:/usr/local/cuda/bin"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
summary="$L/summary.txt"
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }

nvidia-smi > "$L/nvidia-smi.txt" 2>&1
note "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1)"

run() {  # name, timeout, command...
  local name=$1 t=$2; shift 2
  local t0=$(date +%s.%N)
  timeout "$t" "$@" > "$L/$name.log" 2>&1
  local rc=$?
  note "$name: rc=$rc $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f s", b-a}')"
}

if [[ "${STEPS:-all}" == *tests* || "${STEPS:-all}" == all ]]; then
  run tests 400 "$B/assay_tests" --gtest_output="xml:$L/tests.xml"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) " "$L/tests.log" | tee -a "$summary"
  grep -E "^\[  FAILED  \]" "$L/tests.log" | head -20 | tee -a "$summary"
fi
if [[ "${STEPS:-all}" == *fuzz* || "${STEPS:-all}" == all ]]; then
  run fuzz60 120 "$B/assay" fuzz gemm --time 60 --seed 1 --corpus "$O/corpus-correct" --json "$L/fuzz60.json" \
    --junit "$L/fuzz60.junit.xml"
  tail -4 "$L/fuzz60.log" | tee -a "$summary"
fi
if [[ "${STEPS:-all}" == *mutants* ]]; then
  for m in mutant_tail_guard mutant_wrong_ld mutant_fp16_acc mutant_beta0_reads_c mutant_k_tail \
           mutant_writes_input mutant_skips_last_row mutant_writes_past_end mutant_missing_sync; do
    run "$m" 120 "$B/assay" fuzz gemm --variant "$m" --cases 20000 --seed 1 --corpus "$O/corpus-mutants" \
      --json "$L/$m.json"
    grep -E "^FAIL|shrunk in" "$L/$m.log" | head -2 | tee -a "$summary"
  done
fi
if [[ "${STEPS:-all}" == *rate* || "${STEPS:-all}" == all ]]; then
  for lanes in 4 8 16; do
    run "rate64_lanes$lanes" 60 "$B/assay" fuzz gemm --max-dim 64 --time 10 --lanes "$lanes" --seed 2 --corpus "" \
      --json "$L/rate64_lanes$lanes.json"
    grep -E "cases/s" "$L/rate64_lanes$lanes.log" | head -1 | tee -a "$summary"
  done
fi
if [[ "${STEPS:-all}" == *sanitize* || "${STEPS:-all}" == all ]]; then
  run sanitize_racecheck 300 "$B/assay" fuzz gemm --variant mutant_missing_sync --sanitize racecheck --cases 10 \
    --max-dim 48 --lanes 1 --seed 3 --corpus "$O/corpus-sanitize" --json "$L/sanitize_racecheck.json"
  grep -E "^FAIL|shrunk in" "$L/sanitize_racecheck.log" | head -2 | tee -a "$summary"
  run sanitize_memcheck_correct 300 "$B/assay" fuzz gemm --sanitize memcheck --cases 40 --max-dim 48 --lanes 1 \
    --seed 4 --corpus "" --json "$L/sanitize_memcheck_correct.json"
  grep -E "cases/s|^FAIL" "$L/sanitize_memcheck_correct.log" | head -2 | tee -a "$summary"
fi
if [[ "${STEPS:-all}" == *bench* || "${STEPS:-all}" == all ]]; then
  run bench 420 "$B/assay" bench --seconds 10 --lanes 8 --out "$O/bench"
  cp "$O/bench/bench.md" "$O/bench/bench.json" "$L/" 2>/dev/null
  grep -E "^\| (small|medium|large) |^Large" "$L/bench.md" | tee -a "$summary"
fi
tar czf "$O/results.tgz" -C "$O" logs $(cd "$O" && ls -d corpus-* 2>/dev/null)
cat "$summary"

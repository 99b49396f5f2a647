#!/usr/bin/env bash
# Session 3 GPU checks: suite, a 60 s campaign over every value class, the
# accepted accuracy baseline and its check, and a triage of a stored case.
set -u
B=gpu-bundle
O="${OUT:-/tmp/assay-out}"
L="$O/logs"
mkdir -p "$L"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}" PATH="$PATH:/usr/local/cuda/bin"
STEPS=tests bash ci/gpu-checks.sh > /dev/null 2>&1
tail -4 "$L/summary.txt"
grep -E "^\[  FAILED|Failure|Which is" "$L/tests.log" | head -10
timeout 120 $B/assay fuzz gemm --time 60 --seed 5 --corpus "$O/corpus60" --json "$L/fuzz60_all_classes.json" > "$L/fuzz60_all_classes.log" 2>&1
echo "fuzz60 rc=$?"; tail -5 "$L/fuzz60_all_classes.log"
mkdir -p "$O/corpora"
timeout 120 $B/assay baseline update gemm --cases 20000 --corpus "$O/corpora" > "$L/baseline_update.log" 2>&1
echo "baseline update rc=$?"; tail -2 "$L/baseline_update.log"
timeout 120 $B/assay baseline check gemm --corpus "$O/corpora" > "$L/baseline_check.log" 2>&1
echo "baseline check rc=$?"; tail -1 "$L/baseline_check.log"
timeout 60 $B/assay fuzz gemm --variant mutant_skips_last_row --cases 2000 --corpus "$O/tri" > "$L/tri_fuzz.log" 2>&1
f=$(ls "$O"/tri/gemm/*.json | head -1)
cp "$f" "$L/triage_case.json"
timeout 120 $B/assay triage "$L/triage_case.json" > "$L/triage.log" 2>&1
echo "triage rc=$?"; head -20 "$L/triage.log"
cp "$O/corpora/baselines/gemm.json" "$L/baseline_gemm.json" 2>/dev/null
tar czf "$O/session3.tgz" -C "$O" logs corpus60 2>/dev/null
rm -rf "$O/logs" "$O/corpus60" "$O/corpora" "$O/tri" "$O/results.tgz"

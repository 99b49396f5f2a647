#!/usr/bin/env bash
# Every GPU check of assay in one run, on a machine with a GPU:
#
#   tests       assay_tests (the GPU suites; the CPU ones run too)      reports/tests.xml
#   fuzz        every op, one total budget split across them             reports/fuzz-<op>.{xml,json}
#   replay      every stored case of corpora/                            reports/replay.{xml,json}
#   mutants     every planted mutant must be caught (a race that plain   reports/mutant-<op>-<v>.{xml,json}
#               fuzzing misses gets a racecheck try, a kernel that
#               degrades gets a --repeat try)
#   bench       cases/s per size class, time to catch each mutant        bench/bench.{md,json}
#   gradcheck, exhaustive, false-alarm, baseline: on request (STEPS=all or by name)
#
#   bash ci/gpu-checks.sh [DIR [OUT]]
#
# DIR holds assay and assay_tests: a build folder, or a bundle from ci/gpu-bundle.sh (gzipped
# binaries, unpacked into OUT/bin). Default: gpu-bundle when present, else build. OUT (default
# $OUT, else /tmp/assay-out) receives logs/, reports/, corpus-*/, bench/ and summary.txt.
#
# Environment: STEPS (comma-separated, default tests,fuzz,replay,mutants,bench; "all" adds the
# rest), FUZZ_SECONDS (total fuzz budget, default 600), SEED (default 1), MUTANT_CASES (default
# 2000), MUTANT_SHARD (i/N: only the mutants k with k % N == i, to spread them over GPUs; default
# 0/1), BENCH_SECONDS (default 2). Exit status: 0 when every step passed, else the worst step's
# (1 failures, 2 input error, 3 infrastructure error, 124 a step timed out).
set -u
cd "$(dirname "$0")/.."
dir="${1:-}"
if [[ -z "$dir" ]]; then
  if [[ -d gpu-bundle ]]; then dir=gpu-bundle; else dir=build; fi
fi
out="${2:-${OUT:-/tmp/assay-out}}"
steps="${STEPS:-tests,fuzz,replay,mutants,bench}"
[[ "$steps" == all ]] && steps="tests,fuzz,replay,mutants,bench,gradcheck,exhaustive,false-alarm,baseline"
fuzz_total="${FUZZ_SECONDS:-600}"
seed="${SEED:-1}"
mutant_cases="${MUTANT_CASES:-2000}"
mutant_shard="${MUTANT_SHARD:-0/1}"
bench_seconds="${BENCH_SECONDS:-2}"
mkdir -p "$out/logs" "$out/reports"
out="$(cd "$out" && pwd)"
summary="$out/summary.txt"
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }
has() { [[ ",$steps," == *",$1,"* ]]; }

# The binaries: a bundle's are gzipped.
bin="$dir"
if compgen -G "$dir/*.gz" > /dev/null; then
  bin="$out/bin"
  mkdir -p "$bin"
  for z in "$dir"/*.gz; do gunzip -c "$z" > "$bin/$(basename "$z" .gz)" && chmod +x "$bin/$(basename "$z" .gz)"; done
  [[ -f "$dir/module_kernel.ptx" ]] && cp "$dir/module_kernel.ptx" "$bin/"
fi
assay="$(cd "$bin" && pwd)/assay"
tests="$(cd "$bin" && pwd)/assay_tests"
[[ -x "$assay" ]] || { echo "gpu-checks: no assay executable in $dir" >&2; exit 2; }
export ASSAY_BINARY="$assay"  # the test suite starts its workers from it
[[ -x "$bin/assay_fake_worker" ]] && export ASSAY_FAKE_WORKER="$(cd "$bin" && pwd)/assay_fake_worker"
[[ -f "$bin/module_kernel.ptx" ]] && export ASSAY_MODULE_TEST_PTX="$(cd "$bin" && pwd)/module_kernel.ptx"
export PATH="$PATH:/usr/local/cuda/bin"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"

worst=0
run() {  # name timeout_s command...: log to logs/<name>.log, note the exit status and time
  local name=$1 t=$2
  shift 2
  local t0 rc
  t0=$(date +%s.%N)
  timeout "$t" "$@" > "$out/logs/$name.log" 2>&1
  rc=$?
  note "$name: rc=$rc $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f s", b - a }')"
  return $rc
}
record() { (( $1 > worst )) && worst=$1; return 0; }

note "assay: $("$assay" --version 2>&1)"
note "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1)"
nvidia-smi > "$out/logs/nvidia-smi.txt" 2>&1

# Ops and variants, from the tool itself.
"$assay" list --json --mutants > "$out/logs/list.json" || { echo "gpu-checks: assay list failed" >&2; exit 3; }
ops_of() {  # all | mutants: "op" or "op variant" lines
  python3 - "$out/logs/list.json" "$1" <<'PY'
import json, sys
for o in json.load(open(sys.argv[1])):
    if sys.argv[2] == "all":
        print(o["op"])
    else:
        for v in o["variants"]:
            if v["mutant"]:
                print(o["op"], v["name"])
PY
}
mapfile -t ops < <(ops_of all)

if has tests && [[ -x "$tests" ]]; then
  run tests 1800 "$tests" --gtest_output="xml:$out/reports/tests.xml"
  rc=$?
  # 77: no test failed and some skipped (tests/test_main.cpp; a GPU machine skips the tests that need
  # two GPUs or a missing library); the SKIPPED lines below name them.
  (( rc == 77 )) && rc=0
  record $rc
  grep -E "^\[  (PASSED|FAILED|SKIPPED) " "$out/logs/tests.log" | tee -a "$summary"
  grep -E "^\[  FAILED  \] [A-Za-z]" "$out/logs/tests.log" | sort -u | head -40 | tee -a "$summary"
fi

if has fuzz; then
  per=$(( fuzz_total / ${#ops[@]} )); (( per < 1 )) && per=1
  note "fuzz: ${#ops[@]} ops, $per s each (FUZZ_SECONDS=$fuzz_total in all), seed $seed"
  for op in "${ops[@]}"; do
    run "fuzz-$op" $(( per + 300 )) "$assay" fuzz "$op" --time "$per" --seed "$seed" --require-gpu --keep-going \
      --corpus "$out/corpus-fuzz" --junit "$out/reports/fuzz-$op.xml" --json "$out/reports/fuzz-$op.json"
    record $?
    grep -E "^FAIL|cases/s" "$out/logs/fuzz-$op.log" | head -4 | tee -a "$summary"
  done
fi

if has replay; then
  run replay 1800 "$assay" replay corpora --require-gpu --junit "$out/reports/replay.xml" \
    --json "$out/reports/replay.json"
  record $?
  tail -1 "$out/logs/replay.log" | tee -a "$summary"
fi

if has mutants; then
  caught=0 missed=() k=-1
  while read -r op v; do
    k=$((k + 1))
    (( k % ${mutant_shard#*/} == ${mutant_shard%/*} )) || continue
    name="mutant-$op-$v"
    args=(fuzz "$op" --variant "$v" --seed "$seed" --corpus "$out/corpus-mutants" --require-gpu)
    # Planted hangs and crashes: every shrink step costs a watchdog timeout or a worker restart.
    [[ "$v" == fault_* ]] && args+=(--case-timeout 5 --shrink-time 30)
    run "$name" 600 "$assay" "${args[@]}" --cases "$mutant_cases" --junit "$out/reports/$name.xml" \
      --json "$out/reports/$name.json"
    rc=$?
    # A mutant inside its declared ceiling is caught by the vendor-relative accuracy warning alone.
    if (( rc == 0 )) && python3 - "$out/reports/$name.json" "$v" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
c = r.get("campaigns", [r])[0] if "campaigns" in r else r
vs = c.get("variants", {}) if isinstance(c, dict) else {}
sys.exit(0 if vs.get(sys.argv[2], {}).get("accuracy_warnings", 0) > 0 else 1)
PY
    then
      note "$op/$v: accuracy warnings (inside its ceiling, as planted)"
      rc=1
    fi
    # A race may not show as wrong values at small shapes; a kernel may degrade only after many calls.
    if (( rc == 0 )); then
      run "$name-racecheck" 900 "$assay" "${args[@]}" --sanitize racecheck --cases 10 --max-dim 96 --lanes 1 \
        --junit "$out/reports/$name-racecheck.xml"
      rc=$?
    fi
    if (( rc == 0 )); then
      run "$name-repeat" 600 "$assay" "${args[@]}" --repeat 250 --cases 20 --junit "$out/reports/$name-repeat.xml"
      rc=$?
    fi
    if (( rc == 1 )); then caught=$((caught + 1)); else missed+=("$op/$v (rc=$rc)"); fi
  done < <(ops_of mutants)
  note "mutants (shard $mutant_shard): $caught caught, ${#missed[@]} missed${missed:+: ${missed[*]}}"
  (( ${#missed[@]} > 0 )) && record 1
fi

if has bench; then
  run bench 1800 "$assay" bench --seconds "$bench_seconds" --lanes 8 --out "$out/bench"
  record $?
  grep -E "^## |^\| (small|medium|large) " "$out/bench/bench.md" 2> /dev/null | tee -a "$summary"
fi

if has gradcheck; then
  for op in "${ops[@]}"; do
    [[ "$op" == *_bwd* ]] || continue
    run "gradcheck-$op" 600 "$assay" gradcheck "$op" --time 20 --seed "$seed" --require-gpu \
      --corpus "$out/corpus-gradcheck" --junit "$out/reports/gradcheck-$op.xml" --json "$out/reports/gradcheck-$op.json"
    record $?
  done
fi

if has exhaustive; then
  for dt in fp16 bf16; do
    for dir in "" --backward; do
      run "exhaustive-activation-$dt${dir}" 900 "$assay" exhaustive activation --dtype "$dt" $dir \
        --junit "$out/reports/exhaustive-activation-$dt${dir}.xml" --json "$out/reports/exhaustive-activation-$dt${dir}.json"
      record $?
      tail -1 "$out/logs/exhaustive-activation-$dt${dir}.log" | tee -a "$summary"
    done
  done
fi

if has false-alarm; then
  run false-alarm 900 "$assay" false-alarm --cases 120000 --seed "$seed" --out "$out/false-alarm" \
    --junit "$out/reports/false-alarm.xml" --json "$out/reports/false-alarm.json"
  record $?
fi

if has baseline; then
  for op in "${ops[@]}"; do
    [[ -f "corpora/baselines/$op.json" ]] || continue
    run "baseline-$op" 900 "$assay" baseline check "$op" --corpus corpora \
      --junit "$out/reports/baseline-$op.xml" --json "$out/reports/baseline-$op.json"
    record $?
  done
fi

note "gpu-checks: exit $worst (logs, reports and corpora under $out)"
exit "$worst"

#!/usr/bin/env bash
# Session 5 GPU checks (issues 3 and 8): the row-wise/elementwise specs
# (fuzz, mutants, exhaustive fp16/bf16 sweeps), the cuDNN references, the
# cuBLAS/cuBLASLt false-alarm campaign, and the bench of the new ops.
# Run from the repository root with the carried gpu-bundle/.
set -u
B=gpu-bundle
O="${OUT:-/tmp/assay-out}"
L="$O/logs"
mkdir -p "$L" /work/main/build
for z in $B/*.gz; do [ -e "$z" ] && gunzip -f "$z"; done  # ci/gpu-bundle.sh compresses the binaries
cp $B/ext/module_kernel.ptx /work/main/build/ 2>/dev/null
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}" PATH="$PATH:/usr/local/cuda/bin" ASSAY_BINARY="$PWD/$B/assay"
A=$B/assay
STEPS="${STEPS:-tests,fuzz,exhaustive,falsealarm,detection,bench}"
has() { [[ ",$STEPS," == *",$1,"* ]]; }
nvidia-smi --query-gpu=name,driver_version --format=csv > "$L/gpu.txt" 2>&1
if has tests; then
  $B/assay_tests --gtest_filter='*Rowwise*:*Activation*:*Cudnn*:*FalseAlarm*:*Conv*:*CublasLt*:*SoftmaxVsCudnn*' \
    --gtest_output="xml:$L/tests.xml" > "$L/tests.log" 2>&1; echo "new GPU tests rc=$?"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED  \]" "$L/tests.log" | sort -u | head -40
fi
if has fuzz; then
  for op in softmax softmax_bwd layernorm layernorm_bwd rmsnorm rmsnorm_bwd activation activation_bwd rope embedding embedding_bwd cross_entropy; do
    timeout 120 $A fuzz $op --time "${FUZZ_SECONDS:-15}" --seed "${SEED:-5}" --keep-going --corpus "$O/corpus" --json "$L/fuzz_$op.json" > "$L/fuzz_$op.log" 2>&1
    echo "fuzz $op rc=$?: $(tail -2 "$L/fuzz_$op.log" | tr '\n' ' ')"
  done
fi
if has exhaustive; then
  for act in gelu_erf gelu_tanh silu; do for dt in bf16 fp16; do for dir in "" "--backward"; do
    $A exhaustive activation --act $act --dtype $dt $dir > "$L/exh_${act}_${dt}${dir}.log" 2>&1
    echo "exhaustive $act $dt $dir rc=$?: $(tail -1 "$L/exh_${act}_${dt}${dir}.log")"
  done; done; done
fi
if has falsealarm; then
  timeout 420 $A false-alarm --cases "${FA_CASES:-120000}" --seed 1 --out "$L/false-alarm" > "$L/false_alarm.log" 2>&1
  echo "false-alarm rc=$?"; tail -40 "$L/false_alarm.log"
fi
if has detection; then
  timeout 300 $A detection-table --out "$L/detection" > "$L/detection.log" 2>&1
  echo "detection-table rc=$?"; grep -E "^\| " "$L/detection.log" | head -40
fi
if has bench; then
  timeout 300 $A bench --ops softmax layernorm rmsnorm activation --seconds "${BENCH_SECONDS:-4}" --lanes 8 --mutant-cases 3000 --out "$L/bench" > "$L/bench.log" 2>&1
  echo "bench rc=$?"; grep -E "^\| (small|medium|large|mutant)" "$L/bench.log" | head -30
fi
tar czf "$O/session5.tgz" -C "$O" logs corpus 2>/dev/null || tar czf "$O/session5.tgz" -C "$O" logs
rm -rf "$L" "$O/corpus"

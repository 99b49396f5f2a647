#!/usr/bin/env bash
# Session 6 follow-up GPU checks: the convolution specs and kernels (issue 9),
# the LayerNorm re-check after the underflow fix (small cases, seed 1: the
# bench's campaign), and the attention specs when they are linked.
set -u
B=gpu-bundle
O="${OUT:-/tmp/assay-out}"
L="$O/logs"
mkdir -p "$L" /work/main/build
for z in $B/*.gz; do [ -e "$z" ] && gunzip -f "$z"; done  # ci/gpu-bundle.sh compresses the binaries
cp $B/ext/module_kernel.ptx /work/main/build/ 2>/dev/null
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}" PATH="$PATH:/usr/local/cuda/bin" ASSAY_BINARY="$PWD/$B/assay"
A=$B/assay
$B/assay_tests --gtest_filter="${FILTER:-*Conv*Gpu*:*Attention*Gpu*:*Attn*Gpu*}" --gtest_output="xml:$L/tests.xml" > "$L/tests.log" 2>&1
echo "GPU tests rc=$?"; grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED  \]" "$L/tests.log" | sort -u | head -40
timeout 60 $A fuzz layernorm --max-dim 64 --seed 1 --cases 60000 --lanes 8 --keep-going --corpus "$O/corpus" --json "$L/fuzz_layernorm_small.json" > "$L/fuzz_layernorm_small.log" 2>&1
echo "layernorm small rc=$?: $(tail -3 "$L/fuzz_layernorm_small.log" | tr '\n' ' ')"
for op in ${FUZZ_OPS:-conv2d conv2d_bwd_data conv2d_bwd_filter}; do
  timeout 90 $A fuzz $op --time "${FUZZ_SECONDS:-10}" --seed 3 --keep-going --corpus "$O/corpus" --json "$L/fuzz_$op.json" > "$L/fuzz_$op.log" 2>&1
  echo "fuzz $op rc=$?: $(grep -A4 '^variant' "$L/fuzz_$op.log" | tr '\n' ' ' | cut -c1-600)"
done
if [ "${EXHAUSTIVE:-0}" = 1 ]; then
  for dir in "" "--backward"; do for dt in bf16 fp16; do
    $A exhaustive activation --dtype $dt $dir > "$L/exh_${dt}${dir}.log" 2>&1
    echo "exhaustive activation $dt $dir rc=$?: $(tail -1 "$L/exh_${dt}${dir}.log")"
  done; done
fi
if [ -n "${BENCH_OPS:-}" ]; then
  timeout 200 $A bench --ops $BENCH_OPS --seconds 4 --lanes 8 --mutant-cases 3000 --out "$L/bench" > "$L/bench.log" 2>&1
  echo "bench rc=$?"; grep -E "^\| (small|medium|large|mutant_)" "$L/bench.log" | head -30
fi
if [ "${THROUGHPUT:-0}" = 1 ]; then
  timeout 500 $A throughput --out "$L/throughput" > "$L/throughput.log" 2>&1
  echo "throughput rc=$?"; grep -E "^\| |^- |timed launches" "$L/throughput.log" | head -80; tail -3 "$L/throughput.log" | grep -i error
fi
tar czf "$O/session6.tgz" -C "$O" logs corpus 2>/dev/null || tar czf "$O/session6.tgz" -C "$O" logs
rm -rf "$L" "$O/corpus"

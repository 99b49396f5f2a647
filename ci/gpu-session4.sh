#!/usr/bin/env bash
# Session 4 GPU checks (issue 10): the driver-API loader tests, the external
# example's two kernels (linked, and PTX loaded at run time) fuzzed on the
# GPU, and the whole suite once more. Paths compiled into the carried
# binaries are recreated first.
set -u
B=gpu-bundle
O="${OUT:-/tmp/assay-out}"
L="$O/logs"
mkdir -p "$L" /tmp/assay-ext-build/assay-images/my_assay /work/main/build
cp $B/ext/my_gemm_aot.ptx /tmp/assay-ext-build/assay-images/my_assay/
cp $B/ext/module_kernel.ptx /work/main/build/
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}" PATH="$PATH:/usr/local/cuda/bin" ASSAY_BINARY="$PWD/$B/assay"
$B/assay_tests --gtest_filter='Module*' > "$L/module_tests.log" 2>&1; echo "module tests rc=$?"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure" "$L/module_tests.log" | head
for v in my_gemm my_gemm_aot; do
  $B/ext/my_assay fuzz gemm --variant $v --cases 3000 --require-gpu --corpus "" --json "$L/ext_$v.json" > "$L/ext_$v.log" 2>&1
  echo "external $v rc=$?"; tail -3 "$L/ext_$v.log"
done
$B/ext/my_assay list > "$L/ext_list.log" 2>&1; cat "$L/ext_list.log" | head -5
$B/assay_tests --gtest_output="xml:$L/tests.xml" > "$L/tests.log" 2>&1; echo "suite rc=$?"
grep -E "^\[  (PASSED|FAILED|SKIPPED) " "$L/tests.log" | sort -u | head -8
tar czf "$O/session4.tgz" -C "$O" logs
rm -rf "$L"

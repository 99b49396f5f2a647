#!/usr/bin/env bash
# Builds the libFuzzer target of the file readers (tests/fuzz/json_reader_fuzzer.cpp)
# with clang and ASan + UBSan, and runs it on the committed seed corpus.
# Host-only sources: no CUDA, no GPU. Usage:
#   ci/fuzz-readers.sh [seconds (default 60)] [extra libFuzzer flags...]
# e.g. ci/fuzz-readers.sh 0 -runs=1000000   (a fixed number of executions instead of a time)
# Exit status: 0 when the fuzzer found nothing; libFuzzer's own status otherwise
# (a crashing input is written to build-fuzz/crash-*).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
out=build-fuzz
mkdir -p "$out/work"
cxx="${ASSAY_FUZZ_CXX:-clang++}"
srcs=(tests/fuzz/json_reader_fuzzer.cpp harness/json_file.cpp harness/case.cpp harness/corpus.cpp
      harness/baseline.cpp harness/verdict.cpp harness/tensor.cpp harness/values.cpp harness/dtype.cpp
      harness/status.cpp harness/spec.cpp)
# One object per source, compiled in parallel (a serial clang++ call dominated the CI step).
cflags=(-std=c++20 -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined
        -fno-sanitize-recover=undefined -I.)
rm -rf "$out/obj" && mkdir -p "$out/obj"
printf '%s\n' "${srcs[@]}" | xargs -P "$(nproc)" -I{} sh -c \
  '"$0" "$@" -c "{}" -o "'"$out/obj/"'$(echo "{}" | tr / _).o"' "$cxx" "${cflags[@]}"
"$cxx" -fsanitize=fuzzer,address,undefined "$out"/obj/*.o -lfmt -o "$out/json_reader_fuzzer"
flags=(-max_len=65536 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$out/")
[[ "$seconds" -gt 0 ]] && flags+=(-max_total_time="$seconds")
# libFuzzer's progress lines go to a log; its final statistics are printed.
status=0
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  "$out/json_reader_fuzzer" "${flags[@]}" "$@" "$out/work" tests/fuzz/corpus > "$out/fuzz.log" 2>&1 || status=$?
grep -E '^(Done|stat::|==[0-9]+==ERROR|SUMMARY|artifact_prefix|Test unit written)' "$out/fuzz.log" || true
grep -E '#[0-9]+\s+DONE' "$out/fuzz.log" | tail -1 || true
if [[ $status -ne 0 ]]; then
  echo "fuzz-readers: FAILED (exit $status); last lines of $out/fuzz.log:"
  tail -40 "$out/fuzz.log"
fi
exit "$status"

#!/usr/bin/env bash
# Hostile files and command lines through the real binary: `assay replay` and
# `assay triage` on each crafted file, and bad option values, must exit 2 with
# exactly one "assay: error:" / "assay: usage error:" line, nothing unescaped,
# and a whole-corpus replay must go on past every bad file to its summary.
# Usage: hostile_cli_test.sh <path to assay>
set -u
assay="$1"
dir="$(mktemp -d)"
trap 'chmod -R u+rwx "$dir" 2>/dev/null; rm -rf "$dir"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

corpus="$dir/corpus/gemm"
mkdir -p "$corpus"
case_json='{"format":1,"op":"gemm","variant":"tiled","params":{"alpha":1.0,"beta":0.0,"k":5,"m":3,"n":4,"trans_a":false,"trans_b":true},"tensors":[{"name":"A","role":"in","dtype":"fp32","shape":[3,5],"strides":[5,1],"offset":0,"values":{"class":"small_int","seed":"0x0000000000000009","scale":1.0,"int_range":2}},{"name":"B","role":"in","dtype":"fp32","shape":[4,5],"strides":[5,1],"offset":0,"values":{"class":"small_int","seed":"0x0000000000000009","scale":1.0,"int_range":2}},{"name":"C","role":"inout","dtype":"fp32","shape":[3,4],"strides":[6,1],"offset":0,"values":{"class":"small_int","seed":"0x0000000000000009","scale":1.0,"int_range":2}}]}'
good_entry="{\"assay_entry\":1,\"case\":$case_json,\"found\":{\"verdict\":{\"passed\":false}},\"replay\":\"x\"}"
entry_with() {  # an entry with one sed edit applied to the good one
  printf '%s' "$good_entry" | sed -e "$1"
}
printf '%s' "$good_entry" > "$corpus/good.json"
printf '9e372' > "$corpus/bare_overflow.json"
entry_with 's/"alpha":1.0/"alpha":1e400/' > "$corpus/param_overflow.json"
python3 -c 'print("[" * 200000)' > "$corpus/deep_array.json"
python3 -c 'print("{\"a\":" * 200000)' > "$corpus/deep_object.json"
truncate -s 2G "$corpus/huge.json"
mkfifo "$corpus/fifo.json"
ln -s /dev/zero "$corpus/zero.json"
ln -s loop_b.json "$corpus/loop_a.json"
ln -s loop_a.json "$corpus/loop_b.json"
ln -s nowhere.json "$corpus/broken.json"
ln -s .. "$corpus/up"
mkdir "$corpus/folder.json"
entry_with 's/"trans_a":false/"trans_a":1/' > "$corpus/trans_a_number.json"
entry_with 's/"found":{"verdict":{"passed":false}}/"found":{"verdict":"fail"}/' > "$corpus/verdict_string.json"
entry_with 's/"found":{"verdict":{"passed":false}}/"found":{"verdict":{"passed":"no"}}/' > "$corpus/passed_string.json"
entry_with 's/"fp32","shape":\[3,5\]/"\\u001b[31mfp32\\nX","shape":[3,5]/' > "$corpus/escape_dtype.json"
entry_with 's/"op":"gemm"/"op":"no_such_op"/' > "$corpus/unknown_op.json"
entry_with 's/"variant":"tiled"/"variant":"nope"/' > "$corpus/unknown_variant.json"
entry_with 's/"m":3/"m":3,"m":4/' > "$corpus/duplicate_key.json"
entry_with 's/"shape":\[3,5\]/"shape":[3.5,5]/' > "$corpus/shape_float.json"
entry_with 's/"shape":\[3,5\]/"shape":[18446744073709551616,5]/' > "$corpus/shape_huge.json"
printf '' > "$corpus/empty.json"
printf '{"assay_entry":1,"case":{' > "$corpus/truncated.json"
printf '{"assay_entry":1,"case":"\xff\xfe"}' > "$corpus/bad_utf8.json"
printf '\x1b]0;title\x07\n{' > "$corpus/terminal_escape.json"
mkdir -p "$dir/corpus/baselines"
printf '{"ratios":{"tiled":{"fp32/small_int":9e999}}}' > "$dir/corpus/baselines/gemm.json"

# One file at a time: exit 2, exactly one error line, every stderr line from assay.
check_one() {  # <subcommand> <file>
  local sub="$1" f="$2" err rc
  err="$(timeout 20 "$assay" "$sub" "$f" 2>&1 >/dev/null)"
  rc=$?
  if [[ $rc -ne 2 ]]; then fail "$sub $(basename "$f"): exit $rc, want 2: $err"; return; fi
  local n
  n="$(printf '%s\n' "$err" | grep -c '^assay: error:')"
  if [[ "$n" -ne 1 ]]; then fail "$sub $(basename "$f"): $n error lines, want 1: $err"; fi
  if printf '%s\n' "$err" | grep -qv '^assay: '; then fail "$sub $(basename "$f"): a line not from assay: $err"; fi
  if printf '%s' "$err" | grep -q $'\x1b'; then fail "$sub $(basename "$f"): raw escape character echoed"; fi
}
for f in "$corpus"/*.json; do
  [[ "$(basename "$f")" == good.json ]] && continue
  [[ -d "$f" && ! -L "$f" ]] || check_one replay "$f"  # a folder given to replay is walked, not read
  check_one triage "$f"
done
check_one triage /dev/zero
check_one triage "$dir"

# The whole corpus: every bad file is one line, the good one is read, the summary is printed.
out="$(timeout 60 "$assay" replay "$dir/corpus" 2>"$dir/err.txt")"
rc=$?
total=$(find "$corpus" -maxdepth 1 -name '*.json' ! -type d | wc -l)  # links count, folder.json is walked into
[[ $rc -eq 2 ]] || fail "whole-corpus replay: exit $rc, want 2"
echo "$out" | grep -q "^replay: $total entries: .* $((total - 1)) unreadable" ||
  fail "whole-corpus replay: no summary of $total entries with $((total - 1)) unreadable: $out"
errs=$(grep -c '^assay: error:' "$dir/err.txt")
[[ "$errs" -eq $((total - 1)) ]] || fail "whole-corpus replay: $errs error lines, want $((total - 1)): $(cat "$dir/err.txt")"

# A broken baseline: one line, with or without a GPU.
err="$(timeout 20 "$assay" baseline check gemm --corpus "$dir/corpus" 2>&1 >/dev/null)"
rc=$?
[[ $rc -eq 2 ]] || fail "baseline check: exit $rc, want 2: $err"
printf '%s' "$err" | grep -q 'number out of range' || fail "baseline check: $err"

# Command lines: exit 2 and one usage line naming the problem.
check_usage() {  # <needle> <args...>
  local needle="$1" err rc
  shift
  err="$(timeout 20 "$assay" "$@" 2>&1 >/dev/null)"
  rc=$?
  [[ $rc -eq 2 ]] || { fail "assay $*: exit $rc, want 2: $err"; return; }
  [[ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ]] || fail "assay $*: more than one line: $err"
  printf '%s' "$err" | grep -qF -- "$needle" || fail "assay $*: no '$needle' in: $err"
  [[ ${#err} -lt 400 ]] || fail "assay $*: message of ${#err} characters: $err"
}
check_usage "not a finite decimal number" fuzz gemm --time nan
check_usage "not a finite decimal number" fuzz gemm --time inf
check_usage "out of range" fuzz gemm --time -1
check_usage "not a finite decimal number" fuzz gemm --time 5s
check_usage "not a finite decimal number" fuzz gemm --shrink-time nan
check_usage "not an integer in [0, 18446744073709551615]" fuzz gemm --seed -5
check_usage "not an integer in [0, 18446744073709551615]" fuzz gemm --seed 18446744073709551616
check_usage "not an integer" fuzz gemm --cases 10x
check_usage "out of range [0," fuzz gemm --cases -3
check_usage "out of range [1, 64]" fuzz gemm --lanes 0
check_usage "not of the form i/N" fuzz gemm --shard 1/2abc
check_usage "not of the form i/N" fuzz gemm --shard 2/2
check_usage "not of the form i/N" fuzz gemm --shard -1/2
check_usage "not a finite decimal number" fuzz gemm --case-timeout nan
check_usage "out of range" fuzz gemm --case-timeout 0
check_usage "unknown command 'fuz' (did you mean 'fuzz'?)" fuz gemm
check_usage "unknown command 'replya' (did you mean 'replay'?)" replya
check_usage "unknown command 'xyzzy'" xyzzy
check_usage '\x1b[31m' $'\x1b[31mred'
check_usage "not an integer" replay --device 1e3
# No 309-digit DBL_MAX in any message.
err="$("$assay" bench --seconds -1 2>&1 >/dev/null)"
printf '%s' "$err" | grep -qE '[0-9]{20}' && fail "a number of 20+ digits in: $err"

if [[ $fails -ne 0 ]]; then
  echo "$fails hostile-input check(s) failed"
  exit 1
fi
echo "all hostile-input checks passed"

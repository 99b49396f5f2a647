#!/usr/bin/env bash
# The Python package on a GPU machine: its CPU tests, then `pytest examples/triton` (Triton
# kernels fuzzed through the package), the planted bug's stored case replayed from Python and
# from the CLI, and the CLI's own cases/s on the same op for comparison.
#
#   bash python/gpu_check.sh [BUNDLE_DIR]     # default gpu-bundle-py (python/bundle.sh), else build
#
# Environment: TIME (fuzz budget of each @assay.check, seconds, default 30), CLI_SECONDS (the
# CLI's softmax campaign, default 20). Writes under $OUT (default /tmp/assay-py-out):
# summary.txt, triton.xml (JUnit, with cases/s and compile time as properties), pytest.log,
# python-tests.xml, cli-softmax.json, cli-mutant.log, corpus.tar.gz (the entries the run stored).
set -u
cd "$(dirname "$0")/.."
bundle="${1:-gpu-bundle-py}"
out="${OUT:-/tmp/assay-py-out}"
mkdir -p "$out"
summary="$out/summary.txt"
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }
export PYTHONUNBUFFERED=1 PATH="$PATH:/usr/local/cuda/bin" LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"

# The library (and the CLI) from the bundle, or from a build folder.
bin=/tmp/assay-py-bin
mkdir -p "$bin"
if [[ -d "$bundle" ]]; then
  for z in "$bundle"/*.gz; do gunzip -c "$z" > "$bin/$(basename "$z" .gz)"; done
  cp "$bundle"/lib*.so.* "$bin/" 2> /dev/null || true
  chmod +x "$bin/assay" 2> /dev/null || true
else
  cp build/python/libassay_capi.so "$bin/" && cp build/assay "$bin/" 2> /dev/null || true
fi
export ASSAY_CAPI="$bin/libassay_capi.so" ASSAY_BINARY="$bin/assay" LD_LIBRARY_PATH="$bin:$LD_LIBRARY_PATH"
[[ -f "$ASSAY_CAPI" ]] || { note "gpu_check: no libassay_capi.so (run python/bundle.sh, carry gpu-bundle-py)"; exit 2; }
ldd "$ASSAY_CAPI" | grep "not found" | tee -a "$summary"

# pytest: the machine's, else the carried wheels.
if ! python3 -c "import pytest" 2> /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl \
    && export PYTHONPATH="/tmp/site:${PYTHONPATH:-}"
fi
export PYTHONPATH="$PWD/python:${PYTHONPATH:-}"
python3 -c "import sys, torch, triton, numpy, pytest; print('python', sys.version.split()[0], 'torch', torch.__version__, \
'triton', triton.__version__, 'numpy', numpy.__version__, 'pytest', pytest.__version__)" | tee -a "$summary"
nvidia-smi -L | tee -a "$summary"

worst=0
step() {  # name command...: status into the summary
  local name="$1"; shift
  local t0=$SECONDS
  "$@"
  local rc=$?
  note "step $name: exit $rc, $((SECONDS - t0)) s"
  ((rc > worst)) && worst=$rc
  return 0
}

step cpu-tests python3 -m pytest python/tests -q -p no:cacheprovider --junitxml="$out/python-tests.xml"
corpus=examples/triton/corpora
rm -rf "$corpus"
step triton python3 -m pytest -p assay.pytest_plugin examples/triton -v -rA -s -p no:cacheprovider \
  --assay-time "${TIME:-30}" --junitxml="$out/triton.xml" > "$out/pytest.log" 2>&1
tail -n 30 "$out/pytest.log"

# Per test: cases, cases/s and compile time from the JUnit properties; the planted bug's verdict.
python3 - "$out/triton.xml" <<'PY' | tee -a "$summary"
import sys, xml.etree.ElementTree as ET
for tc in ET.parse(sys.argv[1]).getroot().iter("testcase"):
    props = {p.get("name"): p.get("value") for p in tc.iter("property")}
    state = "failed" if tc.find("failure") is not None or tc.find("error") is not None else (
        "skipped" if tc.find("skipped") is not None else "passed")
    extra = "" if not props else (f" cases={props.get('cases')} cases/s={props.get('cases_per_second')} "
                                  f"steady cases/s={props.get('steady_cases_per_second')} "
                                  f"compile s={props.get('compile_seconds')} ({props.get('specialisations')} "
                                  f"slow launches) failures={props.get('failures')} {props.get('corpus_entry', '')}")
    print(f"{tc.get('classname')}::{tc.get('name')}: {state} in {float(tc.get('time', 0)):.1f} s{extra}")
PY

# The planted bug's stored cases: they must fail again from Python and replay from the CLI on
# the op's own kernel (which passes them).
entries=$(grep -l '"variant": *"triton_dropped_tail"' "$corpus"/softmax/*.json 2> /dev/null)
if [[ -z "$entries" ]]; then
  note "planted bug: NO stored case (not caught)"
  worst=1
else
  for e in $entries; do
    note "planted bug stored: $e"
    python3 -m assay replay "$e" --launch examples/triton/test_softmax.py:test_softmax_dropped_tail | tee -a "$summary"
    rc=${PIPESTATUS[0]}
    note "python replay of the planted bug: exit $rc (1 = still failing, as it must)"
    ((rc != 1)) && worst=1
    if [[ -x "$bin/assay" ]]; then
      "$bin/assay" replay --variant online "$e" | tee -a "$summary"
      note "CLI replay on the built-in softmax kernel: exit ${PIPESTATUS[0]}"
    fi
  done
fi
# A case stored by the CLI replays from Python: the CLI's softmax campaign beside the Triton one.
if [[ -x "$bin/assay" ]]; then
  "$bin/assay" fuzz softmax --time "${CLI_SECONDS:-20}" --corpus /tmp/assay-cli-corpus \
    --json "$out/cli-softmax.json" | tee -a "$summary"
  python3 -c "import json; j = json.load(open('$out/cli-softmax.json')); \
print(f\"CLI softmax: {j['cases']} cases in {j['seconds']:.1f} s = {j['cases_per_second']:.0f} cases/s\")" \
    | tee -a "$summary"
  # A case the CLI finds and stores (its planted softmax mutant), replayed from Python on the
  # built-in kernel and on the Triton kernel (both must pass it).
  "$bin/assay" fuzz softmax --variant mutant_softmax_vec_tail --cases 2000 --corpus /tmp/assay-cli-corpus \
    > "$out/cli-mutant.log" 2>&1
  first=$(ls /tmp/assay-cli-corpus/softmax/*.json 2> /dev/null | head -1)
  if [[ -n "$first" ]]; then
    note "CLI stored: $first"
    python3 -m assay replay "$first" --variant online | tee -a "$summary"
    note "python replay of the CLI entry on the built-in kernel: exit ${PIPESTATUS[0]}"
    python3 -m assay replay "$first" --launch examples/triton/test_softmax.py:test_softmax | tee -a "$summary"
    note "python replay of the CLI entry on the Triton kernel: exit ${PIPESTATUS[0]}"
  else
    note "CLI mutant campaign stored nothing (see cli-mutant.log)"
  fi
fi
tar czf "$out/corpus.tar.gz" "$corpus" 2> /dev/null || true
note "gpu_check: worst exit $worst"
exit $worst

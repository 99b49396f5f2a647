#!/usr/bin/env bash
# Installs dependencies, builds, and runs the main job: a fuzz campaign of
# every op for ASSAY_FUZZ_SECONDS (default 60) in all (on a machine without a
# GPU: the CPU self-checks of the references). Stored failures go to
# corpora/; the exit status is non-zero when any op fails.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j"$(nproc)"
mapfile -t ops < <(./build/assay list | grep -E '^[a-z0-9_]+:' | cut -d: -f1)
total="${ASSAY_FUZZ_SECONDS:-60}"
per=$(( total / ${#ops[@]} > 1 ? total / ${#ops[@]} : 1 ))
status=0
for op in "${ops[@]}"; do
  echo "== assay fuzz $op --time $per"
  ./build/assay fuzz "$op" --time "$per" "$@" || status=$?
done
exit "$status"

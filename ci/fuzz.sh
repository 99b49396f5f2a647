#!/usr/bin/env bash
# Installs dependencies, builds, and runs the main job: a fuzz campaign of
# every op for ASSAY_FUZZ_SECONDS (default 60) in all (on a machine without a
# GPU: the CPU self-checks of the references). Stored failures go to
# corpora/; the exit status is non-zero when any op fails.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/install-deps.sh
# CUDA architectures: the default (80;90) where a GPU is present; on a CPU-only
# machine (CI) one, sm_90, since no kernel runs there and each extra architecture
# recompiles every kernel (ASSAY_CUDA_ARCHITECTURES overrides both).
archs="${ASSAY_CUDA_ARCHITECTURES:-}"
if [[ -z "$archs" ]]; then
  if nvidia-smi -L > /dev/null 2>&1; then archs="80;90"; else archs="90"; fi
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DASSAY_CUDA_ARCHITECTURES="$archs"
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

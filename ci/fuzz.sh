#!/usr/bin/env bash
# Installs dependencies, builds, and runs the main job: a 60-second fuzz
# campaign of every op (on a machine without a GPU: the CPU self-checks).
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j"$(nproc)"
./build/assay fuzz gemm --time "${ASSAY_FUZZ_SECONDS:-60}" "$@"

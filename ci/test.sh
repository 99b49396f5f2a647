#!/usr/bin/env bash
# Installs dependencies, builds everything and runs the whole test suite.
# GPU tests skip visibly (GTEST_SKIP with the reason) where no GPU is present.
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
ctest --test-dir build --output-on-failure -j"$(nproc)"
# The Python package (ctypes binding of build/python/libassay_capi.so, pytest plugin): CPU tests.
ASSAY_CAPI="$PWD/build/python/libassay_capi.so" python3 -m pytest python/tests -q -p no:cacheprovider
# The installed CMake package, consumed by examples/external-kernel.
bash ci/example.sh

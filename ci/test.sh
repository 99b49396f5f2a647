#!/usr/bin/env bash
# Installs dependencies, builds everything and runs the whole test suite.
# GPU tests skip visibly (GTEST_SKIP with the reason) where no GPU is present.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j"$(nproc)"
ctest --test-dir build --output-on-failure -j"$(nproc)"
# The installed CMake package, consumed by examples/external-kernel.
bash ci/example.sh

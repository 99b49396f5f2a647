#!/usr/bin/env bash
# Packs stripped binaries into gpu-bundle/ (git-ignored) for a GPU machine
# that cannot build: carry it, then run ci/gpu-checks.sh there.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --build build -j"$(nproc)"
rm -rf gpu-bundle && mkdir -p gpu-bundle
for b in assay assay_tests; do strip -o gpu-bundle/$b build/$b; done
du -sh gpu-bundle

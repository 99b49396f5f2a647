#!/usr/bin/env bash
# Packs stripped binaries into gpu-bundle/ (git-ignored) for a GPU machine
# that cannot build: carry it, then run ci/gpu-checks.sh there.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --build build -j"$(nproc)"
rm -rf gpu-bundle && mkdir -p gpu-bundle
# Compressed: the device tool carries at most 64 MiB, and the attention kernels'
# instantiations alone make each binary ~40 MiB; ci/gpu-session*.sh unpack them.
for b in assay assay_tests; do strip -o gpu-bundle/$b build/$b && gzip -6 gpu-bundle/$b; done
du -sh gpu-bundle

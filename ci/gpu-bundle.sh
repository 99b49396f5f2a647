#!/usr/bin/env bash
# Packs what a GPU machine that cannot build needs into a bundle folder: assay, assay_tests and
# the scripted fake worker of the campaign tests,
# stripped and gzipped (the device tool carries at most 64 MiB; the attention kernels'
# instantiations alone make each unstripped binary ~40 MiB), and the PTX of the driver-API test.
# Carry the bundle with the checkout, then run `bash ci/gpu-checks.sh BUNDLE OUT` there.
#
#   bash ci/gpu-bundle.sh [BUILD_DIR [BUNDLE_DIR]]      # defaults: build, gpu-bundle
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
bundle="${2:-gpu-bundle}"
cmake --build "$build" -j"$(nproc)" --target assay assay_tests assay_fake_worker
rm -rf "$bundle" && mkdir -p "$bundle"
for b in assay assay_tests assay_fake_worker; do strip -o "$bundle/$b" "$build/$b" && gzip -6 "$bundle/$b"; done
[[ -f "$build/module_kernel.ptx" ]] && cp "$build/module_kernel.ptx" "$bundle/"
du -sh "$bundle"

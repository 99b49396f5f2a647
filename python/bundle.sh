#!/usr/bin/env bash
# Packs what python/gpu_check.sh needs on a GPU machine that has no build tools for assay and
# no package registry: libassay_capi.so and the assay CLI (stripped, gzipped), the libfmt they
# link, and pytest's wheels (.whl/, pure Python) in case its python3 has no pytest.
#
#   bash python/bundle.sh [BUILD_DIR [BUNDLE_DIR]]      # defaults: build, gpu-bundle-py
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
bundle="${2:-gpu-bundle-py}"
cmake --build "$build" -j"$(nproc)" --target assay_capi assay
rm -rf "$bundle" && mkdir -p "$bundle"
strip -o "$bundle/libassay_capi.so" "$build/python/libassay_capi.so" && gzip -6 "$bundle/libassay_capi.so"
strip -o "$bundle/assay" "$build/assay" && gzip -6 "$bundle/assay"
# Shared libraries of the build machine's own (not CUDA's, which the GPU machine has).
for lib in $(ldd "$build/python/libassay_capi.so" | awk '/libfmt/ {print $3}'); do cp -L "$lib" "$bundle/"; done
if [[ ! -d .whl ]] || ! compgen -G ".whl/pytest-*.whl" > /dev/null; then
  python3 -m pip download -q --no-deps --only-binary=:all: -d .whl pytest==8.3.4 pluggy==1.5.0 iniconfig==2.0.0 \
    packaging==24.2 || echo "bundle: could not fetch pytest wheels (the GPU machine must have pytest)" >&2
fi
du -sh "$bundle" .whl 2>/dev/null || true

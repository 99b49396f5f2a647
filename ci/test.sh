#!/usr/bin/env bash
# Installs dependencies, builds everything and runs the whole test suite.
# GPU tests skip visibly (GTEST_SKIP with the reason) where no GPU is present.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/install-deps.sh
# CUDA architectures: the default (80;90) where a GPU is present; on a CPU-only
# machine (CI) sm_90 as PTX alone (90-virtual): no kernel runs there, so nothing
# needs machine code, and ptxas is most of the compile time of the templated
# kernels and mutants (the attention mutants: 110 s with SASS, 43 s without).
# ASSAY_CUDA_ARCHITECTURES overrides both.
archs="${ASSAY_CUDA_ARCHITECTURES:-}"
if [[ -z "$archs" ]]; then
  if nvidia-smi -L > /dev/null 2>&1; then archs="80;90"; else archs="90-virtual"; fi
fi
# Build type: where a GPU is present, RelWithDebInfo (as ci/fuzz.sh builds it: one build folder
# for both). On a CPU-only machine (CI), host code at -O1: no kernel runs there, the CPU suite's
# fp64 references are fast enough, and two cores spend most of the job compiling (device code
# is optimised by ptxas either way), with the common headers precompiled (ASSAY_PRECOMPILE_HEADERS).
# Device code at nvcc's fastest-compile level (-Ofc max): that PTX never runs here, and the
# optimiser was most of each kernel file's time (flash_bwd.cu 56 s, 3 s at -Ofc max); the front
# end still parses and instantiates every kernel, so what fails to compile still fails.
# The test files compiled in batches (ASSAY_UNITY_TESTS, CMakeLists.txt).
if nvidia-smi -L > /dev/null 2>&1; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DASSAY_CUDA_ARCHITECTURES="$archs"
else
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" \
    -DCMAKE_CUDA_FLAGS_RELEASE="-O1 -DNDEBUG -Ofc max" -DASSAY_CUDA_ARCHITECTURES="$archs" -DASSAY_PRECOMPILE_HEADERS=ON -DASSAY_UNITY_TESTS=ON
fi
cmake --build build -j"$(nproc)"
ctest --test-dir build --output-on-failure -j"$(nproc)"
# The Python package (ctypes binding of build/python/libassay_capi.so, pytest plugin): CPU tests.
ASSAY_CAPI="$PWD/build/python/libassay_capi.so" python3 -m pytest python/tests -q -p no:cacheprovider
# The installed CMake package, consumed by examples/external-kernel.
bash ci/example.sh
# The file readers under libFuzzer with ASan + UBSan, for a fixed short time
# (ci/fuzz-readers.sh; longer runs: ci/fuzz-readers.sh 0 -runs=1000000).
if echo 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }' |
   clang++ -x c++ -fsanitize=fuzzer - -o /tmp/assay-fuzz-probe > /dev/null 2>&1; then
  bash ci/fuzz-readers.sh "${ASSAY_FUZZ_READERS_SECONDS:-20}"
else
  echo "fuzz-readers: SKIPPED (no clang++ with libFuzzer on this machine)"
fi

#!/usr/bin/env bash
# Installs assay's build and test dependencies from Debian 12 packages.
# The CUDA toolkit (nvcc, cuBLAS) is not a Debian package here: it is expected under
# ${CUDA_HOME:-/usr/local/cuda}, and the script stops if it is missing. cuDNN 9 is optional.
set -euo pipefail

cuda_home="${CUDA_HOME:-/usr/local/cuda}"
if [[ ! -x "${cuda_home}/bin/nvcc" ]]; then
  echo "install-deps: CUDA toolkit not found: ${cuda_home}/bin/nvcc is missing (set CUDA_HOME)" >&2
  exit 1
fi
# cuDNN 9 (optional: CMake's ASSAY_WITH_CUDNN=AUTO uses it when found): beside the toolkit, or
# where NVIDIA's Debian packages (cudnn9-cuda-<major>) put it. CMakeLists.txt looks in the same
# places. Without it the build still passes; the cuDNN references and tests say "built without cuDNN".
cudnn_inc="" cudnn_lib=""
for d in "${cuda_home}/include" /usr/include /usr/include/x86_64-linux-gnu; do
  [[ -f "$d/cudnn.h" ]] && { cudnn_inc="$d"; break; }
done
for d in "${cuda_home}/lib64" "${cuda_home}/lib" /usr/lib/x86_64-linux-gnu; do
  [[ -e "$d/libcudnn.so" ]] && { cudnn_lib="$d"; break; }
done
if [[ -z "$cudnn_inc" || -z "$cudnn_lib" ]]; then
  echo "install-deps: cuDNN 9 not found (cudnn.h or libcudnn.so): building without it" \
       "(install NVIDIA's cudnn9-cuda-<major> for the cuDNN references and tests)" >&2
fi

# Debian packages; python3: the CLI report tests parse the JUnit XML; git: assay --version;
# libgoogle-perftools-dev: tcmalloc for the tool (cmake/assayAllocator.cmake).
packages=(
  build-essential cmake ninja-build
  googletest libgtest-dev librapidcheck-dev
  libboost-dev libmpfr-dev libgmp-dev
  nlohmann-json3-dev libcli11-dev libfmt-dev
  libgoogle-perftools-dev
  python3 git
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [[ $(id -u) -ne 0 ]] && sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# The Python package's CPU tests (python/tests): pytest and numpy for the python3 on PATH
# (Debian's python3-pytest / python3-numpy serve the system python3; pip the others).
if ! python3 -c "import pytest, numpy" 2> /dev/null; then
  if [[ "$(command -v python3)" == /usr/bin/python3 ]]; then
    sudo=""
    [[ $(id -u) -ne 0 ]] && sudo="sudo"
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends python3-pytest python3-numpy
  else
    python3 -m pip install -q pytest numpy
  fi
fi
echo "install-deps: all dependencies present"

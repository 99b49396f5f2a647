#!/usr/bin/env bash
# Installs assay's build and test dependencies from Debian 12 packages.
# The CUDA toolkit (nvcc, cuBLAS, cuDNN) is not a Debian package here: it is
# expected under ${CUDA_HOME:-/usr/local/cuda}; the script stops if it is missing.
set -euo pipefail

cuda_home="${CUDA_HOME:-/usr/local/cuda}"
if [[ ! -x "${cuda_home}/bin/nvcc" ]]; then
  echo "install-deps: CUDA toolkit not found: ${cuda_home}/bin/nvcc is missing (set CUDA_HOME)" >&2
  exit 1
fi

packages=(
  build-essential cmake ninja-build
  googletest libgtest-dev librapidcheck-dev
  libboost-dev libmpfr-dev libgmp-dev
  nlohmann-json3-dev libcli11-dev libfmt-dev
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
echo "install-deps: all dependencies present"

#!/usr/bin/env bash
# scripts/setup.sh - installs what megatrain needs to build and test (idempotent).
# Debian 12: MLIR/LLVM 19, protobuf 3.21, the ONNX schema, zlib, nlohmann-json, GoogleTest,
# the demo corpus.
set -euo pipefail

PKGS=(
  cmake ninja-build ccache g++ python3 python3-numpy zlib1g-dev nlohmann-json3-dev
  llvm-19-dev llvm-19-tools libmlir-19-dev mlir-19-tools
  libprotobuf-dev protobuf-compiler libonnx-dev
  libgtest-dev googletest libcli11-dev
  fortunes-min fortunes
)
# The libFuzzer build (scripts/fuzz.sh, docs/fuzzing.md) only when asked: FUZZ=1.
if [[ ${FUZZ:-0} == 1 ]]; then
  PKGS+=(clang-19 libfuzzer-19-dev libclang-rt-19-dev)
fi

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "setup: all packages present"
fi

# Python packages of the tests (onnxruntime checks exported models; torch and transformers for the
# Hugging Face path), from PyPI; only when missing.
if ! python3 -c "import onnx, onnxruntime, onnxscript, torch, transformers, safetensors, tokenizers, tensorboard" >/dev/null 2>&1; then
  echo "setup: installing the Python test packages (requirements-test.txt)"
  req="$(dirname "$0")/../requirements-test.txt"
  # A Debian-managed python3 refuses plain pip installs (PEP 668); a user or pyenv one does not.
  grep -v '^nvidia-cudnn-frontend' "$req" > /tmp/megatrain-requirements.txt
  python3 -m pip install -q -r /tmp/megatrain-requirements.txt ||
    python3 -m pip install -q --break-system-packages -r /tmp/megatrain-requirements.txt
fi
# The cuDNN frontend's C++ headers (the CUDA backend's fused attention): only the headers
# are used, so none of the package's Python dependencies (cutlass-dsl, tvm-ffi) are installed.
frontend=$(grep '^nvidia-cudnn-frontend' "$(dirname "$0")/../requirements-test.txt")
if ! python3 -m pip show -q "${frontend%%=*}" >/dev/null 2>&1; then
  echo "setup: installing $frontend (headers of the cuDNN frontend)"
  python3 -m pip install -q --no-deps "$frontend" ||
    python3 -m pip install -q --no-deps --break-system-packages "$frontend"
fi

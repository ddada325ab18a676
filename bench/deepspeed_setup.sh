#!/usr/bin/env bash
# bench/deepspeed_setup.sh - DeepSpeed for the deepspeed-offload peer (bench/peers.py), which is
# not a test requirement and has no wheel: fetched where there is a network, installed offline
# on the GPU machine (which has torch, ninja, nvcc and g++, but no network).
#
#   bash bench/deepspeed_setup.sh fetch DIR            # here: the sdist and the packages it needs
#                                                      # that the GPU machine lacks (python 3.12)
#   bash bench/deepspeed_setup.sh install DIR TARGET   # there: install into TARGET, then
#   export PYTHONPATH=TARGET${PYTHONPATH:+:$PYTHONPATH}
#
# DS_BUILD_OPS=0 installs no compiled ops; DeepSpeed's CPU AdamW is built with ninja at first
# use (a minute on 16 cores, counted in the peer's setup time, not its steps).
set -euo pipefail
VERSION=${DEEPSPEED_VERSION:-0.19.8}
PY=${DEEPSPEED_PYTHON_VERSION:-3.12}
case ${1:-} in
  fetch)
    dir=${2:?usage: deepspeed_setup.sh fetch DIR}
    mkdir -p "$dir"
    python3 -m pip download "deepspeed==$VERSION" --no-deps --no-binary :all: -d "$dir"
    python3 -m pip download hjson pydantic wheel --python-version "$PY" --only-binary=:all: \
      --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 -d "$dir"
    du -sh "$dir"
    ;;
  install)
    dir=${2:?usage: deepspeed_setup.sh install DIR TARGET}
    target=${3:?usage: deepspeed_setup.sh install DIR TARGET}
    mkdir -p "$target"
    # The runtime dependencies the machine lacks, then DeepSpeed against the machine's torch.
    python3 -m pip install --no-index --find-links "$dir" --no-deps --target "$target" --quiet \
      "$dir"/hjson-*.whl "$dir"/pydantic-*.whl "$dir"/pydantic_core-*.whl "$dir"/annotated_types-*.whl \
      "$dir"/typing_inspection-*.whl "$dir"/typing_extensions-*.whl "$dir"/wheel-*.whl
    DS_BUILD_OPS=0 PYTHONPATH=$target${PYTHONPATH:+:$PYTHONPATH} python3 -m pip install --no-index \
      --no-deps --no-build-isolation --target "$target" --quiet "$dir"/deepspeed-"$VERSION".tar.gz
    PYTHONPATH=$target${PYTHONPATH:+:$PYTHONPATH} python3 -c 'import deepspeed; print("deepspeed", deepspeed.__version__)'
    ;;
  *)
    sed -n '2,12p' "$0"; exit 2 ;;
esac

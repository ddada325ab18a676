#!/usr/bin/env bash
# optimizer_stream_bitwise.sh - megatrain-compile --optimizer-stream moves the AdamW updates of
# device-resident parameters from `compute` to a stream of their own, `optimizer`, ordered by
# the plan's events (the gradient before its update, every read of the master or its compute
# copy before the update writes it): every parameter at home on the device, the plan with the
# stream trains 20 steps to bitwise the losses and weights of the plan without it, and its
# ADAMW steps all lie on `optimizer`.
# usage: optimizer_stream_bitwise.sh BIN SRC MODEL   (MODEL: demo (fp32: kernels read the master
#        in place), demo_bf16, or a tests/models/llm/*.onnx stem, compiled at bf16)
set -euo pipefail
BIN=$1
SRC=$2
MODEL=$3
LLM_PRECISION=bf16
source "$(dirname "$0")/bitwise_common.sh"

compile_plan side plan-text txt --state-home device --optimizer-stream || fail "compile with --optimizer-stream"
compile_plan plain plan-text txt --state-home device || fail "compile without --optimizer-stream"
python3 - side.txt plain.txt <<'PY' || fail "the ADAMW steps' streams"
import re, sys
def adamw_streams(path):
    text = open(path).read()
    steps = re.findall(r'\nsteps \{\n(.*?)\n\}', text, re.S)
    return [re.search(r'stream: "(\w+)"', s).group(1) for s in steps if 'kind: ADAMW' in s]
side, plain = adamw_streams(sys.argv[1]), adamw_streams(sys.argv[2])
print(f"{len(side)} ADAMW steps: on {sorted(set(side))} with --optimizer-stream, on {sorted(set(plain))} without")
assert side and set(side) == {"optimizer"}, side
assert set(plain) == {"compute"}, plain
assert 'streams: "optimizer"' in open(sys.argv[1]).read()
PY
expect_same_training side plain
echo "PASS: $MODEL trains bitwise-identically with the device updates on their own stream"

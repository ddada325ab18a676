#!/usr/bin/env bash
# tool_errors.sh - bad input gets a one-line error naming the problem, a non-zero exit
# code and no crash: malformed ONNX, an unknown op, a missing --shape, a plan of another
# format version, a corrupt plan, missing files; outputs to device nodes (/dev/null stays a
# device, /dev/full's ENOSPC is an error) and a weight that is not finite.
set -u
BIN=$1
SRC=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
M=$SRC/tests/frontends/models
TINY=$SRC/frontends/models/tiny_transformer.onnx
passed=0
failed=0

# expect_error NAME REGEX COMMAND...: the command must exit with 1..127 (not a
# signal), print exactly one line, and that line must match REGEX.
expect_error() {
  local name=$1 pattern=$2
  shift 2
  local out rc lines
  out=$("$@" 2>&1)
  rc=$?
  lines=$(printf '%s\n' "$out" | grep -c .)
  if [[ $rc -ge 1 && $rc -lt 128 && $lines -eq 1 ]] && grep -qE -- "$pattern" <<<"$out"; then
    echo "ok    $name: $out"
    passed=$((passed + 1))
  else
    echo "FAIL  $name (exit $rc, $lines lines, expected /$pattern/):"
    printf '%s\n' "$out" | sed 's/^/      /'
    failed=$((failed + 1))
  fi
}

expect_error "malformed ONNX" "garbage\.onnx.*not a valid ONNX model" \
  "$BIN/megatrain-compile" "$M/garbage.onnx" -o "$TMP/a.plan"
expect_error "truncated ONNX" "truncated\.onnx.*not a valid ONNX model" \
  "$BIN/megatrain-compile" "$M/truncated.onnx" -o "$TMP/a.plan"
expect_error "unknown op" "unknown_op\.onnx.*op Einsum.*opset [0-9]+.*unsupported op" \
  "$BIN/megatrain-compile" "$M/unknown_op.onnx" -o "$TMP/a.plan"
expect_error "missing --shape" "input 'input_ids' has symbolic dims.*--shape input_ids=" \
  "$BIN/megatrain-compile" "$TINY" -o "$TMP/a.plan" --loss next-token-ce
expect_error "bad --shape syntax" "--shape" \
  "$BIN/megatrain-compile" "$TINY" -o "$TMP/a.plan" --shape input_ids=8xq
expect_error "missing model file" "no_such\.onnx" \
  "$BIN/megatrain-compile" "$TMP/no_such.onnx" -o "$TMP/a.plan"

# A good plan, then the same plan claiming format major version 2.
"$BIN/megatrain-compile" "$TINY" -o "$TMP/good.plan" --shape input_ids=2x64 \
  --loss next-token-ce >/dev/null 2>&1 || { echo "FAIL  could not compile the tiny model"; exit 1; }
protoc --decode=megatrain.plan.Plan -I "$SRC/plan" "$SRC/plan/plan.proto" \
  <"$TMP/good.plan" >"$TMP/good.txt"
sed 's/^  format_major: 1$/  format_major: 2/' "$TMP/good.txt" >"$TMP/v2.txt"
grep -q "format_major: 2" "$TMP/v2.txt" || { echo "FAIL  could not rewrite the version"; exit 1; }
protoc --encode=megatrain.plan.Plan -I "$SRC/plan" "$SRC/plan/plan.proto" \
  <"$TMP/v2.txt" >"$TMP/v2.plan"
expect_error "plan of another format version (run)" "format version 2\.[0-9]" \
  "$BIN/megatrain-run" "$TMP/v2.plan" --weights "$TINY" --steps 1
expect_error "plan of another format version (inspect)" "format version 2\.[0-9]" \
  "$BIN/megatrain-inspect" "$TMP/v2.plan"
head -c 200 "$TMP/good.plan" >"$TMP/cut.plan"
expect_error "corrupt plan" "cut\.plan" \
  "$BIN/megatrain-run" "$TMP/cut.plan" --weights "$TINY" --steps 1
expect_error "weights file missing" "no_such\.onnx" \
  "$BIN/megatrain-run" "$TMP/good.plan" --weights "$TMP/no_such.onnx" --steps 1
expect_error "unknown flag" "--frobnicate" \
  "$BIN/megatrain-run" "$TMP/good.plan" --frobnicate

python3 -c "import numpy as np, sys; np.save(sys.argv[1], np.zeros((2, 64), np.int64))" "$TMP/ids.npy"
FEED=(--input "input_ids=$TMP/ids.npy")
# no_stdout COMMAND...: the run's summary lines (printed even with --quiet) left out.
no_stdout() { "$@" >/dev/null; }
# Outputs: a device node is written in place, never replaced by a regular file (this
# runs as root in CI, where a rename over /dev/null would succeed); a full disk is an error.
expect_ok() {
  local name=$1
  shift
  if "$@" >"$TMP/ok.out" 2>&1; then
    echo "ok    $name"
    passed=$((passed + 1))
  else
    echo "FAIL  $name (exit $?):"
    sed 's/^/      /' "$TMP/ok.out"
    failed=$((failed + 1))
  fi
}
expect_ok "-o /dev/null" \
  "$BIN/megatrain-compile" "$TINY" -o /dev/null --shape input_ids=2x64 --loss next-token-ce
expect_ok "--report and --metrics to /dev/null" \
  "$BIN/megatrain-run" "$TMP/good.plan" --weights "$TINY" "${FEED[@]}" --steps 1 --quiet --report /dev/null --metrics /dev/null \
  --export-onnx /dev/null --export-safetensors /dev/null
expect_ok "--trace and --memory-plot to /dev/null (inspect)" \
  "$BIN/megatrain-inspect" "$TMP/good.plan" --trace /dev/null --memory-plot /dev/null
if [[ -c /dev/null ]]; then
  echo "ok    /dev/null is still a character device"
  passed=$((passed + 1))
else
  echo "FAIL  /dev/null is no longer a character device"
  failed=$((failed + 1))
fi
expect_error "-o /dev/full" "/dev/full.*No space left on device" \
  "$BIN/megatrain-compile" "$TINY" -o /dev/full --shape input_ids=2x64 --loss next-token-ce
expect_error "--metrics /dev/full" "/dev/full: write failed: No space left on device" \
  "$BIN/megatrain-run" "$TMP/good.plan" --weights "$TINY" "${FEED[@]}" --steps 2 --quiet --metrics /dev/full
expect_error "--report /dev/full" "/dev/full.*No space left on device" \
  no_stdout "$BIN/megatrain-run" "$TMP/good.plan" --weights "$TINY" "${FEED[@]}" --steps 1 --quiet --report /dev/full
expect_error "--trace /dev/full (inspect)" "/dev/full.*No space left on device" \
  no_stdout "$BIN/megatrain-inspect" "$TMP/good.plan" --trace /dev/full
expect_error "--export-onnx /dev/full" "/dev/full.*No space left on device" \
  no_stdout "$BIN/megatrain-run" "$TMP/good.plan" --weights "$TINY" "${FEED[@]}" --steps 1 --quiet --export-onnx /dev/full
expect_error "--export-safetensors /dev/full" "/dev/full.*No space left on device" \
  no_stdout "$BIN/megatrain-run" "$TMP/good.plan" --weights "$TINY" "${FEED[@]}" --steps 1 --quiet --export-safetensors /dev/full
expect_error "-o a directory" "is a directory" \
  "$BIN/megatrain-compile" "$TINY" -o "$TMP" --shape input_ids=2x64 --loss next-token-ce

# A NaN weight is refused when it loads, by name and flat index.
python3 - "$TINY" "$TMP/nan.onnx" <<'PY'
import sys, numpy as np, onnx
from onnx import numpy_helper
model = onnx.load(sys.argv[1])
for init in model.graph.initializer:
    if init.name == "ln1.weight":
        values = numpy_helper.to_array(init).copy()
        values[37] = np.nan
        init.CopyFrom(numpy_helper.from_array(values, init.name))
onnx.save(model, sys.argv[2])
PY
expect_error "NaN weight" "nan\.onnx: weight 'ln1\.weight' is nan at flat index 37" \
  "$BIN/megatrain-run" "$TMP/good.plan" --weights "$TMP/nan.onnx" --steps 1

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]

#!/usr/bin/env bash
# tool_errors.sh - bad input gets a one-line error naming the problem, a non-zero exit
# code and no crash: malformed ONNX, an unknown op, a missing --shape, a plan of another
# format version, a corrupt or edited plan, missing files, the malformed models that once
# crashed megatrain-compile (exit status exactly 1, the whole line checked), sizes, times and
# counts out of range, external data outside the model's folder, outputs to device nodes
# (/dev/null stays a device, /dev/full's ENOSPC is an error, standard output included) and a
# weight that is not finite.
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

# expect_line NAME LINE COMMAND...: exit status exactly 1 and exactly LINE on stderr.
expect_line() {
  local name=$1 line=$2
  shift 2
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  if [[ $rc -eq 1 && "$out" == "$line" ]]; then
    echo "ok    $name: $out"
    passed=$((passed + 1))
  else
    echo "FAIL  $name (exit $rc, expected 1 and the line '$line'):"
    printf '%s\n' "$out" | sed 's/^/      /'
    failed=$((failed + 1))
  fi
}

# Each was a crash (SIGSEGV, std::bad_alloc, or an overflowing size accepted).
C="megatrain-compile: error:"
N="domain 'ai.onnx', opset 17"
expect_line "fold: empty input" \
  "$C matmul_missing ($M/fold_empty_input.onnx): node 'matmul_missing' (op MatMul, $N): input 1 is required but is empty" \
  "$BIN/megatrain-compile" "$M/fold_empty_input.onnx" -o "$TMP/a.plan"
expect_line "fold: too few inputs" \
  "$C matmul_one_input ($M/fold_few_inputs.onnx): node 'matmul_one_input' (op MatMul, $N): input 1 is required but the node has 1 input" \
  "$BIN/megatrain-compile" "$M/fold_few_inputs.onnx" -o "$TMP/a.plan"
expect_line "recursive functions" \
  "$C $M/function_recursion.onnx: model-local function 'Ping' calls itself: Ping -> Pong -> Ping" \
  "$BIN/megatrain-compile" "$M/function_recursion.onnx" -o "$TMP/a.plan"
expect_line "functions 40 deep" \
  "$C $M/function_deep.onnx: model-local functions call each other more than 32 deep (from 'F0' down to 'F32')" \
  "$BIN/megatrain-compile" "$M/function_deep.onnx" -o "$TMP/a.plan"
expect_line "functions expanding to 2^24 nodes" \
  "$C $M/function_wide.onnx: inlining the model-local functions would give more than 65536 nodes and calls" \
  "$BIN/megatrain-compile" "$M/function_wide.onnx" -o "$TMP/a.plan"
expect_line "input of rank 9" \
  "$C $M/rank_nine_input.onnx: input 'x' has rank 9; at most 8 dims are supported" \
  "$BIN/megatrain-compile" "$M/rank_nine_input.onnx" -o "$TMP/a.plan"
expect_line "initializer size overflows" \
  "$C add ($M/huge_initializer.onnx): node 'add' (op Add, $N): initializer 'w' has shape [2147483648x2147483648x2147483648], whose size overflows 64 bits" \
  "$BIN/megatrain-compile" "$M/huge_initializer.onnx" -o "$TMP/a.plan"
expect_line "result size overflows" \
  "$C expand ($M/huge_expand.onnx): node 'expand' (op Expand, $N): output 0 ('y') has shape [2147483648x2147483648x2147483648], whose size overflows 64 bits" \
  "$BIN/megatrain-compile" "$M/huge_expand.onnx" -o "$TMP/a.plan"

# A good plan, then the same plan claiming format major version 2. Reshapes as copies and the
# gradients kept: edited plans are written as format 1.3 (no checksum), older than views (1.8)
# and the gradient staging ring (1.9).
"$BIN/megatrain-compile" "$TINY" -o "$TMP/good.plan" --shape input_ids=2x64 --state-home host --no-view-aliases --keep-gradients \
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
# One number changed inside a valid plan: it still parses, and the checksum refuses it.
python3 - "$TMP/good.txt" "$TMP/flip.txt" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
text, n = re.subn(r"offset: (\d+)", lambda m: "offset: " + str(int(m.group(1)) + 64), text, count=1)
assert n == 1, n
open(sys.argv[2], "w").write(text)
PY
protoc --encode=megatrain.plan.Plan -I "$SRC/plan" "$SRC/plan/plan.proto" <"$TMP/flip.txt" >"$TMP/flip.plan"
expect_error "plan edited after compiling (run)" "flip\.plan: checksum mismatch: the plan says 0x[0-9a-f]{8}, its contents give 0x[0-9a-f]{8}; the file is corrupt or was edited \(recompile it\)" \
  "$BIN/megatrain-run" "$TMP/flip.plan" --weights "$TINY" --steps 1
expect_error "plan edited after compiling (inspect)" "flip\.plan: checksum mismatch" \
  "$BIN/megatrain-inspect" "$TMP/flip.plan"
head -c 200 "$TMP/good.plan" >"$TMP/cut.plan"
expect_error "corrupt plan" "cut\.plan" \
  "$BIN/megatrain-run" "$TMP/cut.plan" --weights "$TINY" --steps 1
expect_error "weights file missing" "no_such\.onnx" \
  "$BIN/megatrain-run" "$TMP/good.plan" --weights "$TMP/no_such.onnx" --steps 1
expect_error "unknown flag" "--frobnicate" \
  "$BIN/megatrain-run" "$TMP/good.plan" --frobnicate

# Robustness (issue 14). edit_plan NAME PYTHON: good.plan's text form edited by a
# python expression on `t`, encoded again as $TMP/NAME.plan.
# An edited plan no longer matches its checksum: it is written as format 1.3, which has none.
edit_plan() {
  python3 -c "import re, sys; t = open('$TMP/good.txt').read(); t = $2; t = re.sub(r'\n *checksum: \d+', '', t).replace('format_minor: 4', 'format_minor: 3', 1); open('$TMP/$1.txt', 'w').write(t)"
  protoc --encode=megatrain.plan.Plan -I "$SRC/plan" "$SRC/plan/plan.proto" <"$TMP/$1.txt" >"$TMP/$1.plan"
}
# A pool near 2^64: the round-up and preflight's sum wrapped, then memset ran past the allocation.
edit_plan huge "re.sub(r'(pools \{\n(?:  .*\n)*?  size_bytes: )\d+', r'\g<1>18446744073709551615', t, count=1)"
huge="huge\.plan: pool [0-9]+ '[^']*': size 18446744073709551615 bytes is over the limit of 72057594037927936 \(2\^56\)$"
expect_error "pool size near 2^64 (run)" "$huge" "$BIN/megatrain-run" "$TMP/huge.plan" --weights "$TINY" --steps 1
expect_error "pool size near 2^64 (inspect)" "$huge" "$BIN/megatrain-inspect" "$TMP/huge.plan"
# An infinite predicted time: --memory-plot walked it forever.
edit_plan inf "re.sub(r'(?m)^  predicted_end_s: .*$', '  predicted_end_s: inf', t, count=1)"
expect_error "infinite predicted time (inspect --memory-plot)" \
  "inf\.plan: step [0-9]+: predicted_end_s is inf \(expected a finite time in \[0, 1e9\] seconds\)$" \
  "$BIN/megatrain-inspect" "$TMP/inf.plan" --memory-plot "$TMP/inf.svg"
expect_error "--microbatches past 2^32" "--microbatches expects 1 <= N <= 1024, got '4294967297'$" \
  "$BIN/megatrain-compile" "$TINY" -o "$TMP/a.plan" --shape input_ids=2x64 --loss next-token-ce \
  --microbatches 4294967297
expect_error "--visit-slots below 3" "--visit-slots expects N >= 3, got '2'$" \
  "$BIN/megatrain-compile" "$TINY" -o "$TMP/a.plan" --shape input_ids=2x64 --loss next-token-ce \
  --microbatches 2 --visit-slots 2
# External data leaving the model's folder: `..`, and a symlink to a file outside.
# external NAME LOCATION: the tiny model with its first float initializer stored at LOCATION.
external() {
  mkdir -p "$TMP/$1"
  python3 - "$TINY" "$TMP/$1/model.onnx" "$2" <<'PY'
import sys, onnx
model = onnx.load(sys.argv[1])
t = next(t for t in model.graph.initializer if t.data_type == onnx.TensorProto.FLOAT and len(t.dims) > 0)
t.ClearField("raw_data"); t.ClearField("float_data")
t.data_location = onnx.TensorProto.EXTERNAL
t.external_data.add(key="location", value=sys.argv[3])
onnx.save(model, sys.argv[2])
print(t.name)
PY
}
name=$(external dotdot "../../../../etc/passwd")
expect_error "external data with '..'" \
  "dotdot/model\.onnx: initializer '$name': external data location '\.\./\.\./\.\./\.\./etc/passwd' has a '\.\.' component; it must stay inside the model's directory$" \
  "$BIN/megatrain-run" "$TMP/good.plan" --weights "$TMP/dotdot/model.onnx" --steps 1
name=$(external link "w.bin")
ln -s /etc/passwd "$TMP/link/w.bin"
expect_error "external data through a symlink out" \
  "link/model\.onnx: initializer '$name': external data location 'w\.bin' resolves to /etc/passwd, outside the model's directory /.*/link$" \
  "$BIN/megatrain-run" "$TMP/good.plan" --weights "$TMP/link/model.onnx" --steps 1
name=$(external absolute "/etc/passwd")
expect_error "external data at an absolute path" \
  "absolute/model\.onnx: initializer '$name': external data location '/etc/passwd' is absolute; it must be relative to the model's directory$" \
  "$BIN/megatrain-run" "$TMP/good.plan" --weights "$TMP/absolute/model.onnx" --steps 1
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

# Standard output that cannot be written is an error of every tool (exit 1, one line),
# not a silent exit 0: the help, the compiler's summary and IR, a run's progress, a plan's
# schedule, all to /dev/full (ENOSPC).
to_full() { "$@" >/dev/full; }
F="error: writing standard output: No space left on device"
expect_line "megatrain-compile --help >/dev/full" "megatrain-compile: $F" \
  to_full "$BIN/megatrain-compile" --help
expect_line "megatrain-compile's summary >/dev/full" "megatrain-compile: $F" \
  to_full "$BIN/megatrain-compile" "$TINY" -o "$TMP/full.plan" --shape input_ids=2x64 --loss next-token-ce
expect_line "megatrain-compile --emit=mt >/dev/full" "megatrain-compile: $F" \
  to_full "$BIN/megatrain-compile" "$TINY" --emit=mt --shape input_ids=2x64
expect_line "megatrain-compile --emit=plan-text -o - >/dev/full" "megatrain-compile: $F" \
  to_full "$BIN/megatrain-compile" "$TINY" --emit=plan-text -o - --shape input_ids=2x64 --loss next-token-ce
expect_line "megatrain-compile --emit=mt -o /dev/full" \
  "megatrain-compile: error: cannot write '/dev/full': No space left on device" \
  "$BIN/megatrain-compile" "$TINY" --emit=mt --shape input_ids=2x64 -o /dev/full
expect_line "megatrain-run --help >/dev/full" "megatrain-run: $F" \
  to_full "$BIN/megatrain-run" --help
expect_line "megatrain-run's progress >/dev/full" "megatrain-run: $F" \
  to_full "$BIN/megatrain-run" "$TMP/good.plan" --weights "$TINY" "${FEED[@]}" --steps 2
expect_line "megatrain-inspect --help >/dev/full" "megatrain-inspect: $F" \
  to_full "$BIN/megatrain-inspect" --help
expect_line "megatrain-inspect >/dev/full" "megatrain-inspect: $F" \
  to_full "$BIN/megatrain-inspect" "$TMP/good.plan"
# megatrain-profile is built with the CUDA backend only; --help needs no GPU.
if [[ -x "$BIN/megatrain-profile" ]]; then
  expect_line "megatrain-profile --help >/dev/full" "megatrain-profile: $F" \
    to_full "$BIN/megatrain-profile" --help
else
  echo "skip  megatrain-profile --help >/dev/full: no megatrain-profile in $BIN (a build without CUDA)"
fi

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

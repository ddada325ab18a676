#!/usr/bin/env bash
# tool_cli.sh - the command line every tool shares (plan/lib/ToolCli.cpp): --version on every
# tool, help with its groups and examples, "did you mean" for a misspelt option, a long option
# with one dash named in its two-dash form, a value left out, --config FILE.toml (a value read,
# the command line winning, an unknown key), -o/--out, and `megatrain` running the tools.
set -u
BIN=$1
SRC=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
TINY=$SRC/frontends/models/tiny_transformer.onnx
passed=0
failed=0
check() {  # check NAME CONDITION-COMMAND...
  local name=$1
  shift
  if "$@"; then echo "ok    $name"; passed=$((passed + 1)); else echo "FAIL  $name"; failed=$((failed + 1)); fi
}
# expect_line NAME LINE COMMAND...: exit status exactly 1 and exactly LINE on stdout and stderr.
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

TOOLS=(megatrain megatrain-compile megatrain-run megatrain-inspect)
[[ -x "$BIN/megatrain-profile" ]] && TOOLS+=(megatrain-profile)
for tool in "${TOOLS[@]}"; do
  v=$("$BIN/$tool" --version)
  check "$tool --version: $v" grep -qE "^$tool [0-9]+\.[0-9]+\.[0-9]+ \(git [^)]+\), plan format [0-9]+\.[0-9]+$" <<<"$v"
  h=$("$BIN/$tool" --help)
  check "$tool --help: usage, --config and --version" \
    bash -c 'grep -q "^usage: '"$tool"'" <<<"$1" && grep -q -- "--config FILE.toml" <<<"$1" && grep -q -- "--version" <<<"$1"' _ "$h"
done
h=$("$BIN/megatrain-compile" --help)
check "megatrain-compile --help: groups, defaults, examples" \
  bash -c 'grep -q "^Memory (docs/tiering.md):" <<<"$1" && grep -q "default 1e-3" <<<"$1" && grep -q "^Examples:" <<<"$1" && grep -qE "^  -o,--out FILE" <<<"$1"' _ "$h"

C="megatrain-compile: error:"
R="megatrain-run: error:"
expect_line "did you mean (compile)" "$C unknown option '--devise-memory' (did you mean --device-memory? see --help)" \
  "$BIN/megatrain-compile" "$TINY" -o "$TMP/a.plan" --devise-memory 1GiB
expect_line "did you mean (run)" "$R unknown option '--stpes' (did you mean --steps? see --help)" \
  "$BIN/megatrain-run" x.plan --stpes 3
expect_line "nothing near" "$R unknown option '--frobnicate' (see --help)" "$BIN/megatrain-run" x.plan --frobnicate
expect_line "one dash" "$C '-shape' has one dash; long options take two: --shape (see --help)" \
  "$BIN/megatrain-compile" "$TINY" -shape input_ids=2x64
expect_line "one dash (run)" "$R '-weights' has one dash; long options take two: --weights (see --help)" \
  "$BIN/megatrain-run" x.plan -weights m.onnx
expect_line "value left out" "$R option '--steps' needs a value (see --help)" "$BIN/megatrain-run" x.plan --steps
expect_line "one size syntax" \
  "$C --device-memory expects a size such as 24GiB, 16000MB, 8GB, 1.5TiB or a byte count, got '24 gigs'" \
  "$BIN/megatrain-compile" "$TINY" -o "$TMP/a.plan" --device-memory "24 gigs"
expect_line "did you mean (megatrain)" "megatrain: error: unknown command 'trian' (did you mean train? see --help)" \
  "$BIN/megatrain" trian
expect_line "train without a length" \
  "megatrain: error: train: say how long to train with one of --steps N, --tokens N or --epochs F" \
  "$BIN/megatrain" train --model "$TMP" --data x.txt --out "$TMP/run"
printf 'model = "%s"\ndata = ["x.txt"]\nout = "%s"\n' "$TMP" "$TMP/run" >"$TMP/run.toml"
expect_line "train --config: the flags read from the file" \
  "megatrain: error: train: say how long to train with one of --steps N, --tokens N or --epochs F" \
  "$BIN/megatrain" train --config "$TMP/run.toml"

# --config: the TOML's values are used, the command line wins, an unknown key is an error.
printf 'shape = "input_ids=2x64"\nloss = "next-token-ce"\nlr = 0.5\nout = "%s"\n' "$TMP/from_toml.plan" >"$TMP/c.toml"
"$BIN/megatrain-compile" "$TINY" --config "$TMP/c.toml" --lr 0.25 >"$TMP/c.log" 2>&1
check "--config: the plan written where the TOML says" test -s "$TMP/from_toml.plan"
lr=$("$BIN/megatrain-inspect" "$TMP/from_toml.plan" --max-steps 1 | grep -o "AdamW lr [0-9.e-]*")
check "--config: the command line wins (lr 0.25): $lr" test "$lr" = "AdamW lr 0.25"
printf 'stepz = 3\n' >"$TMP/bad.toml"
expect_line "--config unknown key" "$R --config: unknown key 'stepz' (did you mean steps? see --help)" \
  "$BIN/megatrain-run" x.plan --config "$TMP/bad.toml"
expect_line "--config missing file" "$R --config: $TMP/none.toml was not readable (missing?)" \
  "$BIN/megatrain-run" x.plan --config "$TMP/none.toml"

# `megatrain CMD` runs megatrain-CMD with the same arguments.
"$BIN/megatrain" compile "$TINY" --out "$TMP/via.plan" --shape input_ids=2x64 --loss next-token-ce >/dev/null 2>&1
check "megatrain compile ... --out" test -s "$TMP/via.plan"
check "megatrain inspect" bash -c '"$1/megatrain" inspect "$2" --max-steps 1 | grep -q "^header"' _ "$BIN" "$TMP/via.plan"
check "megatrain run --help is megatrain-run's" bash -c '"$1/megatrain" run --help | grep -q "^usage: megatrain-run"' _ "$BIN"

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]

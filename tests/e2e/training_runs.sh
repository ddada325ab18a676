#!/usr/bin/env bash
# training_runs.sh - megatrain-run's long-run machinery through the real tools on the bundled tiny
# model: resume is bit-exact, a kill while saving loses nothing, Ctrl-C saves and exits 130,
# corrupt checkpoints are rejected by name, preflight refuses a plan too big for the machine,
# the data order follows --seed, and the progress/metrics output has its fields.
# A recompile with another --device-memory, path or precision resumes the checkpoint.
# usage: training_runs.sh BIN SRC CASE   (CASE: resume recompile kill sigint corrupt preflight data progress)
set -euo pipefail
BIN=$1
SRC=$2
CASE=$3
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
TINY=$SRC/frontends/models/tiny_transformer.onnx
cd "$TMP"

python3 "$SRC/frontends/python/make_corpus.py" --out corpus.bin >/dev/null
# A small batch keeps each step in the tens of milliseconds.
# Every home on the host with its gradient kept: the runs clip gradients, which needs them all
# on the host at once. Reshapes as copies: the preflight case edits the plan into format 1.3 (no
# checksum), older than views (1.8).
"$BIN/megatrain-compile" "$TINY" -o tiny.plan --shape input_ids=2x64 --state-home host --keep-gradients --no-view-aliases \
  --loss next-token-ce --logits logits --tokens input_ids --lr 3e-3 >/dev/null

run() { "$BIN/megatrain-run" tiny.plan --data corpus.bin "$@"; }
fail() { echo "FAIL: $*"; exit 1; }

# same_rows A B FIRST LAST: the metrics rows of steps FIRST..LAST agree on loss, lr and
# grad_norm as written (%.17g, so equal text is equal bits).
same_rows() {
  python3 - "$@" <<'PY'
import json, sys
a, b, first, last = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def rows(path):
    return {r["step"]: r for r in map(json.loads, open(path))}
ra, rb = rows(a), rows(b)
for step in range(first, last + 1):
    for key in ("loss", "lr", "grad_norm"):
        if ra[step].get(key) != rb[step].get(key):
            sys.exit(f"step {step}: {key} {ra[step].get(key)!r} != {rb[step].get(key)!r}")
print(f"steps {first}..{last}: losses equal, e.g. step {last} loss {ra[last]['loss']!r}")
PY
}

case $CASE in
resume)
  # The issue's equality: --steps 20 == --steps 10 --save D, then --steps 20 --resume D.
  run --weights "$TINY" --steps 20 --quiet --metrics full.jsonl --save full
  run --weights "$TINY" --steps 10 --quiet --metrics split.jsonl --save split
  run --steps 20 --quiet --metrics split.jsonl --save split --resume split >resume.out
  grep -q "(resumed at step 10, 10 steps in this run)" resume.out || fail "no resume summary: $(cat resume.out)"
  same_rows full.jsonl split.jsonl 1 20
  cmp full/step-20.ckpt split/step-20.ckpt || fail "the final checkpoints differ"
  [[ $(wc -l <split.jsonl) -eq 20 ]] || fail "split metrics have $(wc -l <split.jsonl) rows"
  # The same with a decaying, warmed-up schedule and clipping, all restored from the checkpoint.
  flags=(--lr-schedule cosine --warmup-steps 4 --min-lr 3e-4 --decay-steps 20 --clip-grad-norm 0.5 --seed 9)
  run --weights "$TINY" --steps 20 --quiet --metrics cfull.jsonl --save cfull "${flags[@]}"
  run --weights "$TINY" --steps 10 --quiet --metrics csplit.jsonl --save csplit "${flags[@]}"
  run --steps 20 --quiet --metrics csplit.jsonl --save csplit --resume csplit "${flags[@]}"
  same_rows cfull.jsonl csplit.jsonl 1 20
  cmp cfull/step-20.ckpt csplit/step-20.ckpt || fail "the final checkpoints differ (cosine, clipped)"
  echo "ok: 20 steps == 10 + resume to 20, bitwise (final checkpoints identical)"
  ;;
recompile)
  # Checkpoints are keyed by the training state: 10 steps, a recompile with another
  # --device-memory (and path), a resume to 20 == 20 steps unbroken, bitwise.
  # compile_half OUT FLAGS...: the tiny model with half its unconstrained device arena, or
  # the smallest budget that fits when half does not; prints "BUDGET of ARENA".
  compile_half() {
    local out=$1; shift
    local flags=(--shape input_ids=2x64 --loss next-token-ce --logits logits --tokens input_ids --lr 3e-3 "$@")
    local arena budget
    arena=$("$BIN/megatrain-compile" "$TINY" -o "$out" "${flags[@]}" 2>&1 | sed -n 's/.*device arena .*(\([0-9]*\) bytes).*/\1/p')
    [[ -n $arena ]] || fail "no arena size in the compile summary"
    budget=$((arena / 2))
    if ! "$BIN/megatrain-compile" "$TINY" -o "$out" "${flags[@]}" --device-memory $budget >half.log 2>&1; then
      budget=$(sed -n 's/.*the smallest budget that fits is [^(]*(\([0-9]*\) bytes).*/\1/p' half.log)
      [[ -n $budget ]] || fail "half the arena: $(cat half.log)"
      "$BIN/megatrain-compile" "$TINY" -o "$out" "${flags[@]}" --device-memory $budget >/dev/null
    fi
    echo "$budget of $arena"
  }
  mkdir -p elsewhere
  fit=$(compile_half elsewhere/half.plan)
  cmp -s tiny.plan elsewhere/half.plan && fail "the budget did not change the plan"
  run --weights "$TINY" --steps 20 --quiet --metrics full.jsonl --save full
  run --weights "$TINY" --steps 10 --quiet --metrics split.jsonl --save split
  cp -r split split_fp32 && cp -r split split_fp32b && cp split.jsonl split_fp32.jsonl
  "$BIN/megatrain-run" elsewhere/half.plan --data corpus.bin --steps 20 --quiet --metrics split.jsonl --save split \
    --resume split >resume.out
  grep -q "(resumed at step 10, 10 steps in this run)" resume.out || fail "no resume summary: $(cat resume.out)"
  same_rows full.jsonl split.jsonl 1 20
  cmp full/step-20.ckpt split/step-20.ckpt || fail "the final checkpoints differ"
  echo "ok: 10 steps, recompiled with --device-memory $fit bytes, resumed to 20 == 20 unbroken, bitwise"
  # Another --precision stores the same state (fp32 masters and moments): the step-10
  # checkpoint of the default (bf16) plan resumes under fp32 plans, with and without a
  # budget (equal to each other bitwise), whose checkpoints have the bf16 run's header and table.
  "$BIN/megatrain-compile" "$TINY" -o fp32.plan --shape input_ids=2x64 --loss next-token-ce --logits logits \
    --tokens input_ids --lr 3e-3 --precision fp32 >/dev/null
  compile_half fp32b.plan --precision fp32 >/dev/null
  for p in fp32 fp32b; do
    "$BIN/megatrain-run" $p.plan --data corpus.bin --steps 20 --quiet --metrics split_$p.jsonl --save split_$p \
      --resume split_$p >/dev/null
  done
  python3 - <<'PY' || fail "fp32 resumes"
import json
a = [json.loads(l) for l in open("split_fp32.jsonl")]
b = [json.loads(l) for l in open("split_fp32b.jsonl")]
assert len(a) == 20 and len(b) == 10, (len(a), len(b))  # split_fp32b.jsonl had no rows 1..10
for ra, rb in zip(a[10:], b):
    assert ra["step"] == rb["step"] and ra["loss"] == rb["loss"], (ra, rb)
print("fp32 resumes agree at steps 11..20, step 20 loss", a[-1]["loss"])
PY
  table=$(python3 -c "import struct; print(48 + struct.unpack_from('<Q', open('full/step-20.ckpt','rb').read(), 32)[0])")
  cmp -n "$table" full/step-20.ckpt split_fp32/step-20.ckpt || fail "fp32 and bf16 checkpoints have other headers"
  cmp split_fp32/step-20.ckpt split_fp32b/step-20.ckpt || fail "fp32 resumes differ"
  echo "ok: the bf16 step-10 checkpoint resumed under --precision fp32 (with and without a budget, bitwise equal)"
  ;;
kill)
  flags=(--steps 20 --quiet --save-every 5)
  run --weights "$TINY" "${flags[@]}" --metrics full.jsonl --save full
  # The second save (step 10) SIGKILLs the process half-way through its temp file.
  set +e
  MEGATRAIN_TEST_CRASH_IN_SAVE=2 run --weights "$TINY" "${flags[@]}" --metrics crash.jsonl --save crash 2>/dev/null
  rc=$?
  set -e
  [[ $rc -eq 137 ]] || fail "expected death by SIGKILL (137), got $rc"
  ls crash/step-10.ckpt.tmp.* >/dev/null 2>&1 || fail "no half-written temp file: $(ls crash)"
  [[ ! -e crash/step-10.ckpt ]] || fail "step-10.ckpt exists although its save was killed"
  [[ $(cat crash/latest) == step-5.ckpt ]] || fail "latest is $(cat crash/latest)"
  run --steps 20 --save-every 5 --log-every 20 --metrics crash.jsonl --save crash --resume crash >resume.out
  grep -q "resumed   crash/step-5.ckpt" resume.out || fail "did not resume from step 5: $(cat resume.out)"
  grep -q "removed   crash/step-10.ckpt.tmp" resume.out || fail "the temp file was not cleaned: $(cat resume.out)"
  same_rows full.jsonl crash.jsonl 1 20
  cmp full/step-20.ckpt crash/step-20.ckpt || fail "the final checkpoints differ"
  echo "ok: killed while saving step 10 (exit $rc), resumed from step 5, final state identical"
  ;;
sigint)
  # The binary itself in the background (not through run(), whose subshell would get the signal).
  "$BIN/megatrain-run" tiny.plan --data corpus.bin --weights "$TINY" --steps 100000 --save int \
    --metrics int.jsonl >int.out 2>&1 &
  pid=$!
  for _ in $(seq 600); do
    [[ -s int.jsonl && $(wc -l <int.jsonl) -ge 3 ]] && break
    sleep 0.05
  done
  kill -INT $pid
  set +e
  wait $pid
  rc=$?
  set -e
  [[ $rc -eq 130 ]] || fail "exit code $rc, expected 130: $(tail -3 int.out)"
  line=$(grep "^interrupted by SIGINT after step" int.out) || fail "no interruption line: $(tail -3 int.out)"
  n=$(sed -E 's/^interrupted by SIGINT after step ([0-9]+):.*/\1/' <<<"$line")
  [[ $line == "interrupted by SIGINT after step $n: checkpoint int/step-$n.ckpt (continue with --resume int)" ]] ||
    fail "unexpected line: $line"
  [[ -f int/step-$n.ckpt ]] || fail "no int/step-$n.ckpt"
  # The checkpoint resumes into the same state as a run that was never interrupted.
  total=$((n + 3))
  run --steps $total --quiet --save int --resume int --metrics int.jsonl >/dev/null
  run --weights "$TINY" --steps $total --quiet --save ref --metrics ref.jsonl
  same_rows ref.jsonl int.jsonl 1 $total
  cmp ref/step-$total.ckpt int/step-$total.ckpt || fail "resumed state differs"
  echo "ok: $line; resumed to step $total bitwise"
  ;;
corrupt)
  run --weights "$TINY" --steps 2 --quiet --save good
  size=$(stat -c %s good/step-2.ckpt)
  # make NAME PYTHON-EXPRESSION-ON-b: a directory holding one damaged copy as step-2.ckpt.
  make() {
    mkdir -p "$1"
    python3 -c "import sys; b = bytearray(open('good/step-2.ckpt','rb').read()); $2; open('$1/step-2.ckpt','wb').write(b)"
  }
  make magic "b[0:8] = b'NOTACKPT'"
  make version "b[8] = 9"
  make checksum "b[-40] ^= 1"
  make truncated "del b[len(b) // 2:]"
  # expect NAME REGEX: resuming from NAME warns with REGEX, then fails with one error line.
  expect() {
    set +e
    out=$(run --steps 3 --resume "$1" 2>&1 >/dev/null)
    rc=$?
    set -e
    [[ $rc -eq 1 ]] || fail "$1: exit $rc"
    grep -qE "^megatrain-run: warning: skipping $1/step-2.ckpt: $2\$" <<<"$out" || fail "$1: $out"
    grep -qx "megatrain-run: error: $1: none of its 1 checkpoints is valid" <<<"$out" || fail "$1: $out"
    echo "ok    $1: $(head -1 <<<"$out")"
  }
  expect magic "bad magic \(not a megatrain checkpoint\)"
  expect version "format version 9, this build reads versions 1 and 2"
  expect checksum "checksum mismatch \(stored 0x[0-9a-f]{8}, computed 0x[0-9a-f]{8}\)"
  expect truncated "truncated: $((size / 2)) of $size bytes"
  # A newer corrupt checkpoint is skipped in favour of an older good one.
  cp truncated/step-2.ckpt good/step-3.ckpt
  run --steps 4 --resume good --save good 2>warn.txt >/dev/null
  grep -qx "megatrain-run: warning: skipping good/step-3.ckpt: truncated: $((size / 2)) of $size bytes; resuming from good/step-2.ckpt instead" warn.txt ||
    fail "no warning: $(cat warn.txt)"
  # Other training state (here: another AdamW beta2) is refused outright, naming it and the fix.
  "$BIN/megatrain-compile" "$TINY" -o other.plan --shape input_ids=2x64 \
    --loss next-token-ce --logits logits --tokens input_ids --lr 3e-3 --beta2 0.95 >/dev/null
  set +e
  out=$("$BIN/megatrain-run" other.plan --data corpus.bin --steps 5 --resume good 2>&1)
  rc=$?
  set -e
  [[ $rc -eq 1 ]] && grep -qF "megatrain-run: error: good/step-4.ckpt: its training state differs from this plan's: beta2: checkpoint 0.999, plan 0.95. To continue from it, recompile with --beta2 0.999 " <<<"$out" ||
    fail "state mismatch: exit $rc: $out"
  echo "ok    state mismatch: $out"
  ;;
preflight)
  # The same plan claiming a 1 PiB pinned host pool.
  protoc --decode=megatrain.plan.Plan -I "$SRC/plan" "$SRC/plan/plan.proto" <tiny.plan >tiny.txt
  python3 - <<'PY'
import re
text = open("tiny.txt").read()
# pools { ... name: "host" ... size_bytes: N }: the pinned pool's size becomes 2^50.
text, n = re.subn(r'(pools \{[^}]*name: "host"[^}]*size_bytes: )\d+', lambda m: m.group(1) + str(2**50), text)
assert n == 1, n
# An edited plan no longer matches its checksum: written as format 1.3, which has none.
text, n = re.subn(r'\n *checksum: \d+', '', text)
assert n == 1, n
text = text.replace("format_minor: 4", "format_minor: 3", 1)
# Preflight is the check under test, not the plan's own host capacity.
text = re.sub(r'\n *host_capacity_bytes: \d+', '', text)
open("huge.txt", "w").write(text)
PY
  protoc --encode=megatrain.plan.Plan -I "$SRC/plan" "$SRC/plan/plan.proto" <huge.txt >huge.plan
  set +e
  out=$("$BIN/megatrain-run" huge.plan --weights "$TINY" --data corpus.bin --steps 1 2>&1)
  rc=$?
  set -e
  [[ $rc -eq 1 && $(grep -c . <<<"$out") -eq 1 ]] || fail "exit $rc: $out"
  grep -qE "^megatrain-run: error: preflight: the plan's pinned host pools and device arena \(which this backend keeps in host memory\) need 1024 TiB, this machine has [0-9.]+ [KMGT]iB available \(short by 10[0-9.]+ TiB\); recompile with a smaller --host-memory to move state to the device or disk \(--skip-preflight to try anyway\)$" <<<"$out" ||
    fail "message: $out"
  echo "ok    $out"
  # --skip-preflight goes on, and the allocation itself fails.
  set +e
  out=$("$BIN/megatrain-run" huge.plan --weights "$TINY" --data corpus.bin --steps 1 --skip-preflight 2>&1)
  rc=$?
  set -e
  [[ $rc -eq 1 ]] && grep -q "cannot allocate" <<<"$out" || fail "--skip-preflight: exit $rc: $out"
  echo "ok    --skip-preflight: $out"
  ;;
data)
  # Two token files, given as a list and by repeating the flag: the same windows.
  head -c 400000 corpus.bin >a.bin
  tail -c 300000 corpus.bin >b.bin
  "$BIN/megatrain-run" tiny.plan --weights "$TINY" --data a.bin,b.bin --steps 6 --quiet --metrics s0.jsonl
  "$BIN/megatrain-run" tiny.plan --weights "$TINY" --data a.bin --data b.bin --steps 6 --quiet --metrics s0b.jsonl
  "$BIN/megatrain-run" tiny.plan --weights "$TINY" --data a.bin,b.bin --steps 6 --quiet --metrics s1.jsonl --seed 1
  same_rows s0.jsonl s0b.jsonl 1 6
  python3 - <<'PY'
import json
l0 = [json.loads(l)["loss"] for l in open("s0.jsonl")]
l1 = [json.loads(l)["loss"] for l in open("s1.jsonl")]
assert l0 != l1, "seed 0 and seed 1 drew the same windows"
print("ok: --seed 1 draws other windows:", l0[0], "vs", l1[0])
PY
  # A token outside the sidecar's vocabulary is reported with file and offset.
  printf '{"dtype": "uint16", "vocab": 100}' >a.bin.json
  set +e
  out=$("$BIN/megatrain-run" tiny.plan --weights "$TINY" --data a.bin --steps 1 2>&1)
  set -e
  grep -qE "^megatrain-run: error: a.bin: token [0-9]+ at byte offset [0-9]+ \(token [0-9]+\) is outside the vocabulary of 100 \(a.bin.json\)$" <<<"$out" ||
    fail "vocab: $out"
  echo "ok    $(tail -1 <<<"$out")"
  ;;
progress)
  run --weights "$TINY" --steps 12 --log-every 5 --clip-grad-norm 1 --lr-schedule linear --warmup-steps 2 \
    --metrics m.jsonl --save ck >out.txt
  grep "^step .*loss" out.txt | cut -c1-10 >steps.txt
  printf 'step  5/12\nstep 10/12\nstep 12/12\n' | diff - steps.txt || fail "logged steps: $(cat out.txt)"
  for field in "loss " "lr " "grad norm " "tokens/s " "model TFLOP/s " "dev " " pinned + " " rss " "elapsed " "eta "; do
    grep "^step 10/12" out.txt | grep -qF -- "$field" || fail "progress line lacks '$field': $(grep '^step 10' out.txt)"
  done
  grep -q "^saved     ck/step-12.ckpt" out.txt || fail "no save line"
  grep -qE "^done      12 steps, loss .* tokens/s, mean step .* model .* TFLOP/s, elapsed " out.txt || fail "summary"
  python3 - <<'PY'
import json
rows = [json.loads(l) for l in open("m.jsonl")]
assert len(rows) == 12
for key in ("step", "loss", "tokens_per_s", "step_time_s", "tokens", "lr", "grad_norm", "elapsed_s"):
    assert all(key in r for r in rows), key
assert rows[0]["lr"] == 3e-3 / 2 and rows[1]["lr"] == 3e-3 and rows[-1]["lr"] == 0.0, [r["lr"] for r in rows]
print("ok: metrics rows carry lr, grad_norm and elapsed_s; lr", [round(r["lr"], 6) for r in rows[:3]], "...")
PY
  ;;
*)
  fail "unknown case $CASE"
  ;;
esac

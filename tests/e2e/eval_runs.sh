#!/usr/bin/env bash
# eval_runs.sh - evaluation through the real tools on the bundled tiny model: a --forward-only
# plan's loss is the training plan's forward loss on the same batch and weights (bitwise, cpu),
# evaluating leaves training bitwise unchanged, and bad combinations are refused by name.
# usage: eval_runs.sh BIN SRC CASE   (CASE: equal unaffected errors)
set -euo pipefail
BIN=$1
SRC=$2
CASE=$3
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
TINY=$SRC/frontends/models/tiny_transformer.onnx
cd "$TMP"

fail() { echo "FAIL: $*"; exit 1; }
compile() { "$BIN/megatrain-compile" "$TINY" --state-home host --keep-gradients --loss next-token-ce --logits logits --tokens input_ids --lr 3e-3 "$@" >/dev/null; }

python3 "$SRC/frontends/python/make_corpus.py" --out corpus.bin >/dev/null

case $CASE in
equal)
  # Training feeds one fixed batch every step (--input); the eval set is those same rows, in
  # order, so its one batch is that batch. After step s both see the weights step s wrote:
  # the eval loss of step s is the training loss of step s + 1, bit for bit (same kernels,
  # same operands, same order on the cpu backend).
  python3 - <<'PY'
import json, numpy as np
tokens = np.fromfile("corpus.bin", dtype=np.uint16)
rows = tokens[:4 * 64].reshape(4, 64)
np.save("batch.npy", rows.astype(np.int64))
rows.tofile("eval.bin")
json.dump({"dtype": "uint16"}, open("eval.bin.json", "w"))
PY
  for precision in fp32 bf16; do
    compile -o train.plan --shape input_ids=4x64 --precision $precision
    compile -o eval.plan --shape input_ids=4x64 --precision $precision --forward-only
    "$BIN/megatrain-run" train.plan --weights "$TINY" --input input_ids=batch.npy --steps 6 \
      --eval-plan eval.plan --eval-data eval.bin --eval-every 1 --metrics m.jsonl >out.txt
    python3 - "$precision" <<'PY'
import json, sys
rows = {r["step"]: r for r in map(json.loads, open("m.jsonl"))}
assert sorted(rows) == list(range(1, 7)), sorted(rows)
for step in range(1, 6):
    train, evaluated = rows[step + 1]["loss"], rows[step]["eval_loss"]
    if train != evaluated:
        sys.exit(f"{sys.argv[1]}: step {step}: eval loss {evaluated!r} != the next step's training loss {train!r}")
import math
assert rows[3]["eval_ppl"] == math.exp(rows[3]["eval_loss"]) or abs(rows[3]["eval_ppl"] / math.exp(rows[3]["eval_loss"]) - 1) < 1e-15
print(f"{sys.argv[1]}: eval loss == next training loss at steps 1..5, e.g. {rows[5]['eval_loss']!r}")
PY
  done
  # An eval plan whose loss reads a targets input (--targets) takes the eval files' loss masks:
  # an all-ones mask gives bitwise the loss of the plain eval plan, a half-zero one another.
  compile -o train.plan --shape input_ids=4x64 --precision fp32
  compile -o eval.plan --shape input_ids=4x64 --precision fp32 --forward-only
  compile -o eval-t.plan --shape input_ids=4x64 --precision fp32 --forward-only --targets targets
  python3 - <<'PY'
import json
for name, mask in (("ones", b"\x01" * 256), ("half", b"\x01" * 128 + b"\x00" * 128)):
    open(f"eval-{name}.bin", "wb").write(open("eval.bin", "rb").read())
    open(f"eval-{name}.bin.mask", "wb").write(mask)
    json.dump({"dtype": "uint16", "mask": f"eval-{name}.bin.mask"}, open(f"eval-{name}.bin.json", "w"))
PY
  for set in plain:eval.plan:eval.bin ones:eval-t.plan:eval-ones.bin half:eval-t.plan:eval-half.bin; do
    IFS=: read -r name plan data <<<"$set"
    "$BIN/megatrain-run" train.plan --weights "$TINY" --input input_ids=batch.npy --steps 2 --quiet \
      --eval-plan "$plan" --eval-data "$data" --metrics "t-$name.jsonl" >/dev/null
  done
  python3 - <<'PY'
import json
loss = {n: json.loads(open(f"t-{n}.jsonl").readlines()[-1])["eval_loss"] for n in ("plain", "ones", "half")}
assert loss["plain"] == loss["ones"], loss
assert loss["half"] != loss["plain"] and 0 < loss["half"] < 20, loss
print("targets: an all-ones mask gives the plain eval loss bitwise, half a mask another:", loss)
PY
  if "$BIN/megatrain-run" train.plan --weights "$TINY" --input input_ids=batch.npy --steps 1 --quiet \
    --eval-plan eval.plan --eval-data eval-half.bin 2>err.txt; then fail "a masked eval set under a plan without --targets ran"; fi
  grep -qF "eval-half.bin has a loss mask" err.txt || fail "$(cat err.txt)"
  grep -q "^eval      eval.plan: 1 batches of \[4, 64\] tokens, after every 1 steps and the last" out.txt ||
    fail "no eval summary line: $(cat out.txt)"
  grep "^step 3/6" out.txt | grep -q "eval loss .* ppl " || fail "no eval loss in the progress line: $(cat out.txt)"
  ;;
unaffected)
  # Training with evaluation gives bitwise the losses and weights of training without it.
  compile -o train.plan --shape input_ids=2x64
  compile -o eval.plan --shape input_ids=3x64 --forward-only
  head -c 40000 corpus.bin >eval.bin
  cp corpus.bin.json eval.bin.json 2>/dev/null || true
  common=(--data corpus.bin --steps 7 --quiet --lr-schedule cosine --min-lr 3e-4 --clip-grad-norm 1 --seed 3)
  "$BIN/megatrain-run" train.plan --weights "$TINY" "${common[@]}" --metrics plain.jsonl --save plain
  "$BIN/megatrain-run" train.plan --weights "$TINY" "${common[@]}" --metrics eval.jsonl --save with \
    --eval-plan eval.plan --eval-data eval.bin --eval-every 3 --eval-batches 4
  cmp plain/step-7.ckpt with/step-7.ckpt || fail "the final checkpoints differ with evaluation"
  python3 - <<'PY'
import json
plain = {r["step"]: r for r in map(json.loads, open("plain.jsonl"))}
evaluated = {r["step"]: r for r in map(json.loads, open("eval.jsonl"))}
for step in range(1, 8):
    for key in ("loss", "lr", "grad_norm"):
        assert plain[step][key] == evaluated[step][key], (step, key, plain[step][key], evaluated[step][key])
steps = [s for s in sorted(evaluated) if "eval_loss" in evaluated[s]]
assert steps == [3, 6, 7], steps
assert all("eval_ppl" in evaluated[s] and "eval_time_s" in evaluated[s] for s in steps)
assert not any("eval_loss" in r for r in plain.values())
# The eval set is the same every time, the weights move: the losses differ but are finite.
losses = [evaluated[s]["eval_loss"] for s in steps]
assert len(set(losses)) == 3 and all(0 < l < 20 for l in losses), losses
print("ok: losses, lr, grad norms and the final checkpoint are bitwise the same with evaluation; eval", losses)
PY
  # Evaluation with the same weights twice gives the same loss: the same batches in the same order.
  "$BIN/megatrain-run" train.plan --weights "$TINY" --data corpus.bin --steps 2 --quiet --metrics a.jsonl \
    --eval-plan eval.plan --eval-data eval.bin --eval-batches 4
  "$BIN/megatrain-run" train.plan --weights "$TINY" --data corpus.bin --steps 2 --quiet --metrics b.jsonl \
    --eval-plan eval.plan --eval-data eval.bin --eval-batches 4
  [[ $(grep -o '"eval_loss": [^,]*' a.jsonl) == $(grep -o '"eval_loss": [^,]*' b.jsonl) ]] || fail "eval not deterministic"
  [[ $(grep -c eval_loss a.jsonl) -eq 1 ]] || fail "without --eval-every only the last step evaluates"
  echo "ok: without --eval-every only the last step evaluates, the same way every run"
  ;;
errors)
  compile -o train.plan --shape input_ids=2x64
  compile -o eval.plan --shape input_ids=2x64 --forward-only
  "$BIN/megatrain-compile" "$SRC/frontends/models/mlp.onnx" -o mlp-eval.plan --shape x=4x16,labels=4 --loss-output loss --forward-only >/dev/null
  # expect_error MESSAGE COMMAND...: the command fails with MESSAGE on stderr.
  expect_error() {
    local message=$1
    shift
    if "$@" >out.txt 2>err.txt; then fail "succeeded: $*"; fi
    grep -qF -- "$message" err.txt || fail "expected '$message', got: $(cat err.txt)"
  }
  run() { "$BIN/megatrain-run" "$@" --steps 1 --quiet; }
  expect_error "eval.plan is an evaluation plan (megatrain-compile --forward-only): it has no gradients or updates, so it cannot train" \
    run eval.plan --weights "$TINY" --data corpus.bin
  expect_error "--eval-plan train.plan is a training plan, not an evaluation plan (compile it with megatrain-compile --forward-only)" \
    run train.plan --weights "$TINY" --data corpus.bin --eval-plan train.plan --eval-data corpus.bin
  # The first of the MLP's parameters in the evaluation plan's order is named.
  expect_error "is not a parameter of train.plan (compile both plans from the same model)" \
    run train.plan --weights "$TINY" --data corpus.bin --eval-plan mlp-eval.plan --eval-data corpus.bin
  grep -qE -- "--eval-plan mlp-eval.plan: parameter 'fc[0-9]\.(weight|bias)' is not a parameter" err.txt \
    || fail "expected an MLP parameter named, got: $(cat err.txt)"
  "$BIN/megatrain-compile" "$SRC/frontends/models/mlp.onnx" -o mlp.plan --shape x=4x16,labels=4 --loss-output loss >/dev/null
  expect_error "--eval-plan mlp-eval.plan: the plan has no token input for --eval-data to feed (compile it with --loss next-token-ce)" \
    run mlp.plan --weights "$SRC/frontends/models/mlp.onnx" --eval-plan mlp-eval.plan --eval-data corpus.bin
  expect_error "--eval-plan needs --eval-data TOKENS.bin" run train.plan --weights "$TINY" --data corpus.bin --eval-plan eval.plan
  expect_error "--eval-data needs --eval-plan EVAL.plan" run train.plan --weights "$TINY" --data corpus.bin --eval-data corpus.bin
  expect_error "--eval-every needs --eval-plan" run train.plan --weights "$TINY" --data corpus.bin --eval-every 2
  head -c 200 corpus.bin >short.bin
  expect_error "--eval-data holds 1 windows of 64 tokens, not one batch of 2" \
    run train.plan --weights "$TINY" --data corpus.bin --eval-plan eval.plan --eval-data short.bin
  head -c 1024 corpus.bin >four.bin
  expect_error "--eval-batches 5: --eval-data holds 8 windows of 64 tokens, 4 batches of 2 (pass --eval-batches 4 or less)" \
    run train.plan --weights "$TINY" --data corpus.bin --eval-plan eval.plan --eval-data four.bin --eval-batches 5
  # The plan says what it is, in megatrain-inspect and the compiler's summary. (Whole
  # outputs to files: under pipefail, `inspect | grep -q` fails when grep stops reading early.)
  "$BIN/megatrain-inspect" eval.plan --max-steps 1 >eval.inspect
  "$BIN/megatrain-inspect" train.plan --max-steps 1 >train.inspect
  grep -q "^  kind           evaluation (forward and loss only" eval.inspect ||
    fail "megatrain-inspect does not show the evaluation plan"
  grep -q "^  kind           training" train.inspect ||
    fail "megatrain-inspect does not show the training plan"
  echo "ok: every refusal names what is wrong"
  ;;
*)
  fail "unknown case $CASE"
  ;;
esac

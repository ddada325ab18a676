#!/usr/bin/env bash
# train_command.sh - `megatrain train` end to end on the CPU backend: a tiny Hugging Face Llama
# directory (bf16 safetensors and a tokenizer, as save_pretrained writes it) and a text file,
# evaluated on another every 2 steps,
# to RUN_DIR/hf, which transformers loads with the trained weights and whose logits equal
# megatrain's (fp32, 1e-4); the same command run again resumes from the checkpoint instead of
# starting over; config.toml holds the resolved run.
set -u
BIN=$1
SRC=$2
WORK=$3
rm -rf "$WORK"
mkdir -p "$WORK"
passed=0
failed=0
check() {
  local name=$1
  shift
  if "$@"; then echo "ok    $name"; passed=$((passed + 1)); else echo "FAIL  $name"; failed=$((failed + 1)); fi
}

# The committed fixture when there is one, else one made by the project's script.
HF=$SRC/tests/models/hf/tiny_llama
if [[ ! -f $HF/config.json ]]; then
  HF=$WORK/hf_llama
  python3 "$SRC/tests/models/make_tiny_hf.py" --out "$HF" >/dev/null 2>&1 || { echo "FAIL  make_tiny_hf.py"; exit 1; }
fi
for i in $(seq 40); do
  echo "Line $i of the notes: every tensor has a home, on the device, in host memory or on the disk."
done >"$WORK/notes.txt"
for i in $(seq 10); do echo "Held-out line $i: a budget too small names the smallest one that fits."; done >"$WORK/eval.txt"

RUN=$WORK/run
CMD=("$BIN/megatrain" train --model "$HF" --data "$WORK/notes.txt" --out "$RUN" --steps 3 --batch 2 --seq 16
     --backend cpu --lr 1e-3 --export-dtype fp32 --eval-data "$WORK/eval.txt" --eval-every 2)
"${CMD[@]}" >"$WORK/first.log" 2>&1
rc=$?
check "first run exits 0 (exit $rc)" test $rc -eq 0 || sed 's/^/      /' "$WORK/first.log"
check "stages named" bash -c 'grep -q "\[1/6\] exporting the graph" "$1" && grep -q "\[3/6\] compiling" "$1" && grep -q "\[5/6\] training to step 3" "$1"' _ "$WORK/first.log"
check "text tokenized with the model's tokenizer" test -s "$RUN/data/train.bin"
check "3 metrics rows" test "$(grep -c '"step"' "$RUN/metrics.jsonl")" -eq 3
check "evaluated at steps 2 and 3 (eval_loss in the metrics)" test "$(grep -c '"eval_loss": *[0-9]' "$RUN/metrics.jsonl")" -eq 2
check "config.toml: steps, batch, seq, lr" bash -c 'grep -qx "steps = 3" "$1" && grep -qx "batch = 2" "$1" && grep -qx "seq = 16" "$1" && grep -qx "lr = \"1e-3\"" "$1"' _ "$RUN/config.toml"
for f in config.json model.safetensors tokenizer.json; do check "hf/$f" test -s "$RUN/hf/$f"; done

# transformers loads RUN_DIR/hf: no weight missing, every one changed by training.
python3 - "$HF" "$RUN/hf" >"$WORK/load.log" 2>&1 <<'PY'
import sys, torch
from transformers import AutoModelForCausalLM, AutoTokenizer
src, out = sys.argv[1], sys.argv[2]
model, info = AutoModelForCausalLM.from_pretrained(out, torch_dtype=torch.float32, output_loading_info=True)
assert not info["missing_keys"] and not info["unexpected_keys"], info
AutoTokenizer.from_pretrained(out)
before = AutoModelForCausalLM.from_pretrained(src, torch_dtype=torch.float32).state_dict()
changed = [n for n, p in model.state_dict().items() if not torch.equal(p, before[n])]
assert len(changed) == len(before), f"{len(changed)} of {len(before)} weights changed"
print("loaded", len(before), "weights, all trained")
PY
rc=$?
check "transformers loads hf/ with trained weights: $(tail -1 "$WORK/load.log")" test $rc -eq 0 || sed 's/^/      /' "$WORK/load.log"

# megatrain's own logits on the trained weights against transformers' on RUN_DIR/hf (fp32, 1e-4):
# the trained model out as ONNX (from the same checkpoint, no step run), a fp32 plan keeping
# its logits, one step's forward on fixed ids (the forward runs before that step's update).
if "$BIN/megatrain-run" --help | grep -q -- "--export-hf"; then
  # megatrain-run reads Hugging Face directories: the graph-only export and RUN_DIR/hf's weights.
  TRAINED=$RUN/model.onnx
  WEIGHTS=$RUN/hf
  echo "ok" >"$WORK/export.log"
else
  "$BIN/megatrain-run" "$RUN/train.plan" --weights "$RUN/model.onnx" --resume "$RUN/checkpoints" \
    --data "$RUN/data/train.bin" --steps 3 --backend cpu --quiet --export-onnx "$WORK/trained.onnx" >"$WORK/export.log" 2>&1
  TRAINED=$WORK/trained.onnx
  WEIGHTS=$TRAINED
fi
"$BIN/megatrain-compile" "$TRAINED" -o "$WORK/logits.plan" --shape input_ids=2x16 --loss next-token-ce \
  --precision fp32 --keep-output logits >"$WORK/logits_compile.log" 2>&1
python3 -c "import numpy as np; np.save('$WORK/ids.npy', (np.arange(32).reshape(2, 16) * 7 % 300).astype(np.int64))"
"$BIN/megatrain-run" "$WORK/logits.plan" --weights "$WEIGHTS" --input input_ids="$WORK/ids.npy" --steps 1 \
  --backend cpu --quiet --dump-output logits="$WORK/logits.npy" >"$WORK/logits_run.log" 2>&1
python3 - "$RUN/hf" "$WORK/ids.npy" "$WORK/logits.npy" >"$WORK/logits.log" 2>&1 <<'PY'
import sys, numpy as np, torch
from transformers import AutoModelForCausalLM
model = AutoModelForCausalLM.from_pretrained(sys.argv[1], torch_dtype=torch.float32).eval()
ids = torch.from_numpy(np.load(sys.argv[2]))
with torch.no_grad():
    theirs = model(ids).logits.numpy()
ours = np.load(sys.argv[3])
err = float(np.abs(theirs - ours).max())
print(f"max |transformers - megatrain| = {err:.2e}")
assert err < 1e-4, err
PY
rc=$?
check "transformers' logits on hf/ equal megatrain's: $(tail -1 "$WORK/logits.log")" test $rc -eq 0 || \
  cat "$WORK/export.log" "$WORK/logits_compile.log" "$WORK/logits_run.log" "$WORK/logits.log" | tail -20 | sed 's/^/      /'

# The same command again resumes: no export, compile or tokenizing, and megatrain-run resumes at step 3.
"${CMD[@]}" >"$WORK/second.log" 2>&1
rc=$?
check "second run exits 0 (exit $rc)" test $rc -eq 0 || sed 's/^/      /' "$WORK/second.log"
check "second run resumes" bash -c 'grep -q "\[5/6\] resuming from .*checkpoints to step 3" "$1" && grep -q "resumed .*step 3" "$1"' _ "$WORK/second.log"
check "second run reuses the graph and plan" bash -c 'grep -q "exported before" "$1" && grep -q "compiled before" "$1"' _ "$WORK/second.log"
check "still 3 metrics rows" test "$(grep -c '"step"' "$RUN/metrics.jsonl")" -eq 3

# Gradient clipping waits for every gradient, so `train` keeps the state in host memory for it
# (megatrain-run refuses --clip-grad-norm with updates on the device).
CLIP=$WORK/clip
"$BIN/megatrain" train --model "$HF" --data "$WORK/notes.txt" --out "$CLIP" --steps 2 --batch 2 --seq 16 \
  --backend cpu --clip-grad-norm 1.0 >"$WORK/clip.log" 2>&1
rc=$?
check "--clip-grad-norm trains (exit $rc)" test $rc -eq 0 || sed 's/^/      /' "$WORK/clip.log"
check "--clip-grad-norm: every parameter's state in host memory" \
  bash -c '"$1/megatrain-inspect" "$2/train.plan" | grep -qE "^  device +0 parameters, 0 B of state"' _ "$BIN" "$CLIP"
check "--clip-grad-norm: gradients kept, no staging ring" \
  bash -c '! "$1/megatrain-inspect" "$2/train.plan" | grep -q "grad_stage"' _ "$BIN" "$CLIP"

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]

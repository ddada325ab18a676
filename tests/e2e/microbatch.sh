#!/usr/bin/env bash
# microbatch.sh - megatrain-compile --microbatches N through the real tools on the CPU backend.
# usage: microbatch.sh BIN SRC CASE
#   same_demo, same_llama: with --input (one array feeds every micro-batch) N = 2 trains 10 steps
#     to the losses and weights of N = 1 bit for bit (each part is 0.5 g, from the backward seeded
#     with 0.5 rather than scaled after it, accumulated in fp32 on the host: 0.5 g + 0.5 g == g
#     exactly); the N = 2 plan copies micro-batch 1's gradients
#     into the gradient staging ring (grad_stage:<name>) and adds them with ACCUMULATE into the
#     host accumulator (--keep-gradients keeps it there). The same with --clip-grad-norm.
#   accumulate: N = 2 fed two different [B, S] arrays (--input input_ids=A.npy --input
#     input_ids@1=B.npy) against N = 1 at batch 2B fed concat(A, B): every row has S - 1 targets,
#     so the mean of the two micro-batch means is the full-batch mean, and so are its gradients.
#   data: --data with N = 2 draws 2 windows per step per row: tokens per step 2*B*S, loss falls;
#     megatrain-inspect shows the micro-batch count; resume continues the data bit-exactly.
#   budget: N = 2 under a device budget (half its unconstrained arena) compiles, passes the
#     verifier (megatrain-compile runs it) and trains to the unconstrained N = 2 losses and
#     weights bit for bit.
# The accumulate and data cases compare against another batch grouping and compile in exact
# fp32; the others (bit-for-bit against themselves) use the default bf16.
set -euo pipefail
BIN=$1
SRC=$2
CASE=$3
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cd "$TMP"
fail() { echo "FAIL: $*"; exit 1; }

TINY=$SRC/frontends/models/tiny_transformer.onnx
LLAMA=$SRC/tests/models/llm/llama_opt.onnx

# compile NAME MODEL [flags]
compile() {
  local name=$1 model=$2; shift 2
  # The host path of micro-batches (parts through the staging ring, host ACCUMULATE, clipping):
  # every home and accumulator on the host (--keep-gradients); tests/e2e/homes_bitwise.sh
  # covers the device accumulators.
  "$BIN/megatrain-compile" "$model" -o "$name.plan" --state-home host --keep-gradients "$@" > "$name.log" 2>&1 || { cat "$name.log"; fail "compile $name"; }
}
# train NAME MODEL STEPS [feed flags]: NAME.losses (one per line), NAME.safetensors
train() {
  local name=$1 model=$2 steps=$3; shift 3
  "$BIN/megatrain-run" "$name.plan" --weights "$model" "$@" --steps "$steps" --quiet \
    --metrics "$name.jsonl" --export-safetensors "$name.safetensors" > "$name.run" 2>&1 ||
    { cat "$name.run"; fail "train $name"; }
  python3 -c "
import json
for line in open('$name.jsonl'):
    print(repr(json.loads(line)['loss']))" > "$name.losses"
}
# close A B RTOL WRTOL [SKIP...]: the losses of runs A and B agree to RTOL relative, their
# trained weights to WRTOL (per tensor, the largest difference over the largest magnitude),
# but for the tensors SKIP (printed, not checked).
close() {
  python3 - "$@" <<'PY'
import json, struct, sys
import numpy as np
a, b, rtol, wrtol, skip = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), sys.argv[5:]
la = [float(x) for x in open(a + ".losses")]
lb = [float(x) for x in open(b + ".losses")]
assert len(la) == len(lb) and la, (la, lb)
worst = max(abs(x - y) / abs(x) for x, y in zip(la, lb))
print(f"{a} vs {b}: losses {la[0]:.6f} -> {la[-1]:.6f}, largest relative difference {worst:.3g}")
assert worst <= rtol, list(zip(la, lb))
def tensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", info
        s, e = info["data_offsets"]
        out[name] = np.frombuffer(raw[8 + n + s:8 + n + e], dtype=np.float32).astype(np.float64)
    return out
ta, tb = tensors(a + ".safetensors"), tensors(b + ".safetensors")
assert ta.keys() == tb.keys() and ta
rel = {k: np.max(np.abs(ta[k] - tb[k])) / max(np.max(np.abs(ta[k])), 1e-30) for k in ta}
for k in skip:
    print(f"{a} vs {b}: {k} not checked: relative difference {rel.pop(k):.3g}")
worst = max(rel, key=rel.get)
print(f"{a} vs {b}: {len(rel)} trained tensors, largest relative difference {rel[worst]:.3g} ({worst})")
assert rel[worst] <= wrtol, (worst, rel[worst])
PY
}

case $CASE in
same_demo | same_llama)
  if [[ $CASE == same_demo ]]; then
    MODEL=$TINY
    FLAGS=(--shape input_ids=2x64 --loss next-token-ce --lr 3e-3)
    python3 -c "
import numpy as np
np.save('batch.npy', np.random.default_rng(7).integers(0, 256, size=(2, 64), dtype=np.int64))"
    FEED=batch.npy
  else
    MODEL=$LLAMA
    FLAGS=()
    FEED=$SRC/tests/models/llm/input_ids.npy
  fi
  compile one "$MODEL" "${FLAGS[@]}"
  compile two "$MODEL" "${FLAGS[@]}" --microbatches 2
  "$BIN/megatrain-compile" "$MODEL" -o - --emit=plan-text --state-home host --keep-gradients "${FLAGS[@]}" --microbatches 2 > two.txt
  grep -q 'source: "input_ids@1"' two.txt || fail "the N = 2 plan has no input input_ids@1"
  grep -q 'microbatches: 2' two.txt || fail "the N = 2 plan's header says no microbatches: 2"
  grep -q 'kind: ACCUMULATE' two.txt || fail "the N = 2 plan has no ACCUMULATE host task"
  grep -q 'name: "grad_stage:' two.txt || fail "the N = 2 plan has no grad_stage ring tensor"
  train one "$MODEL" 10 --input "input_ids=$FEED"
  train two "$MODEL" 10 --input "input_ids=$FEED"
  cmp -s one.losses two.losses || { paste one.losses two.losses; fail "N = 2 losses differ from N = 1"; }
  close one two 0 0
  # Gradient clipping reads the accumulated grad:<name> before any update: bitwise too.
  cp one.plan oneclip.plan
  cp two.plan twoclip.plan
  train oneclip "$MODEL" 5 --input "input_ids=$FEED" --clip-grad-norm 0.5
  train twoclip "$MODEL" 5 --input "input_ids=$FEED" --clip-grad-norm 0.5
  close oneclip twoclip 0 0
  ;;
accumulate)
  python3 -c "
import numpy as np
rng = np.random.default_rng(11)
a = rng.integers(0, 256, size=(2, 64), dtype=np.int64)
b = rng.integers(0, 256, size=(2, 64), dtype=np.int64)
np.save('a.npy', a); np.save('b.npy', b); np.save('ab.npy', np.concatenate([a, b]))"
  # Exact fp32: the two groupings sum the same products in another order, which bf16
  # operands would amplify past the tolerance.
  FLAGS=(--loss next-token-ce --lr 3e-3 --precision fp32)
  compile full "$TINY" "${FLAGS[@]}" --shape input_ids=4x64
  compile split "$TINY" "${FLAGS[@]}" --shape input_ids=2x64 --microbatches 2
  cp split.plan swapped.plan
  cp split.plan same.plan
  train full "$TINY" 10 --input input_ids=ab.npy
  train split "$TINY" 10 --input input_ids=a.npy --input input_ids@1=b.npy
  # The arrays swapped (the order of micro-batches does not matter), and A in both
  # micro-batches (a different step, so input_ids@1 is really fed on its own).
  train swapped "$TINY" 10 --input input_ids=b.npy --input input_ids@1=a.npy
  train same "$TINY" 10 --input input_ids=a.npy
  # Losses agree to 1e-6 relative. Weights to 1e-5: the gradients differ in the order of
  # their sums (rows of one batch against two sums of half the rows), and AdamW divides by
  # sqrt(v), which magnifies rounding where a gradient nearly cancels. attn.k.bias is not
  # checked: softmax ignores a shift of every key by the same bias, so its gradient is zero
  # up to rounding, and AdamW turns that rounding into full-size steps in either run.
  close full split 1e-6 1e-5 attn.k.bias
  close full swapped 1e-6 1e-5 attn.k.bias
  if python3 - <<'PY'
a = [float(x) for x in open("full.losses")]
b = [float(x) for x in open("same.losses")]
raise SystemExit(0 if max(abs(x - y) for x, y in zip(a, b)) > 1e-3 else 1)
PY
  then echo "ok: feeding only A to both micro-batches gives other losses"; else fail "input_ids@1 is not fed separately"; fi
  ;;
data)
  python3 "$SRC/frontends/python/make_corpus.py" --out corpus.bin >/dev/null
  compile two "$TINY" --shape input_ids=2x64 --loss next-token-ce --lr 3e-3 --microbatches 2 --precision fp32
  "$BIN/megatrain-inspect" two.plan > inspect.txt
  grep -qE "^ *microbatches +2$" inspect.txt || { cat inspect.txt; fail "inspect shows no micro-batch count"; }
  grep -qE "^ *tokens +256 per step" inspect.txt || { cat inspect.txt; fail "inspect: tokens per step is not 2*2*64"; }
  "$BIN/megatrain-run" two.plan --weights "$TINY" --data corpus.bin --steps 30 --metrics m.jsonl > out.txt ||
    { cat out.txt; fail "train with --data"; }
  grep -qE "^tokens +256 per step" out.txt || { cat out.txt; fail "tokens per step is not 2*2*64"; }
  python3 - <<'PY'
import json
rows = [json.loads(l) for l in open("m.jsonl")]
assert len(rows) == 30 and all(r["tokens"] == 256 for r in rows), rows[0]
first = sum(r["loss"] for r in rows[:5]) / 5
last = sum(r["loss"] for r in rows[-5:]) / 5
print(f"ok: N = 2 with --data, 256 tokens per step, mean loss of steps 1-5 {first:.4f}, 26-30 {last:.4f}")
assert last < first - 0.05, (first, last)
PY
  # Micro-batch 0 takes the next B windows, micro-batch 1 the B after them: the same 4 windows
  # a batch of 4 takes, so N = 1 at 4x64 sees the same tokens and reports the same losses.
  compile four "$TINY" --shape input_ids=4x64 --loss next-token-ce --lr 3e-3 --precision fp32
  "$BIN/megatrain-run" four.plan --weights "$TINY" --data corpus.bin --steps 10 --metrics four.jsonl --quiet >/dev/null
  python3 - <<'PY'
import json
two = [r["loss"] for r in map(json.loads, open("m.jsonl"))][:10]
four = [r["loss"] for r in map(json.loads, open("four.jsonl"))]
worst = max(abs(a - b) / abs(b) for a, b in zip(two, four))
print(f"ok: N = 2 at 2x64 against N = 1 at 4x64 on the same windows: losses agree to {worst:.3g} relative")
assert len(four) == 10 and worst <= 1e-6, list(zip(two, four))
PY
  # 12 steps, a checkpoint at 6, resume to 12: the same losses (both micro-batches' windows
  # follow the sampler position the checkpoint holds).
  "$BIN/megatrain-run" two.plan --weights "$TINY" --data corpus.bin --steps 12 --metrics full.jsonl --quiet >/dev/null
  "$BIN/megatrain-run" two.plan --weights "$TINY" --data corpus.bin --steps 6 --save ck --save-every 6 --quiet >/dev/null
  "$BIN/megatrain-run" two.plan --weights "$TINY" --data corpus.bin --steps 12 --resume ck --metrics resumed.jsonl --quiet >/dev/null
  python3 - <<'PY'
import json
full = {r["step"]: r["loss"] for r in map(json.loads, open("full.jsonl"))}
resumed = {r["step"]: r["loss"] for r in map(json.loads, open("resumed.jsonl"))}
assert sorted(resumed) == list(range(7, 13)), sorted(resumed)
assert all(full[s] == resumed[s] for s in resumed), [(full[s], resumed[s]) for s in resumed]
print("ok: resumed at step 6, steps 7-12 bitwise equal to the uninterrupted run")
PY
  ;;
budget)
  FLAGS=(--shape input_ids=2x64 --loss next-token-ce --lr 3e-3 --microbatches 2)
  compile free "$TINY" "${FLAGS[@]}"
  FULL=$(sed -n 's/.*device arena .*(\([0-9]*\) bytes).*/\1/p' free.log)
  [[ -n $FULL ]] || { cat free.log; fail "no arena size in the summary"; }
  BUDGET=$((FULL / 2))
  compile half "$TINY" "${FLAGS[@]}" --device-memory "$BUDGET"
  ARENA=$(sed -n 's/.*device arena .*(\([0-9]*\) bytes).*/\1/p' half.log)
  (( ARENA <= BUDGET )) || fail "arena $ARENA over the budget $BUDGET"
  python3 -c "
import numpy as np
np.save('batch.npy', np.random.default_rng(3).integers(0, 256, size=(2, 64), dtype=np.int64))"
  train free "$TINY" 5 --input input_ids=batch.npy
  train half "$TINY" 5 --input input_ids=batch.npy
  cmp -s free.losses half.losses || { paste free.losses half.losses; fail "the budget changed the losses"; }
  close free half 0 0
  echo "ok: N = 2 under $BUDGET bytes (unconstrained $FULL): arena $ARENA, losses bitwise equal"
  ;;
*)
  fail "unknown case $CASE"
  ;;
esac
echo "PASS $CASE"

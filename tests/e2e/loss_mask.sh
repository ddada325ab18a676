#!/usr/bin/env bash
# loss_mask.sh - a token file's loss mask through megatrain-compile --targets and megatrain-run --data
# on the CPU backend: the first loss of a masked run equals PyTorch's cross_entropy with
# ignore_index on the same batch (logits from onnxruntime, 1e-5), a run with an all-ones mask
# is bitwise the run of the plan without --targets, and a mask under that plan is refused.
# usage: loss_mask.sh BIN SRC
set -euo pipefail
BIN=$1
SRC=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
TINY=$SRC/frontends/models/tiny_transformer.onnx
cd "$TMP"
fail() { echo "FAIL: $*"; exit 1; }

FLAGS=(--shape input_ids=2x64 --loss next-token-ce --logits logits --tokens input_ids --lr 3e-3 --precision fp32)
"$BIN/megatrain-compile" "$TINY" -o masked.plan "${FLAGS[@]}" --targets targets >/dev/null
"$BIN/megatrain-compile" "$TINY" -o plain.plan "${FLAGS[@]}" >/dev/null

# One batch exactly (2 windows of 64 tokens): the mean over its unmasked targets does not
# depend on the order the sampler draws the windows in. About a third of the mask is 0.
python3 - <<'PY'
import json
import numpy as np
rng = np.random.default_rng(5)
tokens = rng.integers(0, 256, size=128).astype("<u2")
mask = (rng.random(128) > 0.35).astype(np.uint8)
tokens.tofile("batch.bin")
mask.tofile("batch.bin.mask")
json.dump({"dtype": "uint16", "vocab": 256, "mask": "batch.bin.mask"}, open("batch.bin.json", "w"))
PY
"$BIN/megatrain-run" masked.plan --weights "$TINY" --data batch.bin --steps 1 --quiet --metrics masked.jsonl >/dev/null
python3 - "$TINY" <<'PY' || fail "the masked loss differs from torch's"
import json, sys
import numpy as np
import onnxruntime
import torch
tokens = np.fromfile("batch.bin", dtype="<u2").astype(np.int64).reshape(2, 64)
mask = np.fromfile("batch.bin.mask", dtype=np.uint8).reshape(2, 64)
session = onnxruntime.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
logits = torch.from_numpy(session.run(["logits"], {"input_ids": tokens})[0])
targets = torch.from_numpy(np.where(mask == 1, tokens, -100))
expected = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]).double(),
                                             targets[:, 1:].reshape(-1), ignore_index=-100).item()
unmasked = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]).double(),
                                             torch.from_numpy(tokens)[:, 1:].reshape(-1)).item()
got = json.loads(open("masked.jsonl").readline())["loss"]
print(f"masked first loss {got!r}, torch {expected!r} (without the mask {unmasked!r}); "
      f"{int((mask[:, 1:] == 0).sum())} of 126 targets masked")
assert abs(got - expected) <= 1e-5, abs(got - expected)
assert abs(unmasked - expected) > 1e-3, "the mask changed nothing: the test would not see it ignored"
PY

# An all-ones mask: the targets are the tokens, bitwise the plan without --targets.
python3 "$SRC/frontends/python/make_corpus.py" --out corpus.bin >/dev/null
cp corpus.bin ones.bin
python3 - <<'PY'
import json
import numpy as np
meta = json.load(open("corpus.bin.json"))
np.ones(meta["tokens"], dtype=np.uint8).tofile("ones.bin.mask")
json.dump({"dtype": meta["dtype"], "vocab": meta["vocab"], "mask": "ones.bin.mask"}, open("ones.bin.json", "w"))
PY
train() {
  "$BIN/megatrain-run" "$1" --weights "$TINY" --data "$2" --steps 5 --quiet --metrics "$3.jsonl" \
    --export-safetensors "$3.safetensors" >/dev/null
  python3 -c "
import json
for line in open('$3.jsonl'):
    print(repr(json.loads(line)['loss']))" >"$3.losses"
}
train masked.plan ones.bin ones
train plain.plan corpus.bin plain
cmp -s ones.losses plain.losses || { paste ones.losses plain.losses; fail "an all-ones mask changed the losses"; }
cmp -s ones.safetensors plain.safetensors || fail "an all-ones mask changed the trained weights"
echo "ok: an all-ones mask trains bitwise like no mask over 5 steps (loss $(tail -1 plain.losses))"

# A mask under a plan whose loss reads the tokens is refused, naming the flag.
set +e
out=$("$BIN/megatrain-run" plain.plan --weights "$TINY" --data batch.bin --steps 1 2>&1)
rc=$?
set -e
[[ $rc -eq 1 ]] && grep -qF "megatrain-run: error: --data batch.bin has a loss mask (batch.bin.mask) but the plan's loss reads the tokens themselves; compile with --targets NAME" <<<"$out" ||
  fail "mask without targets: exit $rc: $out"
echo "ok: $out"

#!/usr/bin/env bash
# hf_weights.sh - a Hugging Face checkpoint in and out: the tiny Llama of tests/models/hf/tiny_llama
# (save_pretrained, bf16 safetensors, tied embeddings) exported graph-only, compiled, and trained
# from --weights DIR. Its first loss and logits must be PyTorch's (fp32, 1e-4); after a few steps
# --export-hf writes a directory that transformers loads (shards and their index), whose logits
# must be megatrain's on the same weights (1e-4); --init normal:STD must train from scratch, the same bits twice.
set -euo pipefail
BIN=$1
SRC=$2
HF=$SRC/tests/models/hf/tiny_llama
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

python3 -c "import numpy, torch, transformers, onnx, onnxscript" 2>/dev/null || {
  echo "hf_weights.sh: needs numpy, torch, transformers, onnx and onnxscript" \
       "(python3 -m pip install -r $SRC/requirements-test.txt, or bash scripts/setup.sh)"
  exit 1
}

# The graph only: no weights in the ONNX file, they come from the checkpoint.
python3 "$SRC/frontends/python/export_hf.py" --model "$HF" --graph-only --batch 2 --seq 32 \
  -o "$TMP/tiny.onnx" >/dev/null
"$BIN/megatrain-compile" "$TMP/tiny.onnx" -o "$TMP/tiny.plan" --shape input_ids=2x32 \
  --loss next-token-ce --keep-output logits --precision fp32 --lr 1e-3 >/dev/null
IDS=$HF/references/input_ids.npy

# 1. One step from the checkpoint: PyTorch's first loss and logits.
"$BIN/megatrain-run" "$TMP/tiny.plan" --weights "$HF" --input input_ids="$IDS" --steps 1 \
  --metrics "$TMP/first.jsonl" --dump-output logits="$TMP/logits0.npy" | tee "$TMP/first.txt"
grep -q "^tied      lm_head.weight reads model.embed_tokens.weight" "$TMP/first.txt" || {
  echo "the tied lm_head.weight was not reported as read from model.embed_tokens.weight"; exit 1; }

# 2. Train a few steps, export for transformers (bf16, as the source is), in shards of at
# most 100 KB (the model's 218 KiB make three) with their index, as a large model would be.
"$BIN/megatrain-run" "$TMP/tiny.plan" --weights "$HF" --input input_ids="$IDS" --steps 4 --quiet \
  --export-hf "$TMP/out" --hf-source "$HF" --export-shard-size 100KB | tee "$TMP/train.txt"
grep -q "^exported  $TMP/out (20 tensors, .* as bf16, 8 files)" "$TMP/train.txt" || { echo "no --export-hf line"; exit 1; }

# 3. megatrain's logits on the exported weights (read back through the same reader, shards and index).
"$BIN/megatrain-run" "$TMP/tiny.plan" --weights "$TMP/out" --input input_ids="$IDS" --steps 1 --quiet \
  --dump-output logits="$TMP/logits_trained.npy" >/dev/null

# 4. From scratch: --init twice with one seed gives the same losses, near ln(vocab).
for run in a b; do
  "$BIN/megatrain-run" "$TMP/tiny.plan" --init normal:0.02 --init-seed 3 --input input_ids="$IDS" --steps 3 \
    --quiet --metrics "$TMP/init_$run.jsonl" >/dev/null
done

python3 - "$TMP" "$HF" <<'PY'
import json, math, os, sys
import numpy as np
import torch
import transformers as tf
from safetensors import safe_open

tmp, hf = sys.argv[1], sys.argv[2]
losses = lambda path: [json.loads(line)["loss"] for line in open(path)]

first = losses(f"{tmp}/first.jsonl")[0]
ref = float(np.load(f"{hf}/references/first_loss.npy"))
print(f"first loss: megatrain {first:.7f}, PyTorch fp32 {ref:.7f}")
assert abs(first - ref) <= 1e-4, f"first loss {first} differs from PyTorch's {ref} by more than 1e-4"
diff = np.abs(np.load(f"{tmp}/logits0.npy") - np.load(f"{hf}/references/logits.npy")).max()
print(f"initial logits: max |megatrain - PyTorch| = {diff:.2e}")
assert diff <= 1e-4, diff

out = f"{tmp}/out"
for name in ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"):
    assert os.path.exists(f"{out}/{name}"), f"--export-hf did not copy {name}"
index = json.load(open(f"{out}/model.safetensors.index.json"))
shards = sorted(set(index["weight_map"].values()))
assert shards == [f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)], shards
exported = {}
for shard in shards:
    with safe_open(f"{out}/{shard}", "pt") as f:
        assert f.metadata().get("format") == "pt", f.metadata()
        for key in f.keys():
            assert index["weight_map"][key] == shard, key
            exported[key] = f.get_tensor(key)
assert index["metadata"]["total_size"] == sum(t.numel() * 2 for t in exported.values())
assert "lm_head.weight" not in exported and "model.embed_tokens.weight" in exported, sorted(exported)
assert all(t.dtype == torch.bfloat16 for t in exported.values())
with safe_open(f"{hf}/model.safetensors", "pt") as src:
    assert sorted(src.keys()) == sorted(exported), "the export's names differ from the source's"
    assert not torch.equal(src.get_tensor("model.layers.0.mlp.up_proj.weight"),
                           exported["model.layers.0.mlp.up_proj.weight"]), "training changed nothing"
assert tf.AutoTokenizer.from_pretrained(out).eos_token == "</s>"

ids = torch.from_numpy(np.load(f"{hf}/references/input_ids.npy"))
model = tf.AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
with torch.no_grad():
    theirs = model(input_ids=ids).logits.numpy()
ours = np.load(f"{tmp}/logits_trained.npy")
diff = np.abs(theirs - ours).max()
print(f"exported model: max |transformers - megatrain| logits = {diff:.2e}")
assert diff <= 1e-4, diff

a, b = losses(f"{tmp}/init_a.jsonl"), losses(f"{tmp}/init_b.jsonl")
print(f"--init normal:0.02: losses {a}")
assert a == b, f"--init with one seed gave {a} and {b}"
assert abs(a[0] - math.log(300)) < 0.05, f"first loss {a[0]} is far from ln(300): the init is not small"
assert a[-1] < a[0], "no learning from --init"
PY

# 5. The flags' errors, each naming the fix.
expect_error() {
  local want=$1; shift
  if "$@" >"$TMP/err.txt" 2>&1; then echo "expected an error: $*"; exit 1; fi
  grep -qF -- "$want" "$TMP/err.txt" || { echo "expected '$want' in:"; cat "$TMP/err.txt"; exit 1; }
}
mkdir -p "$TMP/empty"
expect_error "holds neither model.safetensors nor model.safetensors.index.json" \
  "$BIN/megatrain-run" "$TMP/tiny.plan" --weights "$TMP/empty" --input input_ids="$IDS" --steps 1
expect_error "--weights and --init both give the initial weights" \
  "$BIN/megatrain-run" "$TMP/tiny.plan" --weights "$HF" --init normal:0.02 --input input_ids="$IDS" --steps 1
expect_error "--export-onnx needs --weights MODEL.onnx" \
  "$BIN/megatrain-run" "$TMP/tiny.plan" --weights "$HF" --input input_ids="$IDS" --steps 1 --export-onnx "$TMP/x.onnx"
expect_error "--hf-source needs --export-hf OUT_DIR" \
  "$BIN/megatrain-run" "$TMP/tiny.plan" --weights "$HF" --input input_ids="$IDS" --steps 1 --hf-source "$HF"
echo "hf_weights: ok"

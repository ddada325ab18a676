#!/usr/bin/env bash
# tests/fuzz/make_corpus.sh - builds the fuzz targets' seed corpora from the repository's own files and tools.
#
# usage: tests/fuzz/make_corpus.sh BIN OUTDIR [FUZZ_BIN]
#   BIN       the default build's tools (megatrain-compile, megatrain-run: build/bin)
#   OUTDIR    gets one folder per target (fuzz_plan_loader, fuzz_checkpoint, ...)
#   FUZZ_BIN  the fuzz build's targets (default: build-fuzz/bin), for the
#             checkpoint seed that fuzz_checkpoint writes of its own executor
# Nothing large is committed: the seeds are the committed models, plans compiled
# from them, a checkpoint and token files written by the tools, and .npy files
# written by numpy (the reference format; python3-numpy is in scripts/setup.sh).
set -euo pipefail
[[ $# -ge 2 ]] || { echo "usage: $0 BIN OUTDIR [FUZZ_BIN]" >&2; exit 2; }
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$(cd "$1" && pwd)
mkdir -p "$2"
OUT=$(cd "$2" && pwd)
FUZZ_BIN=${3:-$SRC/build-fuzz/bin}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
for t in fuzz_plan_loader fuzz_checkpoint fuzz_npy fuzz_token_sidecar fuzz_onnx_import fuzz_onnx_structure \
  fuzz_onnx_weights fuzz_safetensors; do
  mkdir -p "$OUT/$t"
done

# ONNX: every committed model, for the byte and the structure-aware mutator.
cp "$SRC"/frontends/models/*.onnx "$SRC"/tests/frontends/models/*.onnx "$OUT/fuzz_onnx_import/"
cp "$OUT"/fuzz_onnx_import/*.onnx "$OUT/fuzz_onnx_structure/"

# Weights: fuzz_onnx_weights takes a 4-byte little-endian model length, the
# model, then the bytes of its external data file weights.bin. Seeds: the
# committed models with no data file, and models whose initializers of each
# type live in weights.bin (onnx's own external-data writer), with and without
# offset and length.
python3 - "$OUT/fuzz_onnx_weights" "$SRC"/frontends/models/*.onnx <<'PY'
import os, struct, sys, tempfile
import numpy as np
import onnx
from onnx import external_data_helper, helper, numpy_helper
out = sys.argv[1]
def seed(name, model_bytes, data=b""):
    with open(os.path.join(out, name), "wb") as f:
        f.write(struct.pack("<I", len(model_bytes)) + model_bytes + data)
for path in sys.argv[2:]:
    with open(path, "rb") as f:
        seed(os.path.basename(path), f.read())
arrays = {
    "w_f32": np.arange(12, dtype=np.float32).reshape(3, 4) / 7,
    "w_f64": np.linspace(-1, 1, 6).reshape(2, 3),
    "w_f16": np.arange(8, dtype=np.float16),
    "w_i64": np.arange(5, dtype=np.int64) - 2,
    "w_i32": np.arange(4, dtype=np.int32),
    "w_u8": np.arange(3, dtype=np.uint8),
    "w_scalar": np.array(2.5, dtype=np.float32),
    "w_empty": np.zeros((0, 3), dtype=np.float32),
}
for threshold in (0, 1 << 30):  # all external; all inline
    graph = helper.make_graph([], "weights", [], [],
                              [numpy_helper.from_array(a, n) for n, a in arrays.items()])
    model = helper.make_model(graph)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.onnx")
        onnx.save_model(model, path, save_as_external_data=threshold == 0, all_tensors_to_one_file=True,
                        location="weights.bin", size_threshold=threshold)
        data = b""
        if threshold == 0:
            with open(os.path.join(tmp, "weights.bin"), "rb") as f:
                data = f.read()
        with open(path, "rb") as f:
            seed("external.onnx" if threshold == 0 else "inline.onnx", f.read(), data)
PY

# Plans: the two demo models compiled as the tests compile them.
"$BIN/megatrain-compile" "$SRC/frontends/models/mlp.onnx" -o "$OUT/fuzz_plan_loader/mlp.plan" --shape x=8x16 >/dev/null
"$BIN/megatrain-compile" "$SRC/frontends/models/tiny_transformer.onnx" -o "$OUT/fuzz_plan_loader/tiny.plan" \
  --shape input_ids=2x64 --loss next-token-ce --logits logits --tokens input_ids --lr 3e-3 >/dev/null
# And one whose updates visit the device (format minor 11: STATE_STAGE operands of a device ADAMW,
# the verifier's copies from and back into the parameter), the moments of half on the device.
"$BIN/megatrain-compile" "$SRC/frontends/models/tiny_transformer.onnx" -o "$OUT/fuzz_plan_loader/visit.plan" \
  --shape input_ids=2x64 --loss next-token-ce --lr 3e-3 --precision bf16 \
  --state-home 'visit-master:attn' --state-home visit >/dev/null

# Token files: make_corpus.py's sidecar, and the other dtype spellings.
python3 "$SRC/frontends/python/make_corpus.py" --out "$TMP/corpus.bin" >/dev/null
cp "$TMP/corpus.bin.json" "$OUT/fuzz_token_sidecar/make_corpus.json"
printf '{"dtype": "uint32"}' >"$OUT/fuzz_token_sidecar/uint32.json"
printf '{"dtype": "uint16", "vocab": 16}' >"$OUT/fuzz_token_sidecar/vocab16.json"
printf '{"dtype": "uint16", "mask": "tokens.mask"}' >"$OUT/fuzz_token_sidecar/mask.json"

# Checkpoints: one of megatrain-run training the tiny transformer (another
# plan than the target's: it exercises the table-against-plan checks), and
# one that fuzz_checkpoint writes of its own executor (loads cleanly).
"$BIN/megatrain-run" "$OUT/fuzz_plan_loader/tiny.plan" --weights "$SRC/frontends/models/tiny_transformer.onnx" \
  --data "$TMP/corpus.bin" --steps 1 --quiet --save "$TMP/ckpt" >/dev/null
cp "$TMP"/ckpt/step-1.ckpt "$OUT/fuzz_checkpoint/tiny-step-1.ckpt"
if [[ -x "$FUZZ_BIN/fuzz_checkpoint" ]]; then
  MEGATRAIN_FUZZ_WRITE_SEED="$TMP/own" "$FUZZ_BIN/fuzz_checkpoint" >/dev/null 2>&1
  cp "$TMP"/own/step-*.ckpt "$OUT/fuzz_checkpoint/linear.ckpt"
fi

# .npy: each dtype the reader takes, both orders, a 0-d and an empty array, format 2.0.
python3 - "$OUT/fuzz_npy" <<'PY'
import sys
import numpy as np
from numpy.lib import format as npf
out = sys.argv[1]
for dt in ["<f4", "<f8", "<f2", "<i8", "<i4", "<u2", "|u1", "|b1"]:
    np.save(f"{out}/{dt[1:]}.npy", np.arange(6).reshape(2, 3).astype(dt))
np.save(f"{out}/fortran.npy", np.asfortranarray(np.arange(6, dtype="<f4").reshape(2, 3)))
np.save(f"{out}/scalar.npy", np.array(1.5, dtype="<f4"))
np.save(f"{out}/empty.npy", np.zeros((0, 4), dtype="<f4"))
with open(f"{out}/v2.npy", "wb") as f:
    a = np.ones((3,), dtype="<f4")
    npf.write_array(f, a, version=(2, 0))
PY
# Safetensors: the Hugging Face fixture as save_pretrained wrote it (bf16), and
# files of each dtype written by the safetensors package (the reference writer).
cp "$SRC/tests/models/hf/tiny_llama/model.safetensors" "$OUT/fuzz_safetensors/tiny_llama.safetensors"
python3 - "$OUT/fuzz_safetensors" <<'PY'
import sys
import numpy as np
from safetensors.numpy import save_file
out = sys.argv[1]
save_file({"w.f32": np.arange(6, dtype="<f4").reshape(2, 3) / 7, "w.f64": np.linspace(-1, 1, 4),
           "w.f16": np.arange(5, dtype="<f2"), "w.i64": np.arange(3, dtype="<i8"),
           "w.empty": np.zeros((0, 2), dtype="<f4"), "w.scalar": np.array(2.5, dtype="<f4")},
          f"{out}/dtypes.safetensors", metadata={"format": "pt"})
PY
for t in "$OUT"/*/; do echo "make_corpus: $(ls "$t" | wc -l) seeds in $t"; done

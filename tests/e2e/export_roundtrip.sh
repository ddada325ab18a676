#!/usr/bin/env bash
# export_roundtrip.sh - trained weights leave megatrain intact: train the tiny transformer a few
# steps, --export-onnx and --export-safetensors, then the logits megatrain computes with the
# exported model (--dump-output) must match onnxruntime's on the same ids, the weights must
# have changed, the safetensors file must parse, and external data must load.
set -euo pipefail
BIN=$1
SRC=$2
STEPS=${EXPORT_TEST_STEPS:-8}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
TINY=$SRC/frontends/models/tiny_transformer.onnx

python3 -c "import numpy, onnx, onnxruntime" 2>/dev/null || {
  echo "export_roundtrip.sh: needs the Python packages numpy, onnx and onnxruntime" \
       "(python3 -m pip install -r $SRC/requirements-test.txt, or bash scripts/setup.sh)"
  exit 1
}

python3 "$SRC/frontends/python/make_corpus.py" --out "$TMP/corpus.bin" >/dev/null
"$BIN/megatrain-compile" "$TINY" -o "$TMP/tiny.plan" --shape input_ids=8x64 \
  --loss next-token-ce --keep-output logits --lr 3e-3 --precision fp32 >/dev/null

# Train, and write the trained weights both ways.
"$BIN/megatrain-run" "$TMP/tiny.plan" --weights "$TINY" --data "$TMP/corpus.bin" --steps "$STEPS" \
  --quiet --export-onnx "$TMP/trained.onnx" --export-safetensors "$TMP/trained.safetensors" \
  | tee "$TMP/train.txt"
grep -q "exported  $TMP/trained.onnx (" "$TMP/train.txt"
[[ ! -e "$TMP/trained.onnx.data" ]] || { echo "a small model must stay inline (auto)"; exit 1; }

# Fixed ids: 8 windows of the corpus.
python3 - "$TMP/corpus.bin" "$TMP/ids.npy" <<'PY'
import sys, numpy as np
tokens = np.fromfile(sys.argv[1], dtype="<u2")
np.save(sys.argv[2], tokens[1000:1000 + 8 * 64].astype(np.int64).reshape(8, 64))
PY

# One step on the exported model: its forward uses exactly the exported weights.
# The same run exports again with external data, for the external-data checks below.
"$BIN/megatrain-run" "$TMP/tiny.plan" --weights "$TMP/trained.onnx" --steps 1 --quiet \
  --input input_ids="$TMP/ids.npy" --dump-output logits="$TMP/logits.npy" \
  --export-onnx "$TMP/ext.onnx" --export-external-data always \
  --export-safetensors "$TMP/ext.safetensors"
[[ -s "$TMP/ext.onnx.data" ]] || { echo "--export-external-data always wrote no ext.onnx.data"; exit 1; }

python3 - "$TMP" "$TINY" <<'PY'
import json, os, struct, sys
import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

tmp, original = sys.argv[1], sys.argv[2]

def read_safetensors(path):
    """A minimal reader: 8-byte little-endian header length, JSON header, raw data."""
    with open(path, "rb") as f:
        blob = f.read()
    (length,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + length])
    metadata = header.pop("__metadata__")
    assert list(header) == sorted(header), "safetensors names must be sorted"
    data = blob[8 + length:]
    tensors, end = {}, 0
    for name, entry in header.items():
        begin, stop = entry["data_offsets"]
        assert begin == end, f"{name}: data is not contiguous"
        assert entry["dtype"] == "F32", entry
        array = np.frombuffer(data[begin:stop], dtype="<f4").reshape(entry["shape"])
        tensors[name] = array
        end = stop
    assert end == len(data), "safetensors data has trailing bytes"
    return metadata, tensors

def initializers(path):
    return {t.name: numpy_helper.to_array(t, base_dir=os.path.dirname(path))
            for t in onnx.load(path, load_external_data=False).graph.initializer}

# 1. megatrain's logits on the exported model against onnxruntime's.
ids = np.load(f"{tmp}/ids.npy")
ours = np.load(f"{tmp}/logits.npy")
session = ort.InferenceSession(f"{tmp}/trained.onnx", providers=["CPUExecutionProvider"])
theirs = session.run(["logits"], {"input_ids": ids})[0]
assert ours.shape == theirs.shape == (8, 64, 256), (ours.shape, theirs.shape)
error = float(np.max(np.abs(ours - theirs)) / np.max(np.abs(theirs)))
print(f"logits: megatrain vs onnxruntime on trained.onnx, relative error {error:.3e}")
assert error < 1e-4, "the logits differ"

# 2. Training changed the weights; everything else is the original's.
before, after = initializers(original), initializers(f"{tmp}/trained.onnx")
assert before.keys() == after.keys()
changed = [n for n in before if not np.array_equal(before[n], after[n])]
print(f"weights: {len(changed)} of {len(before)} initializers changed by training")
assert len(changed) >= 10, changed
for name in before:
    assert before[name].shape == after[name].shape and before[name].dtype == after[name].dtype, name
a, b = onnx.load(original), onnx.load(f"{tmp}/trained.onnx")
a.graph.ClearField("initializer"); b.graph.ClearField("initializer")
assert a == b, "the graph outside the initializers changed"

# 3. The safetensors file parses and holds the same trained values.
metadata, tensors = read_safetensors(f"{tmp}/trained.safetensors")
assert metadata["source_model"] == original, metadata
assert metadata["format"] == "pt", metadata  # what transformers 4.x requires to load it
for name, array in tensors.items():
    assert np.array_equal(array, after[name]), name
print(f"safetensors: {len(tensors)} tensors, equal to trained.onnx's initializers")

# 4. External data: 64-byte aligned offsets, loadable by onnx and onnxruntime, equal to
#    the safetensors of the same run.
model = onnx.load(f"{tmp}/ext.onnx", load_external_data=False)
external = [t for t in model.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
assert external, "no initializer uses external data"
for t in external:
    info = {e.key: e.value for e in t.external_data}
    assert info["location"] == "ext.onnx.data" and int(info["offset"]) % 64 == 0, info
ext = initializers(f"{tmp}/ext.onnx")
_, ext_tensors = read_safetensors(f"{tmp}/ext.safetensors")
for name, array in ext_tensors.items():
    assert np.array_equal(array, ext[name]), name
ort.InferenceSession(f"{tmp}/ext.onnx", providers=["CPUExecutionProvider"]).run(["logits"], {"input_ids": ids})
print(f"external data: {len(external)} initializers in ext.onnx.data, 64-byte aligned, loads in onnxruntime")
PY

# Mistakes are one-line errors before any training.
out=$("$BIN/megatrain-run" "$TMP/tiny.plan" --weights "$TINY" --data "$TMP/corpus.bin" \
  --dump-output hidden="$TMP/h.npy" 2>&1) && { echo "--dump-output of an unkept output succeeded"; exit 1; }
grep -q "^megatrain-run: error: --dump-output hidden: the plan keeps no output named 'hidden' (it keeps: logits; compile with --keep-output hidden)$" <<<"$out" \
  || { echo "unexpected: $out"; exit 1; }
out=$("$BIN/megatrain-run" "$TMP/tiny.plan" --weights "$TINY" --export-external-data sometimes 2>&1) \
  && { echo "a bad --export-external-data succeeded"; exit 1; }
grep -q "^megatrain-run: error: --export-external-data needs auto, always or never, got 'sometimes'$" <<<"$out" \
  || { echo "unexpected: $out"; exit 1; }
echo "ok"

#!/usr/bin/env bash
# precision.sh - megatrain-compile --precision through the real tools on the CPU backend.
# usage: precision.sh BIN SRC MODEL   (MODEL: demo, or a tests/models/llm/*.onnx stem)
# The model compiled with bf16 (the default), tf32 and fp32 trains 10 steps:
#   - the bf16 plan holds bf16 casts, matmuls marked bf16 on bf16 operands, parameters fetched
#     from host PARAMETER_COMPUTE copies into bf16 device tensors, and ADAMW tasks with five
#     tensors (the fifth the copy); its losses stay within 2e-2 relative of the fp32 plan's at
#     every step;
#   - the tf32 plan marks its products tf32 and, on the CPU (exact fp32), trains bit for bit
#     like the fp32 plan, losses and weights.
set -euo pipefail
BIN=$1
SRC=$2
MODEL=$3
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cd "$TMP"
fail() { echo "FAIL: $*"; exit 1; }

if [[ $MODEL == demo ]]; then
  ONNX=$SRC/frontends/models/tiny_transformer.onnx
  COMPILE=(--shape input_ids=4x64 --loss next-token-ce --lr 3e-3)
  python3 "$SRC/frontends/python/make_corpus.py" --out corpus.bin >/dev/null
  FEED=(--data corpus.bin)
else
  ONNX=$SRC/tests/models/llm/$MODEL.onnx
  COMPILE=(--lr 1e-3)
  FEED=(--input "input_ids=$SRC/tests/models/llm/input_ids.npy")
fi

for precision in default bf16 tf32 fp32; do
  # Every home on the host: the host compute copies are checked below (homes_bitwise.sh
  # checks them on the device).
  flags=(--state-home host)
  [[ $precision == default ]] || flags+=(--precision "$precision")
  "$BIN/megatrain-compile" "$ONNX" -o "$precision.plan" "${COMPILE[@]}" "${flags[@]}" > "$precision.log" 2>&1 ||
    { cat "$precision.log"; fail "compile $precision"; }
  "$BIN/megatrain-compile" "$ONNX" -o - --emit=plan-text "${COMPILE[@]}" "${flags[@]}" > "$precision.txt" ||
    fail "plan text $precision"
  "$BIN/megatrain-run" "$precision.plan" --weights "$ONNX" "${FEED[@]}" --steps 10 --quiet --backend cpu \
    --metrics "$precision.jsonl" --export-safetensors "$precision.safetensors" > "$precision.run" 2>&1 ||
    { cat "$precision.run"; fail "train $precision"; }
done
cmp -s default.safetensors bf16.safetensors || fail "the default is not bf16"

"$BIN/megatrain-inspect" bf16.plan > bf16.inspect
grep -q "precision      bf16" bf16.inspect || fail "inspect does not show precision bf16"
grep -q "copy compute:.* -> dev:" bf16.inspect || fail "inspect shows no fetch from a compute copy"
"$BIN/megatrain-inspect" fp32.plan > fp32.inspect
grep -q "precision      fp32" fp32.inspect || fail "inspect does not show precision fp32"

python3 - <<'PY'
import json, re

def plan(path):
    """Tensors (id -> fields), kernel steps, copies and host tasks of a plan-text dump."""
    text = open(path).read()
    tensors = {}
    for block in re.findall(r"^tensors \{\n(.*?)^\}", text, re.S | re.M):
        fields = dict(re.findall(r"^  (\w+): \"?([^\"\n]*)\"?$", block, re.M))
        tensors[int(fields.get("id", 0))] = fields  # proto3 text omits a zero id
    kernels = [(k, [int(i) for i in re.findall(r"inputs: (\d+)", body)],
                [int(o) for o in re.findall(r"outputs: (\d+)", body)], body)
               for k, body in re.findall(r"kernel \{\n\s*kernel: \"(\w+)\"\n(.*?)\n  \}\n", text, re.S)]
    copies = [(int(s), int(d)) for s, d in re.findall(r"copy \{\n\s*src: (\d+)\n\s*dst: (\d+)", text)]
    adamw = [[int(t) for t in re.findall(r"tensors: (\d+)", body)]
             for body in re.findall(r"kind: ADAMW\n(.*?)\}", text, re.S)]
    header = re.search(r"^header \{\n(.*?)^\}", text, re.S | re.M).group(1)
    return tensors, kernels, copies, adamw, header

tensors, kernels, copies, adamw, header = plan("bf16.txt")
# The precision needs minor 3; the checksum makes every written plan 1.4 or newer (1.8 with views).
assert 'precision: "bf16"' in header and int(re.search(r"format_minor: (\d+)", header).group(1)) >= 4, header[:400]
role = lambda i: tensors[i]["role"]
dtype = lambda i: tensors[i]["dtype"]
casts = [k for k in kernels if k[0] == "cast" and dtype(k[2][0]) == "BF16"]
assert casts, "no cast to bf16"
matmuls = [k for k in kernels if k[0] == "matmul"]
assert matmuls and all('s: "bf16"' in k[3] for k in matmuls), "a matmul is not marked bf16"
# f32 results, or bf16 where the product is read only by bf16 casts (mt-fold-product-casts).
assert all(dtype(k[1][0]) == "BF16" and dtype(k[1][1]) == "BF16" and dtype(k[2][0]) in ("F32", "BF16")
           for k in matmuls), "a matmul does not take two bf16 operands into f32 or bf16"
computes = [i for i in tensors if role(i) == "PARAMETER_COMPUTE"]
assert computes and all(dtype(i) == "BF16" for i in computes), "no bf16 PARAMETER_COMPUTE"
fetches = [(s, d) for s, d in copies if role(s) == "PARAMETER_COMPUTE"]
assert fetches and all(dtype(d) == "BF16" and role(d) == "PARAMETER_COPY" for s, d in fetches), \
    "no bf16 parameter fetch from a compute copy"
five = [t for t in adamw if len(t) == 5]
assert five and all(role(t[4]) == "PARAMETER_COMPUTE" and
                    tensors[t[4]]["source"] == tensors[t[0]]["source"] for t in five), "no 5-tensor ADAMW"
assert {t[4] for t in five} == set(computes), "a compute copy no ADAMW rewrites"
assert all(len(t) == 4 for t in adamw if t not in five)
print(f"bf16 plan: {len(casts)} casts to bf16, {len(matmuls)} bf16 matmuls, {len(computes)} compute copies, "
      f"{len(fetches)} fetches from them, {len(five)} of {len(adamw)} ADAMW with 5 tensors")

t_tensors, t_kernels, _, t_adamw, t_header = plan("tf32.txt")
assert 'precision: "tf32"' in t_header
assert all(tensor["dtype"] != "BF16" for tensor in t_tensors.values()), "bf16 in the tf32 plan"
assert all('s: "tf32"' in k[3] for k in t_kernels if k[0] in ("matmul", "attention", "attention_grad"))
assert all(len(t) == 4 for t in t_adamw)

losses = {p: [json.loads(l)["loss"] for l in open(p + ".jsonl")] for p in ("bf16", "tf32", "fp32")}
for step, (b, f) in enumerate(zip(losses["bf16"], losses["fp32"])):
    assert abs(b - f) <= 2e-2 * abs(f), f"step {step}: bf16 loss {b} vs fp32 {f}"
assert len(losses["bf16"]) == len(losses["fp32"]) == 10
assert losses["tf32"] == losses["fp32"], "tf32 does not train like fp32 on the CPU"
worst = max(abs(b - f) / abs(f) for b, f in zip(losses["bf16"], losses["fp32"]))
print(f"losses fp32 {losses['fp32'][0]:.5f} -> {losses['fp32'][-1]:.5f}, "
      f"bf16 {losses['bf16'][0]:.5f} -> {losses['bf16'][-1]:.5f}, worst relative gap {worst:.2e}")
PY
cmp -s tf32.safetensors fp32.safetensors || fail "tf32 weights differ from fp32 weights on the CPU"
echo "precision $MODEL: ok"

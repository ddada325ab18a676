#!/usr/bin/env bash
# homes_runs.sh - state homes on the GPU (docs/tiering.md "State homes"): the demo model in bf16
# and fp32, compiled with every parameter's state on the host (gradients through the staging
# ring), on the device (bf16: each fetch a `cast` kernel from the device master; fp32: kernels
# read the master in place; the fused device AdamW), on the host with --keep-gradients, and
# with 2 micro-batches on the device (the device accumulator, the weight gradients' products
# writing their parts into it: a matmul_add in place from the second part on), the same with
# --no-product-accumulation (each part copied or ACCUMULATEd after its product) and on the host
# (the parts through the ring), trains 10 steps on cuda. The device AdamW, the cast and the
# accumulation compute what their host twins compute, so each device plan's losses and weights
# are bitwise those of its host plan on cuda; every run's losses are within 1e-4 (fp32) or 2e-3
# (bf16) relative of the cpu backend's.
# usage: [CORPUS=/abs/tokens.bin] homes_runs.sh BIN SRC   (absolute paths: the script runs in a scratch folder)
set -euo pipefail
source "$(dirname "$0")/demo_setup.sh" "$@"

run() {  # run NAME BACKEND
  "$BIN/megatrain-run" "$1.plan" --weights "$ONNX" --data corpus.bin --steps 10 --quiet --backend "$2" \
    --metrics "$1.$2.jsonl" --export-safetensors "$1.$2.safetensors" > "$1.$2.log" 2>&1 ||
    { cat "$1.$2.log"; fail "$1: $2 run"; }
}
for precision in bf16 fp32; do
  compile "host_$precision" $precision --state-home host
  compile "device_$precision" $precision --state-home device
  compile "keep_$precision" $precision --state-home host --keep-gradients
  compile "hostmb_$precision" $precision --state-home host --microbatches 2
  compile "devicemb_$precision" $precision --state-home device --microbatches 2
  compile "deviceparts_$precision" $precision --state-home device --microbatches 2 --no-product-accumulation
done
"$BIN/megatrain-compile" "$ONNX" -o - --emit=plan-text --shape input_ids=4x64 --loss next-token-ce --precision bf16 \
  --state-home device > device.txt
grep -q 'kernel: "cast"' device.txt || fail "device_bf16: no cast kernel from the master"
if grep -q 'name: "compute:' device.txt; then fail "device_bf16: a compute copy on the device"; fi
for name in host device keep hostmb devicemb deviceparts; do
  for precision in bf16 fp32; do
    run "${name}_$precision" cuda
    run "${name}_$precision" cpu
  done
done
python3 - <<'PY' || fail "losses"
import json
def losses(name, backend):
    return [json.loads(l)["loss"] for l in open(f"{name}.{backend}.jsonl")]
for precision, tol in (("bf16", 2e-3), ("fp32", 1e-4)):
    for name in ("host", "device", "keep", "hostmb", "devicemb", "deviceparts"):
        cuda, cpu = losses(f"{name}_{precision}", "cuda"), losses(f"{name}_{precision}", "cpu")
        assert len(cuda) == 10, (name, precision, cuda)
        for a, b in zip(cuda, cpu):
            assert abs(a - b) <= tol * abs(b), (name, precision, a, b)
    for host, device in (("host", "device"), ("host", "keep"), ("hostmb", "devicemb"), ("hostmb", "deviceparts")):
        a, b = losses(f"{host}_{precision}", "cuda"), losses(f"{device}_{precision}", "cuda")
        assert [repr(x) for x in a] == [repr(x) for x in b], (host, device, precision, a, b)
    print(precision, "ok")
PY
for precision in bf16 fp32; do
  cmp -s "host_$precision.cuda.safetensors" "device_$precision.cuda.safetensors" || fail "$precision: device weights differ from host on cuda"
  for name in devicemb deviceparts; do
    cmp -s "hostmb_$precision.cuda.safetensors" "${name}_$precision.cuda.safetensors" ||
      fail "$precision: $name's device-accumulated weights differ from host-accumulated on cuda"
  done
done
echo PASS

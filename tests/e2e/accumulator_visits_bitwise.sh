#!/usr/bin/env bash
# accumulator_visits_bitwise.sh - accumulators that live on the host and visit the device for
# each micro-batch part (docs/tiering.md, "Accumulator visits") never change the math: the model
# compiled with the state on HOME (--state-home), its accumulators whole on the device (the
# default) and visiting through a ring of 3 slots (--accumulator-visits --visit-slots 3
# --all-accumulators-visit), trains 20 steps to bitwise-identical losses and weights. With
# PRODUCTS=yes, 2 micro-batches: the weight gradients' products write part 0 into a new visit
# and add part 1 into the fetched one (matmul_add); with PRODUCTS=no, 3 micro-batches and
# --no-product-accumulation: every part k >= 1 is ACCUMULATEd into its visit on compute. The visiting plan must put its visits in an `acc_visit` DEVICE pool, fetch
# one for every part k >= 1 of a visiting accumulator (h2d copies into acc_visit tensors), copy
# each back (d2h copies out of them), and keep no accumulator in a device pool of state.
# usage: accumulator_visits_bitwise.sh BIN SRC MODEL HOME [PRODUCTS] [PRECISION]
#   MODEL: demo, demo_bf16, or a tests/models/llm/*.onnx stem; HOME: host or disk;
#   PRODUCTS: yes (default) or no; PRECISION: the LLM's --precision (default bf16).
set -euo pipefail
BIN=$1
SRC=$2
MODEL=$3
HOME_TIER=$4
PRODUCTS=${5:-yes}
LLM_PRECISION=${6:-bf16}
source "$(dirname "$0")/bitwise_common.sh"

EXTRA=(--microbatches 2)
[[ $PRODUCTS == no ]] && EXTRA=(--microbatches 3 --no-product-accumulation)
PARTS=${EXTRA[1]}
DISK=()
if [[ $HOME_TIER == disk ]]; then
  DISK=(--disk-memory 1GiB)
  mkdir -p disk
  FEED+=(--disk-dir "$PWD/disk")
fi

# Compiles NAME.plan and prints: the acc_visit pools, the fetches into visits, the copies back,
# the accumulators (grad:<param>) in a DEVICE pool, and the visiting parameters.
compile() {
  local name=$1; shift
  compile_plan "$name" plan-text txt --state-home "$HOME_TIER" "${DISK[@]}" \
    "${EXTRA[@]}" "$@" || return 1
  python3 - "$name.txt" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
pools = {int(i or 0): (n, t) for i, n, t in
         re.findall(r'pools \{\s*(?:id: (\d+)\s*)?name: "([^"]*)"\s*tier: (\w+)', text)}
tensors = {}  # in id order; text format leaves id 0 and pool 0 out
for tid, body in enumerate(re.findall(r'\ntensors \{(.*?)\n\}', text, re.S)):
    name = re.search(r'name: "([^"]*)"', body).group(1)
    pool = re.search(r'pool: (\d+)', body)
    tensors[tid] = (name, int(pool.group(1)) if pool else 0)
steps = re.findall(r'\nsteps \{(.*?)\n\}', text, re.S)
def copies(stream, key):
    n = 0
    for s in steps:
        if f'stream: "{stream}"' not in s:
            continue
        m = re.search(rf'{key}: (\d+)', s)
        if m and tensors.get(int(m.group(1)), ('', 0))[0].startswith('acc_visit:'):
            n += 1
    return n
visit_pools = sum(1 for n, t in pools.values() if n == 'acc_visit' and t == 'DEVICE')
device_acc = sum(1 for n, p in tensors.values()
                 if n.startswith('grad:') and pools.get(p, ('', ''))[1] == 'DEVICE')
visiting = len({n.split('#')[0] for n, _ in tensors.values() if n.startswith('acc_visit:')})
def into_visit(s):
    return any(tensors.get(int(o), ('', 0))[0].startswith('acc_visit:')
               for o in re.findall(r'outputs: (\d+)', s))
products = sum(1 for s in steps if re.search(r'kernel: "matmul(_add)?"', s) and into_visit(s))
adds = sum(1 for s in steps if 'kind: ACCUMULATE' in s and 'stream: "compute"' in s
           and tensors.get(int(re.findall(r'tensors: (\d+)', s)[0]), ('', 0))[0].startswith('acc_visit:'))
print(visit_pools, copies('h2d', 'dst'), copies('d2h', 'src'), device_acc, visiting, products, adds)
PY
}

compile_counts whole "with the accumulators whole"
compile_counts visit "with the accumulators visiting" --accumulator-visits --visit-slots 3 \
  --all-accumulators-visit
read -r _ _ _ WHOLE_DEVICE_ACC _ < whole.counts
read -r POOLS FETCHES RETURNS DEVICE_ACC VISITING PRODUCTS_INTO ADDS_INTO < visit.counts
echo "$MODEL, state on the $HOME_TIER, $PARTS micro-batches, products $PRODUCTS: $VISITING accumulators" \
  "visit ($FETCHES fetches, $RETURNS copies back, $PRODUCTS_INTO products and $ADDS_INTO" \
  "ACCUMULATEs into visits), device accumulators $WHOLE_DEVICE_ACC -> $DEVICE_ACC"
[[ $POOLS -eq 1 ]] || fail "expected one DEVICE pool acc_visit, found $POOLS"
[[ $VISITING -gt 0 ]] || fail "no accumulator visits"
[[ $FETCHES -eq $(((PARTS - 1) * VISITING)) ]] ||
  fail "expected $((PARTS - 1)) fetches per visiting accumulator, got $FETCHES"
[[ $RETURNS -ge $FETCHES ]] || fail "fewer copies back ($RETURNS) than fetches ($FETCHES)"
if [[ $PRODUCTS == yes ]]; then
  [[ $PRODUCTS_INTO -gt 0 ]] || fail "no product writes its part into a visit"
else
  [[ $PRODUCTS_INTO -eq 0 ]] || fail "--no-product-accumulation left $PRODUCTS_INTO products writing a visit"
  [[ $ADDS_INTO -gt 0 ]] || fail "no part is ACCUMULATEd into a visit"
fi
[[ $DEVICE_ACC -lt $WHOLE_DEVICE_ACC ]] ||
  fail "the visiting plan keeps $DEVICE_ACC accumulators on the device ($WHOLE_DEVICE_ACC whole)"

expect_same_training visit whole
echo "PASS: $MODEL trains bitwise-identically with its accumulators visiting ($HOME_TIER, products $PRODUCTS)"

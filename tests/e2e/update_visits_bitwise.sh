#!/usr/bin/env bash
# update_visits_bitwise.sh - host homes whose update visits the device (docs/tiering.md, "Update
# visits": --state-home visit) never change the math: the model compiled with every state on the
# host (--state-home host) and with every update visiting (--state-home visit) trains 20 steps to
# bitwise-identical losses and weights. The visiting plan must hold the DEVICE pool
# update_visit, one ADAMW a trainable parameter on the `optimizer` stream over visit tensors and
# none on the host, three h2d copies into visits per update (master, m, v) and one d2h copy back
# per visit tensor the update writes (three, or four with a bf16 compute copy); megatrain-inspect
# counts the visitors and marks their homes `visit`.
# Every update must read its gradient from SUM. VISIT_HOME=visit-master (default visit) keeps the
# moments on the device: then one fetch (the master) and one or two copies back a visit.
# usage: update_visits_bitwise.sh BIN SRC MODEL SUM [EXTRA COMPILE FLAGS...]
#   MODEL: demo, demo_bf16, or a tests/models/llm/*.onnx stem (bf16); SUM: arena (no
#   micro-batches), device (a device accumulator), acc_visit (the sum's last visit, read in
#   place) or host (a sum kept on the host, copied into visit_grad:); EXTRA: such as
#   --microbatches 2.
set -euo pipefail
BIN=$1
SRC=$2
MODEL=$3
SUM=$4
shift 4
EXTRA=("$@")
LLM_PRECISION=bf16
source "$(dirname "$0")/bitwise_common.sh"

# Compiles NAME.plan and prints: update_visit pools, ADAMW on optimizer over visits, ADAMW on
# host, h2d copies into visits, d2h copies out of visits, visit_grad tensors, trainable params,
# and where the updates read their gradients (comma-separated kinds).
compile() {
  local name=$1; shift
  compile_plan "$name" plan-text txt "${EXTRA[@]}" "$@" || return 1
  python3 - "$name.txt" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
pools = {int(i or 0): (n, t) for i, n, t in
         re.findall(r'pools \{\s*(?:id: (\d+)\s*)?name: "([^"]*)"\s*tier: (\w+)', text)}
names, trainable = {}, 0
for tid, body in enumerate(re.findall(r'\ntensors \{(.*?)\n\}', text, re.S)):
    names[tid] = re.search(r'name: "([^"]*)"', body).group(1)
    trainable += 'role: PARAMETER' in body and 'trainable: true' in body
steps = re.findall(r'\nsteps \{(.*?)\n\}', text, re.S)
visit = lambda tid: names.get(int(tid), '').startswith('visit_')
def stream(s):
    m = re.search(r'stream: "([^"]*)"', s)
    return m.group(1) if m else 'compute'
device_updates = sum(1 for s in steps if 'kind: ADAMW' in s and stream(s) == 'optimizer'
                     and visit(re.findall(r'tensors: (\d+)', s)[0]))
host_updates = sum(1 for s in steps if 'kind: ADAMW' in s and stream(s) == 'host')
fetches = sum(1 for s in steps if stream(s) == 'h2d' and 'copy' in s
              and visit(re.search(r'dst: (\d+)', s).group(1)))
returns = sum(1 for s in steps if stream(s) == 'd2h' and 'copy' in s
              and visit(re.search(r'src: (\d+)', s).group(1)))
grads = sum(1 for n in names.values() if n.startswith('visit_grad:'))
ring = sum(1 for n, t in pools.values() if n == 'update_visit' and t == 'DEVICE')
def kind(tid):
    name = names[int(tid)]
    return {'acc_visit': 'acc_visit', 'visit_grad': 'host', 'grad': 'device'}.get(
        name.split(':')[0] if ':' in name else '', 'arena')
sums = sorted({kind(re.findall(r'tensors: (\d+)', s)[1]) for s in steps if 'kind: ADAMW' in s})
print(ring, device_updates, host_updates, fetches, returns, grads, trainable, ','.join(sums))
PY
}

compile_counts host "with every state on the host" --state-home host
VISIT_HOME=${VISIT_HOME:-visit}
compile_counts visit "with every update visiting" --state-home "$VISIT_HOME"
read -r RING UPDATES HOST_UPDATES FETCHES RETURNS GRADS TRAINABLE SUMS < visit.counts
echo "$MODEL ${EXTRA[*]} ($VISIT_HOME): $UPDATES of $TRAINABLE updates visit the device ($FETCHES fetches," \
  "$RETURNS copies back, gradients read from: $SUMS), $HOST_UPDATES on the host"
[[ $SUMS == "$SUM" ]] || fail "expected every update to read its gradient from $SUM, got $SUMS"
[[ $RING -eq 1 ]] || fail "expected one DEVICE pool update_visit, found $RING"
[[ $UPDATES -eq $TRAINABLE && $TRAINABLE -gt 0 ]] ||
  fail "expected $TRAINABLE device updates over visits, got $UPDATES"
[[ $HOST_UPDATES -eq 0 ]] || fail "$HOST_UPDATES updates still run on the host"
PER=3 # master, m, v (visit-master: the master alone)
[[ $VISIT_HOME == visit-master ]] && PER=1
[[ $FETCHES -eq $((PER * UPDATES + GRADS)) ]] ||
  fail "expected $PER fetches per update and one per sum fetched, got $FETCHES"
[[ $RETURNS -ge $((PER * UPDATES)) && $RETURNS -le $(((PER + 1) * UPDATES)) ]] ||
  fail "expected $PER or $((PER + 1)) copies back per update, got $RETURNS"

# megatrain-inspect names the visitors in its state section.
"$BIN/megatrain-inspect" visit.plan > visit.inspect || fail "megatrain-inspect visit.plan"
grep -q "^  update visits  $UPDATES host parameters update on the device" visit.inspect ||
  fail "megatrain-inspect does not count the $UPDATES visiting updates: $(grep -m1 'update visits' visit.inspect)"
[[ $(grep -c '^  home           visit ' visit.inspect) -eq $UPDATES ]] ||
  fail "megatrain-inspect lists $(grep -c '^  home           visit ' visit.inspect) visiting homes, not $UPDATES"

expect_same_training visit host
echo "PASS: $MODEL ${EXTRA[*]} trains bitwise-identically with its updates visiting the device"

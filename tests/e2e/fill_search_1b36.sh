#!/usr/bin/env bash
# fill_search_1b36.sh - the fill's search (docs/tiering.md, "The fill"), compile only: the
# graph-only 1.36B Llama export at 8 x 2048 tokens within --device-memory 16GiB, where all of
# its state does not fit beside a checkpoint plan and the state competes with the arena for the
# device. With the search, the fill takes more than the state's price per byte lets it (the
# host's AdamW of the state it displaces hides under the backward): a larger arena, less
# state on the device, less recompute and a faster predicted step than with
# --no-tiering-fill-search, both plans within the budget; --tiering-log records the search.
# usage: fill_search_1b36.sh BIN SRC
set -euo pipefail
BIN=$1
SRC=$2
MODEL=$SRC/tests/models/graphs/llama_1b36_b8s2048.onnx
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cd "$TMP"
fail() { echo "FAIL: $*"; exit 1; }

flags=(--precision bf16 --bf16-activations --device-memory 16GiB --device-profile "$SRC/bench/profiles/h200.json")
for name in search nosearch; do
  extra=()
  [[ $name == nosearch ]] && extra=(--no-tiering-fill-search)
  "$BIN/megatrain-compile" "$MODEL" -o "$name.plan" "${flags[@]}" "${extra[@]}" \
    --tiering-log "$name.tiering" > "$name.log" 2>&1 ||
    { cat "$name.log"; fail "$name: compile"; }
  "$BIN/megatrain-inspect" "$name.plan" --max-steps 1 > "$name.inspect" || fail "$name: inspect"
done
# field NAME: "arena state recompute_ms step_ms device_pool_bytes"
field() {
  python3 - "$1.inspect" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
arena = int(re.search(r"pool bytes +device (\d+)", text).group(1))
pools = dict((m.group(1), m.group(2)) for m in re.finditer(r"'(\w+)' DEVICE ([\d.]+ \w+)", text))
units = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
def size(s):
    v, u = s.split()
    return float(v) * units[u]
step = re.search(r"predicted step ([\d.]+) (m?s)", text)
step_ms = float(step.group(1)) * (1 if step.group(2) == "ms" else 1000)
recompute = re.search(r"recompute ([\d.]+) (m?s)", text)
recompute_ms = float(recompute.group(1)) * (1 if recompute.group(2) == "ms" else 1000)
print(int(size(pools["device"])), int(size(pools.get("device_state", "0 B"))), recompute_ms, step_ms, arena)
PY
}
read -r sa ss sr st sp < <(field search)
read -r na ns nr nt np < <(field nosearch)
echo "with the search:    arena $sa, device state $ss, recompute $sr ms, step $st ms"
echo "without the search: arena $na, device state $ns, recompute $nr ms, step $nt ms"
budget=$((16 << 30))
(( sp <= budget && np <= budget )) || fail "device pools over the budget: $sp, $np"
(( sa > na )) || fail "the search kept no larger arena ($sa against $na)"
(( ss < ns )) || fail "the search left no less state on the device ($ss against $ns)"
awk -v a="$sr" -v b="$nr" 'BEGIN { exit !(a < b) }' || fail "no less recompute ($sr against $nr ms)"
awk -v a="$st" -v b="$nt" 'BEGIN { exit !(a < b) }' || fail "no faster predicted step ($st against $nt ms)"
grep -q "auto (.*fill" search.inspect || fail "the search's plan is not a filled one"
# The tiering log says why: the search's steps, each entry and the choice, which the plan's
# header names too; without the search, no search step.
grep -q '^  fill search prefix [0-9]*: undoes' search.tiering || fail "no search step in the tiering log"
chosen=$(sed -n 's/^chosen //p' search.tiering | tail -1)
[[ -n $chosen ]] || fail "no choice in the tiering log"
grep -q "auto ($chosen)" search.inspect || fail "the log chose '$chosen', the plan says otherwise"
if grep -q '^  fill search' nosearch.tiering; then fail "--no-tiering-fill-search still searched"; fi
echo "tiering log: $(grep -c '^  fill search' search.tiering) search steps, chosen $chosen"
echo "PASS"

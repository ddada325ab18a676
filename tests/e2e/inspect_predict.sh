#!/usr/bin/env bash
# inspect_predict.sh - megatrain-inspect --device-profile predicts a written plan again: on the
# profile the plan was compiled with it prints the compiler's own figures; on a profile whose
# host AdamW is 20 times slower the same schedule (state on the host) predicts a longer step
# with the host optimizer exposed, in the summary, the trace and the header's "predicted on"
# row; --set replaces a figure of the plan's own profile (the same prediction as the slow file);
# a profile that is missing, not JSON or has a bad field, and a bad --set, is one error line,
# status 1.
set -euo pipefail
BIN=$1
SRC=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
TINY=$SRC/frontends/models/tiny_transformer.onnx
PROFILE=$SRC/bench/profiles/h200.json

"$BIN/megatrain-compile" "$TINY" -o "$TMP/tiny.plan" --shape input_ids=8x64 \
  --loss next-token-ce --logits logits --tokens input_ids --lr 3e-3 \
  --device-profile "$PROFILE" --state-home host >"$TMP/compile.txt"

step_of() { sed -n 's/^  predicted step *\([^:]*\): .*/\1/p' "$1"; }
host_of() { sed -n 's/^  predicted step .*host optimizer \([^,]*\),.*/\1/p' "$1"; }

"$BIN/megatrain-inspect" "$TMP/tiny.plan" --max-steps 1 >"$TMP/plain.txt"
"$BIN/megatrain-inspect" "$TMP/tiny.plan" --max-steps 1 --device-profile "$PROFILE" >"$TMP/same.txt"
[[ -n $(step_of "$TMP/plain.txt") ]] || { echo "no predicted step in the plain output"; exit 1; }
[[ $(step_of "$TMP/plain.txt") == "$(step_of "$TMP/same.txt")" ]] ||
  { echo "the compiler's profile predicts $(step_of "$TMP/same.txt"), the plan says $(step_of "$TMP/plain.txt")"; exit 1; }
# Everything but the "predicted on" row is the plan's own output.
diff <(grep -v "^  predicted on" "$TMP/same.txt") "$TMP/plain.txt" >/dev/null ||
  { echo "the same profile changed the output:"; diff <(grep -v "^  predicted on" "$TMP/same.txt") "$TMP/plain.txt"; exit 1; }
grep -q "^  predicted on *$PROFILE (the plan's schedule predicted again; the compiler's $(step_of "$TMP/plain.txt") step on NVIDIA H200)" \
  "$TMP/same.txt" || { echo "no 'predicted on' row:"; grep "predicted on" "$TMP/same.txt"; exit 1; }

python3 - "$PROFILE" "$TMP/slow.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p["name"] = "slow host"
p["host_adamw_params_per_s"] /= 20
json.dump(p, open(sys.argv[2], "w"))
PY
"$BIN/megatrain-inspect" "$TMP/tiny.plan" --max-steps 1 --device-profile "$TMP/slow.json" \
  --trace "$TMP/slow_trace.json" >"$TMP/slow.txt"
grep -q "^  device *slow host$" "$TMP/slow.txt" || { echo "the header does not name the new profile"; exit 1; }
python3 - "$TMP/plain.txt" "$TMP/slow.txt" "$TMP/slow_trace.json" <<'PY'
import json, re, sys

def seconds(text):
    value, unit = text.split()
    return float(value) * {"s": 1, "ms": 1e-3, "us": 1e-6}[unit]

def summary(path):
    line = next(l for l in open(path) if l.startswith("  predicted step"))
    m = re.match(r"  predicted step +([\d.]+ \w+): compute ([\d.]+ \w+), .*host optimizer ([\d.]+ \w+),", line)
    assert m, line
    return [seconds(g) for g in m.groups()]

plain, slow = summary(sys.argv[1]), summary(sys.argv[2])
assert slow[0] > 1.5 * plain[0], (plain, slow)
assert abs(slow[1] - plain[1]) <= 1e-6 * plain[1] + 1e-9, ("the device's compute changed", plain, slow)
assert slow[2] > plain[2], ("no host optimizer exposed", plain, slow)
events = json.load(open(sys.argv[3]))["traceEvents"]
host = [e for e in events if e.get("ph") == "X" and e.get("cat") == "host_task" and e["name"].startswith("adamw")]
assert host, "no host AdamW in the trace"
end = max(e["ts"] + e["dur"] for e in events if e.get("ph") == "X")
print(f"slow host: step {slow[0]*1e3:.3f} ms against {plain[0]*1e3:.3f}, host optimizer {slow[2]*1e3:.3f} ms, "
      f"{len(host)} host AdamW spans, trace ends at {end:.1f} us")
PY

# --set on the plan's own profile (recorded in its header) is the slow file's prediction.
slow_rate=$(python3 -c "import json,sys; print(repr(json.load(open(sys.argv[1]))['host_adamw_params_per_s']))" "$TMP/slow.json")
"$BIN/megatrain-inspect" "$TMP/tiny.plan" --max-steps 1 --set "host_adamw_params_per_s=$slow_rate" >"$TMP/set.txt"
[[ $(step_of "$TMP/set.txt") == "$(step_of "$TMP/slow.txt")" ]] ||
  { echo "--set predicts $(step_of "$TMP/set.txt"), the slow profile $(step_of "$TMP/slow.txt")"; exit 1; }
grep -q "^  predicted on *the plan's profile with host_adamw_params_per_s=$slow_rate " "$TMP/set.txt" ||
  { echo "no 'predicted on' row for --set"; exit 1; }
for bad in "host_adamw_params_per_s:expected FIELD=VALUE" "host_adamw_params_per_s=fast:'fast' is not a number" \
    "hots_adamw_params_per_s=1e9:unknown field 'hots_adamw_params_per_s'" \
    "host_adamw_params_per_s=0:must be a positive number"; do
  change=${bad%%:*} want=${bad#*:}
  if "$BIN/megatrain-inspect" "$TMP/tiny.plan" --set "$change" >"$TMP/out.txt" 2>"$TMP/err.txt"; then
    echo "accepted --set $change"; exit 1
  fi
  [[ $(wc -l <"$TMP/err.txt") == 1 ]] && grep -q "^megatrain-inspect: error: --set.*$want" "$TMP/err.txt" ||
    { echo "unexpected error for --set $change:"; cat "$TMP/err.txt"; exit 1; }
done

# The host rate floor: set to the floor the summary prints, the step stays within 1% of the
# plan's; 5% below it, it grows more; the slow profile's host bounds its step.
floor=$(sed -n 's/^  host rate .* down to a host AdamW of \([0-9.]*\) G params\/s (the profile.s 4.42)$/\1/p' "$TMP/plain.txt")
[[ -n $floor ]] || { echo "no host rate line:"; grep "host rate" "$TMP/plain.txt"; exit 1; }
"$BIN/megatrain-inspect" "$TMP/tiny.plan" --max-steps 1 --set "host_adamw_params_per_s=${floor}e9" >"$TMP/at_floor.txt"
"$BIN/megatrain-inspect" "$TMP/tiny.plan" --max-steps 1 --set "host_adamw_params_per_s=$(python3 -c "print($floor * 0.95e9)")" \
  >"$TMP/below_floor.txt"
python3 - "$TMP/plain.txt" "$TMP/at_floor.txt" "$TMP/below_floor.txt" <<'PY'
import re, sys
def step(path):
    line = next(l for l in open(path) if l.startswith("  predicted step"))
    value, unit = re.match(r"  predicted step +([\d.]+) (\w+):", line).groups()
    return float(value) * {"s": 1, "ms": 1e-3, "us": 1e-6}[unit]
plain, at, below = (step(p) for p in sys.argv[1:])
assert at <= plain * 1.01, (plain, at)  # the floor is printed rounded up to 0.01 G/s
assert below > plain * 1.01, (plain, below)
print(f"host rate floor: {plain*1e3:.3f} ms at the profile's rate, {at*1e3:.3f} at the floor, {below*1e3:.3f} 5% below")
PY
grep -q "^  host rate .*; the host's updates bound the step)$" "$TMP/slow.txt" ||
  { echo "the slow host does not bound its step:"; grep "host rate" "$TMP/slow.txt"; exit 1; }

# Bad profiles: one line naming the file, status 1, nothing printed to stdout.
echo '{"host_adamw_params_per_s": -1}' >"$TMP/negative.json"
echo '{"host_adamw_params_per_s": ' >"$TMP/broken.json"
for bad in "$TMP/missing.json:cannot read" "$TMP/negative.json:must be a positive number" \
    "$TMP/broken.json:not JSON"; do
  file=${bad%%:*} want=${bad#*:}
  if "$BIN/megatrain-inspect" "$TMP/tiny.plan" --device-profile "$file" >"$TMP/out.txt" 2>"$TMP/err.txt"; then
    echo "accepted $file"; exit 1
  fi
  [[ $(wc -l <"$TMP/err.txt") == 1 ]] || { echo "more than one error line for $file:"; cat "$TMP/err.txt"; exit 1; }
  grep -q "^megatrain-inspect: error: $file: .*$want" "$TMP/err.txt" ||
    { echo "unexpected error for $file:"; cat "$TMP/err.txt"; exit 1; }
  [[ ! -s $TMP/out.txt ]] || { echo "printed a plan for $file"; exit 1; }
done
echo "inspect_predict: PASS"

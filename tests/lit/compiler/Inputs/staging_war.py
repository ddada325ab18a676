# staging_war.py PLAN_TEXT - checks, in a --microbatches plan, that every d2h copy into the
# bytes of a gradient staging tensor (grad_stage:<name> in the ring, or grad_part:<name>) that
# an earlier staging tensor used waits (on d2h, after the ACCUMULATE or ADAMW that read the
# earlier one) for an event recorded on host after that read.
import re
import sys

text = open(sys.argv[1]).read()
tensors = {}
for m in re.finditer(r'tensors \{\n  id: (\d+)\n  name: "([^"]*)"\n((?:  .*\n)*?)\}', text):
    body = m.group(3)
    buf = dict(re.findall(r'^    (pool|offset|size_bytes): (\d+)$', body, re.M))
    tensors[int(m.group(1))] = (m.group(2), int(buf.get("pool", 0)), int(buf.get("offset", 0)),
                                int(buf.get("size_bytes", 0)))
steps = []
for m in re.finditer(r'steps \{\n  index: (\d+)\n  stream: "(\w+)"\n  (\w+) \{\n((?:    .*\n)*)', text):
    fields = dict(re.findall(r'^    (\w+): "?([^"\n]*)"?$', m.group(4), re.M))
    ids = [int(x) for x in re.findall(r'^    tensors: (\d+)$', m.group(4), re.M)]
    steps.append((int(m.group(1)), m.group(2), m.group(3), fields, ids))
stages = {i for i, t in tensors.items() if t[0].startswith(("grad_part:", "grad_stage:"))}
assert stages, "no staging tensors"

def overlap(a, b):
    _, pa, oa, sa = tensors[a]
    _, pb, ob, sb = tensors[b]
    return pa == pb and oa < ob + sb and ob < oa + sa

checked = 0
last_read = {}  # staging tensor -> index of the host task that last read it
for index, stream, kind, fields, ids in steps:
    if kind == "host_task" and fields.get("kind") in ("ACCUMULATE", "ADAMW") and ids[1] in stages:
        last_read[ids[1]] = index
    if kind == "copy" and int(fields["dst"]) in stages:
        dst = int(fields["dst"])
        reads = [r for s, r in last_read.items() if overlap(s, dst)]
        if not reads:
            continue
        read = max(reads)
        recorded = {f["event"] for i, s, k, f, _ in steps if k == "record" and s == "host" and read < i < index}
        waited = {f["event"] for i, s, k, f, _ in steps if k == "wait" and s == "d2h" and read < i < index}
        assert recorded & waited, (tensors[dst][0], read, index)
        checked += 1
print(f"ok: {checked} reuses of staging bytes wait for the host task that read them")
assert checked > 0

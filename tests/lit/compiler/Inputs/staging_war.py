# staging_war.py PLAN_TEXT - checks, in a --microbatches plan, that every d2h copy into a
# grad_part:<name> staging tensor after the first waits (on d2h, after the previous
# ACCUMULATE that read it) for an event recorded on host after that ACCUMULATE.
import re
import sys

text = open(sys.argv[1]).read()
names = {int(m.group(1)): m.group(2)
         for m in re.finditer(r'tensors \{\n  id: (\d+)\n  name: "([^"]*)"', text)}
steps = []
for m in re.finditer(r'steps \{\n  index: (\d+)\n  stream: "(\w+)"\n  (\w+) \{\n((?:    .*\n)*)', text):
    fields = dict(re.findall(r'^    (\w+): "?([^"\n]*)"?$', m.group(4), re.M))
    ids = [int(x) for x in re.findall(r'^    tensors: (\d+)$', m.group(4), re.M)]
    steps.append((int(m.group(1)), m.group(2), m.group(3), fields, ids))
stages = {i for i, n in names.items() if n.startswith("grad_part:")}
assert stages, "no grad_part tensors"
checked = 0
for stage in stages:
    last_read = None  # index of the last ACCUMULATE reading the stage
    for index, stream, kind, fields, ids in steps:
        if kind == "host_task" and fields.get("kind") == "ACCUMULATE" and ids[1] == stage:
            last_read = index
        if kind == "copy" and int(fields["dst"]) == stage and last_read is not None:
            recorded = {f["event"] for i, s, k, f, _ in steps
                        if k == "record" and s == "host" and last_read < i < index}
            waited = {f["event"] for i, s, k, f, _ in steps
                      if k == "wait" and s == "d2h" and last_read < i < index}
            assert recorded & waited, (names[stage], last_read, index)
            checked += 1
print(f"ok: {checked} reuses of {len(stages)} staging tensors wait for the previous ACCUMULATE")
assert checked > 0

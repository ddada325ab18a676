#!/usr/bin/env python3
"""plot_metrics_test.py - plot_metrics.py writes well-formed SVG with one point per finite loss.

    python3 tests/frontends/plot_metrics_test.py SOURCE_DIR
"""
import json
import math
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

SRC = sys.argv[1]
SCRIPT = os.path.join(SRC, "frontends", "python", "plot_metrics.py")
SVG = "{http://www.w3.org/2000/svg}"

with tempfile.TemporaryDirectory() as tmp:
    metrics = os.path.join(tmp, "metrics.jsonl")
    with open(metrics, "w") as f:
        for step in range(1, 38):
            # megatrain-run writes a non-finite loss as null: it is skipped.
            loss = None if step == 20 else 5.5 * math.exp(-step / 10) + 1.0
            f.write(json.dumps({"step": step, "loss": loss, "tokens_per_s": 1.0}) + "\n")
    out = os.path.join(tmp, "loss.svg")
    done = subprocess.run([sys.executable, SCRIPT, metrics, "-o", out],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr

    root = ET.parse(out).getroot()  # raises on malformed XML
    assert root.tag == SVG + "svg", root.tag
    width, height = float(root.get("width")), float(root.get("height"))
    lines = {p.get("class"): p.get("points").split() for p in root.iter(SVG + "polyline")}
    assert len(lines["loss"]) == 36, len(lines["loss"])
    assert len(lines["smoothed"]) == 36, len(lines["smoothed"])
    for name in ("loss", "smoothed"):
        for point in lines[name]:
            x, y = map(float, point.split(","))
            assert 0 <= x <= width and 0 <= y <= height, f"{name} point {point} is off the chart"
    # The loss falls, so its first point sits higher on the chart (smaller y) than its last.
    assert float(lines["loss"][0].split(",")[1]) < float(lines["loss"][-1].split(",")[1])
    texts = [t.text for t in root.iter(SVG + "text")]
    assert "step" in texts and "loss" in texts, texts
    assert any(t and t.startswith("loss: metrics.jsonl") for t in texts), texts
    print(f"ok  {out}: axes, labels, 36 points in each line")

    empty = os.path.join(tmp, "empty.jsonl")
    open(empty, "w").close()
    done = subprocess.run([sys.executable, SCRIPT, empty, "-o", out], capture_output=True, text=True)
    assert done.returncode != 0 and "no finite loss" in done.stderr, done.stderr
    print("ok  no data is one clear error")

#!/usr/bin/env python3
"""metrics_to_tensorboard_test.py - the event file metrics_to_tensorboard.py writes holds every metric at its step.

    python3 tests/frontends/metrics_to_tensorboard_test.py SOURCE_DIR

Reads the file back with a reader written here from the format (record framing
and CRC-32C checked, the Event protobuf decoded field by field), and also with
tensorboard's EventAccumulator when the tensorboard package is installed.
"""
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

SRC = sys.argv[1]
SCRIPT = os.path.join(SRC, "frontends", "python", "metrics_to_tensorboard.py")


def crc32c(data):
    """Bit by bit, not table-driven like the writer's."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value


def unmask(masked):
    rotated = (masked - 0xA282EAD8) & 0xFFFFFFFF
    return ((rotated << 15) | (rotated >> 17)) & 0xFFFFFFFF


def varint(data, at):
    value, shift = 0, 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def fields(data):
    """(field number, wire type, value) of a protobuf message: ints, bytes or raw fixed-width bytes."""
    at, out = 0, []
    while at < len(data):
        key, at = varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = varint(data, at)
        elif wire == 1:
            value, at = data[at:at + 8], at + 8
        elif wire == 2:
            length, at = varint(data, at)
            value, at = data[at:at + length], at + length
        elif wire == 5:
            value, at = data[at:at + 4], at + 4
        else:
            raise AssertionError(f"wire type {wire}")
        out.append((number, wire, value))
    assert at == len(data), "a field runs past the message"
    return out


def read_events(path):
    """{tag: [(step, value)]} and the file_version, checking every record's framing and CRCs."""
    with open(path, "rb") as f:
        data = f.read()
    at, scalars, version = 0, {}, None
    while at < len(data):
        header = data[at:at + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", data[at + 8:at + 12])
        assert unmask(length_crc) == crc32c(header), f"length CRC at byte {at}"
        body = data[at + 12:at + 12 + length]
        (body_crc,) = struct.unpack("<I", data[at + 12 + length:at + 16 + length])
        assert unmask(body_crc) == crc32c(body), f"data CRC at byte {at}"
        at += 16 + length
        step = 0
        for number, wire, value in fields(body):
            if number == 2:
                step = value
            elif number == 3:
                version = value.decode()
            elif number == 5:
                for vnumber, _, entry in fields(value):
                    assert vnumber == 1
                    entry_fields = {n: v for n, _, v in fields(entry)}
                    tag = entry_fields[1].decode()
                    (number_value,) = struct.unpack("<f", entry_fields[2])
                    scalars.setdefault(tag, []).append((step, number_value))
    assert at == len(data), "trailing bytes"
    return scalars, version


def f32(value):
    return struct.unpack("<f", struct.pack("<f", value))[0]


with tempfile.TemporaryDirectory() as tmp:
    metrics = os.path.join(tmp, "metrics.jsonl")
    expected = {}
    with open(metrics, "w") as f:
        for step in range(1, 13):
            row = {"step": step, "loss": 4.0 / step + 1.0, "tokens_per_s": 1000.0 + step, "step_time_s": 0.01 * step,
                   "tokens": 256, "lr": 1e-3 * step / 12, "grad_norm": 2.0 - step / 10, "elapsed_s": 0.1 * step}
            if step == 7:
                row["loss"] = None  # megatrain-run writes a non-finite loss as null: skipped
            if step % 4 == 0:  # --eval-every 4
                row["eval_loss"] = 3.0 - step / 10
                row["eval_ppl"] = math.exp(row["eval_loss"])
                row["eval_time_s"] = 0.5
            f.write(json.dumps(row) + "\n")
            for field, tag in [("loss", "train/loss"), ("lr", "train/lr"), ("grad_norm", "train/grad_norm"),
                               ("tokens_per_s", "train/tokens_per_s"), ("step_time_s", "train/step_time_s"),
                               ("eval_loss", "eval/loss"), ("eval_ppl", "eval/ppl")]:
                if row.get(field) is not None:
                    expected.setdefault(tag, []).append((step, f32(row[field])))
    logdir = os.path.join(tmp, "tb")
    done = subprocess.run([sys.executable, SCRIPT, metrics, "-o", logdir, "--run", "a"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    files = os.listdir(os.path.join(logdir, "a"))
    assert len(files) == 1 and files[0].startswith("events.out.tfevents."), files
    path = os.path.join(logdir, "a", files[0])

    scalars, version = read_events(path)
    assert version == "brain.Event:2", version
    assert scalars == expected, (scalars, expected)
    assert [s for s, _ in scalars["eval/loss"]] == [4, 8, 12]
    assert 7 not in [s for s, _ in scalars["train/loss"]]

    # requirements-test.txt installs tensorboard; MEGATRAIN_ALLOW_NO_TENSORBOARD=1 lets a machine
    # without it check the file with this test's own reader only, and says so.
    try:
        from tensorboard.backend.event_processing import event_accumulator
    except ImportError:
        if os.environ.get("MEGATRAIN_ALLOW_NO_TENSORBOARD") != "1":
            raise SystemExit("tensorboard is not installed (pip install -r requirements-test.txt)")
        print("tensorboard is not installed: checked with this test's own reader only")
    else:
        accumulator = event_accumulator.EventAccumulator(path, size_guidance={event_accumulator.SCALARS: 0})
        accumulator.Reload()
        assert sorted(accumulator.Tags()["scalars"]) == sorted(expected), accumulator.Tags()
        for tag, points in expected.items():
            got = [(e.step, e.value) for e in accumulator.Scalars(tag)]
            assert got == points, (tag, got, points)
        print("tensorboard's EventAccumulator reads the same values")

    # A second conversion into the same folder is a new file, not an overwrite.
    done = subprocess.run([sys.executable, SCRIPT, metrics, "-o", logdir, "--run", "a"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert len(os.listdir(os.path.join(logdir, "a"))) == 2

    # A line that is not a metrics row is an error naming the file and line.
    with open(metrics, "a") as f:
        f.write("{\"loss\": 1.0}\n")
    done = subprocess.run([sys.executable, SCRIPT, metrics, "-o", logdir], capture_output=True, text=True)
    assert done.returncode != 0 and "metrics.jsonl:13: not a metrics row" in done.stderr, done.stderr

print("metrics_to_tensorboard_test: ok")

#!/usr/bin/env python3
"""metrics_to_tensorboard.py - turns megatrain-run --metrics rows into a TensorBoard event file.

    python3 frontends/python/metrics_to_tensorboard.py METRICS.jsonl -o LOGDIR [--run NAME]
    tensorboard --logdir LOGDIR

Writes LOGDIR/events.out.tfevents.<time>.megatrain (into LOGDIR/NAME with --run)
holding, per row, a scalar for each field present and finite:

    train/loss        loss          train/lr          lr
    train/grad_norm   grad_norm     train/tokens_per_s tokens_per_s
    train/step_time_s step_time_s   eval/loss         eval_loss
    eval/ppl          eval_ppl

at the row's `step` (null values, written for non-finite numbers, and fields a row
lacks are skipped; eval_* appear only on the steps that evaluated). A file written
over again gets a new name, as TensorBoard expects of a new run.

Needs only the Python standard library: the file is written here, in the format
TensorBoard reads, not through the tensorboard package (which is large and not
needed to write a few scalars). The format:

- A file is a sequence of records. Each record is: the data's length as a
  little-endian u64, the masked CRC-32C of those 8 bytes (u32), the data, the
  masked CRC-32C of the data (u32). masked(c) = ((c >> 15 | c << 17) + 0xa282ead8)
  mod 2^32; CRC-32C is the Castagnoli CRC (reflected polynomial 0x82F63B78).
- Each record's data is a serialized tensorflow.Event protobuf: wall_time
  (field 1, double), step (field 2, int64), and either file_version (field 3,
  string, "brain.Event:2", the first record) or summary (field 5, a Summary
  message: repeated value (field 1), each a Summary.Value with tag (field 1,
  string) and simple_value (field 2, float)).

tests/frontends/metrics_to_tensorboard_test.py reads the file back (with
tensorboard's own reader when the package is installed, else with a reader of
the format above) and checks every value.
"""
import argparse
import json
import math
import os
import socket
import struct
import sys
import time

# Metrics field -> TensorBoard tag, in the order they are written.
TAGS = [
    ("loss", "train/loss"),
    ("lr", "train/lr"),
    ("grad_norm", "train/grad_norm"),
    ("tokens_per_s", "train/tokens_per_s"),
    ("step_time_s", "train/step_time_s"),
    ("eval_loss", "eval/loss"),
    ("eval_ppl", "eval/ppl"),
]


def _crc32c_table():
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC32C = _crc32c_table()


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC32C[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc(data):
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def record(data):
    """One record of the file: length, its CRC, the data, its CRC."""
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", masked_crc(length)) + data + struct.pack("<I", masked_crc(data))


def _varint(value):
    out = bytearray()
    value &= (1 << 64) - 1  # int64 fields are written as their two's complement
    while True:
        bits = value & 0x7F
        value >>= 7
        if value:
            out.append(bits | 0x80)
        else:
            out.append(bits)
            return bytes(out)


def _field(number, wire_type):
    return _varint(number << 3 | wire_type)


def _length_delimited(number, payload):
    return _field(number, 2) + _varint(len(payload)) + payload


def event(wall_time, step, file_version=None, scalars=()):
    """A serialized Event: wall_time, step, and a file_version or a Summary of (tag, value) scalars."""
    out = _field(1, 1) + struct.pack("<d", wall_time) + _field(2, 0) + _varint(step)
    if file_version is not None:
        out += _length_delimited(3, file_version.encode())
    if scalars:
        summary = b"".join(
            _length_delimited(1, _length_delimited(1, tag.encode()) + _field(2, 5) + struct.pack("<f", value))
            for tag, value in scalars)
        out += _length_delimited(5, summary)
    return out


def read_rows(path):
    """(step, [(tag, value), ...]) per metrics row, skipping null and missing fields."""
    rows = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                sys.exit(f"metrics_to_tensorboard.py: {path}:{number}: not JSON ({error.msg})")
            step = row.get("step") if isinstance(row, dict) else None
            if not isinstance(step, int) or isinstance(step, bool):
                sys.exit(f"metrics_to_tensorboard.py: {path}:{number}: not a metrics row (no integer \"step\")")
            scalars = []
            for field, tag in TAGS:
                value = row.get(field)
                if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                    scalars.append((tag, float(value)))
            rows.append((step, scalars))
    return rows


def write_events(rows, logdir, wall_time=None):
    """Writes the rows to a new event file in logdir; returns its path."""
    os.makedirs(logdir, exist_ok=True)
    now = time.time() if wall_time is None else wall_time
    name = f"events.out.tfevents.{int(now):010d}.{socket.gethostname() or 'megatrain'}.megatrain"
    path = os.path.join(logdir, name)
    suffix = 1
    while os.path.exists(path):
        path = os.path.join(logdir, f"{name}.{suffix}")
        suffix += 1
    with open(path, "wb") as f:
        f.write(record(event(now, 0, file_version="brain.Event:2")))
        for step, scalars in rows:
            if scalars:
                f.write(record(event(now, step, scalars=scalars)))
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("metrics", help="megatrain-run --metrics FILE.jsonl")
    parser.add_argument("-o", "--logdir", required=True, help="TensorBoard log folder to write into")
    parser.add_argument("--run", help="write into LOGDIR/RUN (one folder per run in TensorBoard)")
    args = parser.parse_args()
    if not os.path.isfile(args.metrics):
        sys.exit(f"metrics_to_tensorboard.py: {args.metrics}: no such file")
    rows = read_rows(args.metrics)
    logdir = os.path.join(args.logdir, args.run) if args.run else args.logdir
    path = write_events(rows, logdir)
    count = sum(len(scalars) for _, scalars in rows)
    print(f"metrics_to_tensorboard.py: wrote {path} ({len(rows)} rows, {count} scalars)")


if __name__ == "__main__":
    main()

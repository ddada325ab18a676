#!/usr/bin/env python3
"""plan_header.py - a plan's header and pools as JSON, read straight from the protobuf wire format.

    python3 bench/plan_header.py MODEL.plan

Needs only the Python standard library (no generated protobuf code), so it runs wherever
the benchmark does. Reads the fields of plan/plan.proto the benchmark reports:
precision, micro-batches, tokens per step, device budget, predicted step time and its
breakdown, bytes moved per step, and every pool with its tier, size and predicted peak.
"""
import json
import struct
import sys

TIERS = {0: "unspecified", 1: "device", 2: "host_pinned", 3: "disk"}


def varint(data, pos):
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def fields(data):
    """(field number, wire type, value) of one message: ints, doubles and byte strings."""
    pos = 0
    while pos < len(data):
        key, pos = varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = varint(data, pos)
        elif wire == 1:
            value = struct.unpack_from("<d", data, pos)[0]
            pos += 8
        elif wire == 2:
            length, pos = varint(data, pos)
            value = data[pos:pos + length]
            pos += length
        elif wire == 5:
            value = data[pos:pos + 4]
            pos += 4
        else:
            raise ValueError(f"unsupported wire type {wire} (field {number})")
        yield number, wire, value


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    header, pools = {}, []
    for number, _, value in fields(data):
        if number == 2:
            header = parse_header(value)
        elif number == 4:
            pool = {}
            for n, _, v in fields(value):
                if n == 1:
                    pool["id"] = v
                elif n == 2:
                    pool["name"] = v.decode()
                elif n == 3:
                    pool["tier"] = TIERS.get(v, str(v))
                elif n == 4:
                    pool["size_bytes"] = v
            pool.setdefault("id", 0)
            pools.append(pool)
    peaks = header.pop("predicted_peak", {})
    for pool in pools:
        if pool["id"] in peaks:
            pool["predicted_peak_bytes"] = peaks[pool["id"]]
    header["pools"] = pools
    header["device_pool_bytes"] = sum(p.get("size_bytes", 0) for p in pools if p.get("tier") == "device")
    header["host_pinned_pool_bytes"] = sum(p.get("size_bytes", 0) for p in pools if p.get("tier") == "host_pinned")
    return header


def parse_header(data):
    names = {1: "format_major", 2: "format_minor", 3: "generator", 4: "source_model", 7: "device_profile",
             9: "predicted_step_s", 13: "microbatches", 14: "tokens_per_step", 15: "token_input",
             16: "device_budget_bytes", 17: "h2d_bytes", 18: "d2h_bytes", 19: "tiering_policy",
             20: "precision", 25: "device_capacity_bytes"}
    breakdown = {1: "compute_s", 2: "exposed_transfer_s", 3: "recompute_s", 4: "host_optimizer_s", 5: "idle_s"}
    header = {"compile_options": [], "predicted_peak": {}, "predicted_breakdown": {}}
    for number, _, value in fields(data):
        if number in names:
            header[names[number]] = value.decode() if isinstance(value, bytes) else value
        elif number == 6:
            header["compile_options"].append(value.decode())
        elif number == 8:
            usage = dict((n, v) for n, _, v in fields(value))
            header["predicted_peak"][usage.get(1, 0)] = usage.get(2, 0)
        elif number == 10:
            for n, _, v in fields(value):
                if n in breakdown:
                    header["predicted_breakdown"][breakdown[n]] = v
    header.setdefault("precision", "")
    header.setdefault("predicted_step_s", 0.0)
    header.setdefault("microbatches", 0)
    return header


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: plan_header.py MODEL.plan")
    print(json.dumps(read(sys.argv[1]), indent=2))

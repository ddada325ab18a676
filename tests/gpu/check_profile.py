#!/usr/bin/env python3
"""check_profile.py - checks a device profile that megatrain-profile wrote: every field present, positive, known.

usage: check_profile.py FILE [--disk] [--rows]

The GPU machine has no megatrain-compile to read the profile with, so this
checks what the compiler's reader would (plan/lib/DeviceProfile.cpp):
no unknown fields, every number positive and finite; and what a measurement
must give: every field present (the disk ones only with --disk, as the tool
writes them only when asked; host_memory_bytes where the machine reports its
pages). tests/plan/ProfileJsonTest.cpp runs this on a
profile written by the C++ writer, so the field list below cannot go stale.
Prints one line; exit 0 when the profile passes. --rows: then one line per
group of figures, "label<TAB>figures (docs/hardware.md's H200)", for bench/device.sh's table.
"""
import json
import math
import sys

RATES = ["matmul_fp32_flops", "matmul_tf32_flops", "matmul_bf16_flops", "hbm_bytes_per_s",
         "h2d_bytes_per_s", "d2h_bytes_per_s", "duplex_bytes_per_s", "host_adamw_params_per_s",
         "host_bytes_per_s", "launch_s"]
DISK = ["disk_read_bytes_per_s", "disk_write_bytes_per_s"]


def problems(profile, disk):
    if not isinstance(profile, dict):
        return ["not a JSON object"]
    found = []
    required = ["name", "device_memory_bytes"] + RATES + (DISK if disk else [])
    found += [f"missing field '{key}'" for key in required if key not in profile]
    for key, value in profile.items():
        if key == "name":
            if not isinstance(value, str) or not value:
                found.append("field 'name' must be a non-empty string")
        elif key in ["device_memory_bytes", "host_memory_bytes"] + RATES + DISK:
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not math.isfinite(value) or value <= 0:
                found.append(f"field '{key}' must be a positive number, got {value!r}")
        else:
            found.append(f"unknown field '{key}'")
    return found


def rows(profile):
    def g(key, scale, digits):
        return f"{profile[key] / scale:.{digits}f}"
    out = [
        ("profile matmul", f"TFLOP/s fp32 {g('matmul_fp32_flops', 1e12, 1)} / tf32 {g('matmul_tf32_flops', 1e12, 0)}"
                           f" / bf16 {g('matmul_bf16_flops', 1e12, 0)} (H200: 51 / 395 / 777)"),
        ("profile memory", f"HBM {g('hbm_bytes_per_s', 1e12, 2)} TB/s (4.2), host a+b->c {g('host_bytes_per_s', 1e9, 1)}"
                           f" GB/s (90.8), card {g('device_memory_bytes', 1e9, 1)} GB"),
        ("profile links", f"GB/s h2d {g('h2d_bytes_per_s', 1e9, 1)} / d2h {g('d2h_bytes_per_s', 1e9, 1)}"
                          f" / duplex {g('duplex_bytes_per_s', 1e9, 1)} (54.2 / 55.0 / 83.4)"),
        ("profile host adamw", f"{g('host_adamw_params_per_s', 1e9, 2)} G params/s, every host thread, both links copying"
                               f" (torch fused, 16 threads: 3.5)"),
        ("profile launch", f"{g('launch_s', 1e-6, 2)} us per empty kernel (4)"),
    ]
    if "disk_read_bytes_per_s" in profile:
        out.append(("profile disk", f"GB/s read {g('disk_read_bytes_per_s', 1e9, 2)} / write"
                                    f" {g('disk_write_bytes_per_s', 1e9, 2)} (1.4 / 1.6)"))
    return out


def main():
    args = [a for a in sys.argv[1:] if a not in ("--disk", "--rows")]
    if len(args) != 1:
        print(__doc__.splitlines()[2], file=sys.stderr)
        return 2
    try:
        with open(args[0]) as f:
            profile = json.load(f)
    except (OSError, ValueError) as e:
        print(f"FAIL {args[0]}: {e}")
        return 1
    found = problems(profile, "--disk" in sys.argv[1:])
    if found:
        print(f"FAIL {args[0]}: " + "; ".join(found))
        return 1
    print(f"PASS {args[0]}: {profile['name']}, {len(profile)} fields, all positive")
    if "--rows" in sys.argv[1:]:
        for label, detail in rows(profile):
            print(f"{label}\t{detail}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

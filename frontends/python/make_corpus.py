#!/usr/bin/env python3
"""make_corpus.py - byte-tokenizes the Debian fortunes into a flat uint16 token file.

    python3 frontends/python/make_corpus.py --out data/fortunes.tokens

Reads every text file of the fortune databases (default
/usr/share/games/fortunes; Debian packages `fortunes-min` and `fortunes`),
skipping the .dat/.u8 index files, symlinks and the offensive `off`
subdirectory, in sorted name order. Each byte becomes one token (vocabulary
256), written as little-endian uint16 to PATH, with a sidecar PATH.json:

    {"dtype": "uint16", "vocab": 256, "tokens": N, "source": "...",
     "files": [...], "sha256": "<of the token file>"}

Needs only the Python standard library.
"""
import argparse
import array
import hashlib
import json
import os
import sys

DEFAULT_SOURCE = "/usr/share/games/fortunes"


def corpus_files(source):
    names = []
    for name in sorted(os.listdir(source)):
        path = os.path.join(source, name)
        if name.endswith((".dat", ".u8")) or os.path.islink(path) or not os.path.isfile(path):
            continue  # index files, links to other databases, and the `off` directory
        names.append(name)
    return names


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="token file to write (uint16)")
    parser.add_argument("--source", default=DEFAULT_SOURCE,
                        help=f"fortune database directory (default {DEFAULT_SOURCE})")
    args = parser.parse_args()

    if not os.path.isdir(args.source):
        sys.exit(f"make_corpus.py: {args.source} does not exist; "
                 "install the Debian packages fortunes-min and fortunes")
    names = corpus_files(args.source)
    if not names:
        sys.exit(f"make_corpus.py: no fortune files in {args.source}")

    tokens = array.array("H")
    for name in names:
        with open(os.path.join(args.source, name), "rb") as f:
            tokens.extend(f.read())  # iterating bytes gives one int per byte
    if sys.byteorder != "little":
        tokens.byteswap()  # the file is little-endian on every host
    data = tokens.tobytes()

    out_dir = os.path.dirname(os.path.abspath(args.out))
    os.makedirs(out_dir, exist_ok=True)
    with open(args.out, "wb") as f:
        f.write(data)
    meta = {
        "dtype": "uint16",
        "byte_order": "little",
        "vocab": 256,
        "tokens": len(data) // 2,
        "source": args.source,
        "files": names,
        "sha256": hashlib.sha256(data).hexdigest(),
    }
    with open(args.out + ".json", "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")
    print(f"wrote {args.out} ({meta['tokens']} tokens from {len(names)} files) "
          f"and {args.out}.json")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""make_corpus.py - byte-tokenizes the Debian fortunes into a flat uint16 token file.

    python3 frontends/python/make_corpus.py --out data/fortunes.tokens

Reads every text file of the fortune databases (default
/usr/share/games/fortunes; Debian packages `fortunes-min` and `fortunes`),
skipping the .dat/.u8 index files, symlinks and the offensive `off`
subdirectory, in sorted name order. Each byte becomes one token (vocabulary
256), written as little-endian uint16 to PATH, with a sidecar PATH.json:

    {"dtype": "uint16", "byte_order": "little", "tokens": N, "vocab": 256,
     "source": "...", "tokenizer": "bytes", "files": [...],
     "sha256": "<of the token file>"}

The tokens are made and written by tokenize_text.py's byte-level path. Needs
only the Python standard library.
"""
import argparse
import os
import sys

from tokenize_text import BYTE_VOCAB, byte_tokens, write_tokens

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

    tokens = byte_tokens([os.path.join(args.source, name) for name in names])
    meta = write_tokens(args.out, tokens, {
        "vocab": BYTE_VOCAB,
        "source": args.source,
        "tokenizer": "bytes",
        "files": names,
    })
    print(f"wrote {args.out} ({meta['tokens']} tokens from {len(names)} files) "
          f"and {args.out}.json")


if __name__ == "__main__":
    main()

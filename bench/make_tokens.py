#!/usr/bin/env python3
"""make_tokens.py - a token file of uniformly random ids for megatrain-run --data.

    python3 bench/make_tokens.py --vocab 32000 --tokens 4194304 --out tokens.bin [--seed 0]

Throughput does not depend on which tokens a model sees, so the benchmark trains on
random ones. Written by frontends/python/tokenize_text.py's writer: little-endian uint16
(uint32 above a 65,536 vocabulary) with the sidecar TOKENS.bin.json megatrain-run reads.
"""
import argparse
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "frontends", "python"))
from tokenize_text import choose_dtype, token_array, write_tokens  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", type=int, required=True)
    parser.add_argument("--tokens", type=int, default=1 << 22, help="how many (default 4,194,304)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    if args.vocab < 2 or args.tokens < 1:
        parser.error("--vocab must be at least 2 and --tokens at least 1")
    rng = random.Random(args.seed)
    tokens = token_array(choose_dtype(args.vocab))
    tokens.extend(rng.randrange(args.vocab) for _ in range(args.tokens))
    meta = write_tokens(args.out, tokens, {"vocab": args.vocab, "source": f"random, seed {args.seed}",
                                           "tokenizer": "none (uniform random ids)"})
    print(f"wrote {args.out} ({meta['tokens']} random tokens below {args.vocab}, {meta['dtype']})")


if __name__ == "__main__":
    main()

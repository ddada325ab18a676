#!/usr/bin/env python3
"""tokenize_text.py - turns text files into a flat token file that megatrain-run --data reads.

    python3 frontends/python/tokenize_text.py INPUT... --out TOKENS.bin \\
        [--tokenizer tokenizer.json] [--dtype uint16|uint32]

Byte-level by default: every byte of the inputs, in the order given, is one
token (vocabulary 256). With --tokenizer, a Hugging Face tokenizer.json is
applied through the Python package `tokenizers` (imported only then). Tokens
are written little-endian as uint16 when the vocabulary fits (<= 65536), else
uint32 (or as --dtype says), with a sidecar TOKENS.bin.json:

    {"dtype": "uint16", "byte_order": "little", "vocab": 256, "tokens": N,
     "source": [INPUT, ...], "tokenizer": "bytes" | "<tokenizer.json path>",
     "sha256": "<of the token file>"}

The byte-level path needs only the Python standard library.
"""
import argparse
import array
import hashlib
import json
import os
import sys

BYTE_VOCAB = 256
UINT16_LIMIT = 1 << 16
# Text is handed to a tokenizer in pieces of about this many characters, split
# at line ends, so a large file does not have to be encoded in one call.
CHUNK_CHARS = 1 << 20


def choose_dtype(vocab, requested=None):
    """The narrowest dtype for ids in [0, vocab), or `requested` if it holds them."""
    if requested is None:
        return "uint16" if vocab <= UINT16_LIMIT else "uint32"
    if requested == "uint16" and vocab > UINT16_LIMIT:
        raise ValueError(f"a vocabulary of {vocab} does not fit in uint16; use --dtype uint32")
    return requested


def token_array(dtype):
    """An empty array.array whose items are exactly 2 (uint16) or 4 (uint32) bytes."""
    if dtype == "uint16":
        return array.array("H")
    code = "I" if array.array("I").itemsize == 4 else "L"
    return array.array(code)


def write_tokens(out, tokens, meta):
    """Writes `tokens` (an array.array) little-endian to `out` and `meta` (plus
    dtype, byte_order, tokens and sha256) to `out`.json; returns the sidecar dict."""
    if sys.byteorder != "little":
        tokens = array.array(tokens.typecode, tokens)
        tokens.byteswap()  # the file is little-endian on every host
    data = tokens.tobytes()
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    # Through a temporary, so a failed run never leaves a short token file behind.
    with open(out + ".tmp", "wb") as f:
        f.write(data)
    os.replace(out + ".tmp", out)
    sidecar = {"dtype": "uint16" if tokens.itemsize == 2 else "uint32", "byte_order": "little",
               "tokens": len(tokens)}
    sidecar.update(meta)
    sidecar["sha256"] = hashlib.sha256(data).hexdigest()
    with open(out + ".json", "w") as f:
        json.dump(sidecar, f, indent=2)
        f.write("\n")
    return sidecar


def byte_tokens(paths, dtype="uint16"):
    """Every byte of the files, in order, as one token each."""
    tokens = token_array(dtype)
    for path in paths:
        with open(path, "rb") as f:
            tokens.extend(f.read())  # iterating bytes gives one int per byte
    return tokens


def load_tokenizer(path):
    try:
        from tokenizers import Tokenizer  # only this path needs the package
    except ImportError:
        sys.exit("tokenize_text.py: --tokenizer needs the Python package 'tokenizers' "
                 "(pip install tokenizers)")
    try:
        return Tokenizer.from_file(path)
    except Exception as error:  # tokenizers raises its own exception types
        sys.exit(f"tokenize_text.py: cannot load tokenizer {path}: {error}")


def text_chunks(path):
    """The file's text in pieces of about CHUNK_CHARS characters, each ending at a line end."""
    with open(path, encoding="utf-8") as f:
        piece, size = [], 0
        for line in f:
            piece.append(line)
            size += len(line)
            if size >= CHUNK_CHARS:
                yield "".join(piece)
                piece, size = [], 0
        if piece:
            yield "".join(piece)


def tokenizer_tokens(paths, tokenizer, dtype):
    tokens = token_array(dtype)
    for path in paths:
        for chunk in text_chunks(path):
            tokens.extend(tokenizer.encode(chunk, add_special_tokens=False).ids)
    return tokens


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("inputs", nargs="+", metavar="INPUT", help="text files, concatenated in order")
    parser.add_argument("--out", required=True, help="token file to write")
    parser.add_argument("--tokenizer", help="a Hugging Face tokenizer.json (default: bytes)")
    parser.add_argument("--dtype", choices=["uint16", "uint32"],
                        help="token width (default: uint16 when the vocabulary fits)")
    args = parser.parse_args()

    for path in args.inputs:
        if not os.path.isfile(path):
            sys.exit(f"tokenize_text.py: {path} is not a file")
    try:
        if args.tokenizer:
            tokenizer = load_tokenizer(args.tokenizer)
            vocab = tokenizer.get_vocab_size(with_added_tokens=True)
            dtype = choose_dtype(vocab, args.dtype)
            tokens = tokenizer_tokens(args.inputs, tokenizer, dtype)
        else:
            vocab = BYTE_VOCAB
            dtype = choose_dtype(vocab, args.dtype)
            tokens = byte_tokens(args.inputs, dtype)
    except (ValueError, UnicodeDecodeError) as error:
        sys.exit(f"tokenize_text.py: {error}")
    meta = write_tokens(args.out, tokens, {
        "vocab": vocab,
        "source": args.inputs,
        "tokenizer": args.tokenizer or "bytes",
    })
    print(f"wrote {args.out} ({meta['tokens']} {dtype} tokens, vocabulary {vocab}) and {args.out}.json")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""tokenize_text_test.py - tokenize_text.py's byte-level path round-trips text, in both widths.

    python3 tests/frontends/tokenize_text_test.py SOURCE_DIR
"""
import array
import hashlib
import json
import os
import subprocess
import sys
import tempfile

SRC = sys.argv[1]
SCRIPT = os.path.join(SRC, "frontends", "python", "tokenize_text.py")


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)


with tempfile.TemporaryDirectory() as tmp:
    # Every byte value, UTF-8 text and a newline-less tail, over two files.
    first, second = os.path.join(tmp, "a.txt"), os.path.join(tmp, "b.txt")
    with open(first, "wb") as f:
        f.write("héllo, wörld\n".encode() + bytes(range(256)))
    with open(second, "wb") as f:
        f.write(b"the end")
    expected = open(first, "rb").read() + open(second, "rb").read()

    for dtype, code, width in [("uint16", "H", 2), ("uint32", "I", 4)]:
        out = os.path.join(tmp, f"tokens.{dtype}.bin")
        args = [first, second, "--out", out] + (["--dtype", dtype] if dtype == "uint32" else [])
        done = run(*args)
        assert done.returncode == 0, done.stderr
        data = open(out, "rb").read()
        tokens = array.array(code if array.array(code).itemsize == width else "L")
        tokens.frombytes(data)
        if sys.byteorder != "little":
            tokens.byteswap()
        assert bytes(tokens.tolist()) == expected, f"{dtype}: the tokens are not the input bytes"
        meta = json.load(open(out + ".json"))
        assert meta["dtype"] == dtype, meta
        assert meta["vocab"] == 256 and meta["tokenizer"] == "bytes", meta
        assert meta["tokens"] == len(expected) == len(data) // width, meta
        assert meta["source"] == [first, second], meta
        assert meta["sha256"] == hashlib.sha256(data).hexdigest(), meta
        print(f"ok  {dtype}: {len(expected)} bytes round-trip")

    # The tokenizer.json path, when the optional `tokenizers` package is installed: a
    # byte-level BPE trained here must give ids that decode back to the text.
    try:
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    except ImportError:
        print("skip tokenizer.json: the Python package 'tokenizers' is not installed")
    else:
        text = os.path.join(tmp, "text.txt")
        with open(text, "w") as f:
            f.write("the cat sat on the mat; the cat ate the rat\n" * 20)
        bpe = Tokenizer(models.BPE())
        bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        bpe.decoder = decoders.ByteLevel()
        bpe.train([text], trainers.BpeTrainer(vocab_size=300, show_progress=False,
                                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
        bpe.save(os.path.join(tmp, "tokenizer.json"))
        out = os.path.join(tmp, "bpe.bin")
        done = run(text, "--out", out, "--tokenizer", os.path.join(tmp, "tokenizer.json"))
        assert done.returncode == 0, done.stderr
        ids = array.array("H")
        ids.frombytes(open(out, "rb").read())
        meta = json.load(open(out + ".json"))
        assert meta["dtype"] == "uint16" and meta["vocab"] == bpe.get_vocab_size(), meta
        assert meta["tokenizer"].endswith("tokenizer.json"), meta
        assert len(ids) < os.path.getsize(text) // 2, "BPE should merge bytes"
        assert bpe.decode(ids.tolist()) == open(text).read(), "the ids do not decode to the text"
        print(f"ok  tokenizer.json: {len(ids)} ids decode back to the text")

    missing = run(os.path.join(tmp, "nope.txt"), "--out", os.path.join(tmp, "x.bin"))
    assert missing.returncode != 0 and "nope.txt is not a file" in missing.stderr, missing.stderr
    print("ok  a missing input is one clear error")

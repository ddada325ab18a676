#!/usr/bin/env python3
"""tokenize_documents_test.py - tokenize_text.py's documents: EOS/BOS placement, JSONL, chat masking, mask alignment.

    python3 tests/frontends/tokenize_documents_test.py SOURCE_DIR

A byte-level BPE with the special tokens of a ChatML-style template is trained here,
saved with a tokenizer_config.json, and the token and mask files are checked id by id.
"""
import array
import hashlib
import json
import os
import subprocess
import sys
import tempfile

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

SRC = sys.argv[1]
SCRIPT = os.path.join(SRC, "frontends", "python", "tokenize_text.py")
TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
            "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def run(*args):
    done = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)
    return done


def read(out):
    ids = array.array("H")
    ids.frombytes(open(out, "rb").read())
    if sys.byteorder != "little":
        ids.byteswap()
    meta = json.load(open(out + ".json"))
    mask = open(out + ".mask", "rb").read() if os.path.exists(out + ".mask") else None
    return ids.tolist(), meta, mask


def make_tokenizer(folder, config):
    os.makedirs(folder, exist_ok=True)
    corpus = os.path.join(folder, "corpus.txt")
    with open(corpus, "w") as f:
        f.write("the cat sat on the mat. hi there, what did the cat do?\n" * 20)
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train([corpus], trainers.BpeTrainer(
        vocab_size=300, show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=["<|endoftext|>", "<s>", "<|im_start|>", "<|im_end|>"]))
    bpe.save(os.path.join(folder, "tokenizer.json"))
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump(dict({"tokenizer_class": "PreTrainedTokenizerFast"}, **config), f)
    return bpe


with tempfile.TemporaryDirectory() as tmp:
    a, b = os.path.join(tmp, "a.txt"), os.path.join(tmp, "b.txt")
    with open(a, "w") as f:
        f.write("the cat sat")
    with open(b, "w") as f:
        f.write("on the mat")

    # EOS after every document and BOS before it, from tokenizer_config.json.
    plain = os.path.join(tmp, "plain")
    bpe = make_tokenizer(plain, {"eos_token": "<|endoftext|>", "bos_token": {"content": "<s>"},
                                 "add_bos_token": True})
    eos, bos = bpe.token_to_id("<|endoftext|>"), bpe.token_to_id("<s>")
    out = os.path.join(tmp, "plain.bin")
    done = run(a, b, "--out", out, "--tokenizer", plain)  # a folder works as well as its tokenizer.json
    assert done.returncode == 0, done.stderr
    ids, meta, mask = read(out)
    enc = lambda text: bpe.encode(text, add_special_tokens=False).ids
    assert ids == [bos] + enc("the cat sat") + [eos, bos] + enc("on the mat") + [eos], ids
    assert meta["eos_id"] == eos and meta["bos_id"] == bos and meta["documents"] == 2, meta
    assert mask is None and "mask" not in meta, "plain text needs no loss mask"
    print(f"ok  EOS {eos} ends and BOS {bos} starts each of 2 files: {len(ids)} tokens")

    # No add_bos_token and no post-processor adding BOS: EOS only; --eos-id wins over the config.
    eos_only = os.path.join(tmp, "eos_only")
    bpe = make_tokenizer(eos_only, {"eos_token": "<|endoftext|>", "bos_token": "<s>"})
    done = run(a, b, "--out", out, "--tokenizer", os.path.join(eos_only, "tokenizer.json"))
    assert done.returncode == 0, done.stderr
    ids, meta, _ = read(out)
    assert ids == enc("the cat sat") + [eos] + enc("on the mat") + [eos] and meta["bos_id"] is None, ids
    done = run(a, "--out", out, "--tokenizer", eos_only, "--eos-id", str(bos))
    assert done.returncode == 0, done.stderr
    assert read(out)[0] == enc("the cat sat") + [bos]
    print("ok  EOS only without add_bos_token; --eos-id overrides the config")

    # Bytes: no separator unless --eos-id; an id past 255 widens the vocabulary; JSONL
    # lines of {"text"} are one document each.
    lines = os.path.join(tmp, "docs.jsonl")
    with open(lines, "w") as f:
        f.write(json.dumps({"text": "ab"}) + "\n\n" + json.dumps({"text": "c"}) + "\n")
    done = run(a, lines, "--out", out, "--eos-id", "256")
    assert done.returncode == 0, done.stderr
    ids, meta, _ = read(out)
    assert ids == list(b"the cat sat") + [256, ord("a"), ord("b"), 256, ord("c"), 256], ids
    assert meta["vocab"] == 257 and meta["documents"] == 3, meta
    print("ok  bytes with --eos-id 256: 3 documents (a file and two JSONL lines), vocabulary 257")

    # Conversations: the chat template renders them; only the assistant turns (their
    # content and end-of-turn) have mask 1; the mask has one byte per token.
    chat = os.path.join(tmp, "chat")
    bpe = make_tokenizer(chat, {"eos_token": "<|im_end|>", "chat_template": TEMPLATE})
    talk = os.path.join(tmp, "talk.jsonl")
    conversation = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi there"},
                    {"role": "assistant", "content": "the cat sat"}, {"role": "user", "content": "what?"},
                    {"role": "assistant", "content": "on the mat"}]
    with open(talk, "w") as f:
        f.write(json.dumps({"messages": conversation}) + "\n" + json.dumps({"text": "the cat"}) + "\n")
    done = run(talk, "--out", out, "--tokenizer", chat)
    assert done.returncode == 0, done.stderr
    ids, meta, mask = read(out)
    assert mask is not None and len(mask) == len(ids) == meta["tokens"], (len(mask), len(ids))
    assert meta["mask"] == "plain.bin.mask" and meta["masked"] == mask.count(0), meta
    assert meta["mask_sha256"] == hashlib.sha256(mask).hexdigest(), meta
    assert set(mask) <= {0, 1}
    text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in conversation)
    first = bpe.encode(text, add_special_tokens=False).ids
    im_end = bpe.token_to_id("<|im_end|>")
    # The template ends with <|im_end|>\n, the EOS: no second EOS after the conversation;
    # the text document after it gets its EOS, and mask 1 throughout.
    assert ids == first + enc("the cat") + [im_end], ids
    trained = [t for t, m in zip(ids[:len(first)], mask[:len(first)]) if m]
    assert bpe.decode(trained, skip_special_tokens=False) == "the cat sat<|im_end|>\non the mat<|im_end|>\n", \
        bpe.decode(trained, skip_special_tokens=False)
    assert all(mask[len(first):]), "a text document is all targets"
    # Mask alignment: every masked run is a whole system/user turn or an assistant header.
    untrained = bpe.decode([t for t, m in zip(ids[:len(first)], mask[:len(first)]) if not m],
                           skip_special_tokens=False)
    assert untrained == ("<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nhi there<|im_end|>\n"
                         "<|im_start|>assistant\n<|im_start|>user\nwhat?<|im_end|>\n<|im_start|>assistant\n"), untrained
    print(f"ok  a conversation: {sum(mask[:len(first)])} of {len(first)} tokens are the assistant's, "
          "aligned with the ids")

    # Errors name the line and the fix.
    bad = os.path.join(tmp, "bad.jsonl")
    with open(bad, "w") as f:
        f.write(json.dumps({"messages": [{"role": "user"}]}) + "\n")
    done = run(bad, "--out", out, "--tokenizer", chat)
    assert done.returncode != 0 and f"{bad}:1: each message needs a string \"role\" and \"content\"" in done.stderr, \
        done.stderr
    done = run(talk, "--out", out, "--tokenizer", plain)
    assert done.returncode != 0 and "a conversation needs --tokenizer with a chat template" in done.stderr, done.stderr
    done = run(talk, "--out", out)
    assert done.returncode != 0 and "a conversation needs --tokenizer" in done.stderr, done.stderr
    # A rerun without conversations removes the stale mask.
    done = run(a, "--out", out, "--tokenizer", chat)
    assert done.returncode == 0 and not os.path.exists(out + ".mask"), done.stderr
    print("ok  bad conversations and missing templates are one clear error each")

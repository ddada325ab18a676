#!/usr/bin/env python3
"""tokenize_text.py - turns text files into a flat token file that megatrain-run --data reads.

    python3 frontends/python/tokenize_text.py INPUT... --out TOKENS.bin \\
        [--tokenizer tokenizer.json|DIR] [--dtype uint16|uint32] [--eos-id N] [--bos-id N]

Documents: each text file is one; a .jsonl file holds one per line, either
{"text": "..."} or a conversation {"messages": [{"role": ..., "content": ...}, ...]}.
Each document ends with the end-of-sequence token (EOS) and, where the
tokenizer uses one, starts with the beginning-of-sequence token (BOS): both
from tokenizer_config.json beside tokenizer.json ("eos_token", "bos_token",
"add_bos_token"), or --eos-id / --bos-id. A conversation is rendered with the
tokenizer's chat template (transformers' apply_chat_template) and only the
assistant turns are trained on: a loss mask TOKENS.bin.mask (one byte per
token, 1 where the token is a target of the loss) is written beside the tokens
when any document is a conversation, and named in the sidecar.

Byte-level by default: every byte of a document is one token (vocabulary 256,
no EOS unless --eos-id). With --tokenizer, a Hugging Face tokenizer.json (or a
folder holding one) is applied through the Python package `tokenizers`
(imported only then). Tokens are written little-endian as uint16 when the
vocabulary fits (<= 65536), else uint32 (or as --dtype says), with a sidecar
TOKENS.bin.json:

    {"dtype": "uint16", "byte_order": "little", "vocab": 256, "tokens": N,
     "source": [INPUT, ...], "tokenizer": "bytes" | "<tokenizer.json path>",
     "documents": D, "eos_id": E | null, "bos_id": B | null,
     ["mask": "TOKENS.bin.mask", "mask_sha256": "...", "masked": M,]
     "sha256": "<of the token file>"}

The byte-level path of plain text files needs only the Python standard library.
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


def replace_file(path, data):
    """Writes `data` to `path` through a temporary, so a failed run never leaves a short file."""
    with open(path + ".tmp", "wb") as f:
        f.write(data)
    os.replace(path + ".tmp", path)


def write_tokens(out, tokens, meta, mask=None):
    """Writes `tokens` (an array.array) little-endian to `out`, `mask` (a
    bytearray, one 0/1 byte per token, or None) to `out`.mask, and `meta` (plus
    dtype, byte_order, tokens, the mask's name and sha256) to `out`.json;
    returns the sidecar dict."""
    if sys.byteorder != "little":
        tokens = array.array(tokens.typecode, tokens)
        tokens.byteswap()  # the file is little-endian on every host
    data = tokens.tobytes()
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    replace_file(out, data)
    sidecar = {"dtype": "uint16" if tokens.itemsize == 2 else "uint32", "byte_order": "little",
               "tokens": len(tokens)}
    sidecar.update(meta)
    if mask is not None:
        assert len(mask) == len(tokens)
        replace_file(out + ".mask", bytes(mask))
        # Relative to the token file's folder, so the pair can be moved together.
        sidecar["mask"] = os.path.basename(out) + ".mask"
        sidecar["mask_sha256"] = hashlib.sha256(bytes(mask)).hexdigest()
        sidecar["masked"] = len(mask) - sum(mask)
    elif os.path.exists(out + ".mask"):
        os.remove(out + ".mask")  # a stale mask from an earlier run must not pair with these tokens
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


def tokenizer_files(path):
    """(tokenizer.json, its folder's tokenizer_config.json as a dict or {}) for a file or folder."""
    folder = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
    json_path = os.path.join(path, "tokenizer.json") if os.path.isdir(path) else path
    if not os.path.isfile(json_path):
        sys.exit(f"tokenize_text.py: --tokenizer {path}: no tokenizer.json there")
    config = {}
    config_path = os.path.join(folder, "tokenizer_config.json")
    if os.path.isfile(config_path):
        try:
            with open(config_path, encoding="utf-8") as f:
                config = json.load(f)
        except ValueError as error:
            sys.exit(f"tokenize_text.py: {config_path}: not valid JSON ({error})")
    return json_path, config


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


def token_text(value):
    """A special token as tokenizer_config.json gives it: a string or {"content": ...}."""
    if isinstance(value, dict):
        return value.get("content")
    return value if isinstance(value, str) else None


def special_ids(tokenizer, config, eos_id=None, bos_id=None):
    """(eos, bos): each an id or None. --eos-id/--bos-id win; else the config's
    eos_token, and its bos_token when add_bos_token is true or (unsaid) when the
    tokenizer's own post-processor puts it first."""
    def lookup(key):
        text = token_text(config.get(key))
        if text is None or tokenizer is None:
            return None
        found = tokenizer.token_to_id(text)
        if found is None:
            raise ValueError(f"tokenizer_config.json's {key} {text!r} is not in the tokenizer's vocabulary; "
                             f"pass --{key.split('_')[0]}-id N")
        return found
    eos = eos_id if eos_id is not None else lookup("eos_token")
    bos = bos_id
    if bos is None and tokenizer is not None:
        candidate = lookup("bos_token")
        if candidate is not None:
            uses = config.get("add_bos_token")
            if uses is None:
                ids = tokenizer.encode("", add_special_tokens=True).ids
                uses = bool(ids) and ids[0] == candidate
            bos = candidate if uses else None
    return eos, bos


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


def documents(paths):
    """Each document as ("text", pieces of text) or ("chat", messages, label):
    a text file whole, a .jsonl file line by line (blank lines skipped)."""
    for path in paths:
        if not path.endswith(".jsonl"):
            yield ("text", text_chunks(path))
            continue
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                label = f"{path}:{number}"
                try:
                    record = json.loads(line)
                except ValueError as error:
                    raise ValueError(f"{label}: not valid JSON ({error})")
                if isinstance(record, dict) and isinstance(record.get("text"), str):
                    yield ("text", [record["text"]])
                elif isinstance(record, dict) and isinstance(record.get("messages"), list):
                    for message in record["messages"]:
                        if not (isinstance(message, dict) and isinstance(message.get("role"), str)
                                and isinstance(message.get("content"), str)):
                            raise ValueError(f"{label}: each message needs a string \"role\" and \"content\", "
                                             f"got {json.dumps(message)[:80]}")
                    yield ("chat", record["messages"], label)
                else:
                    raise ValueError(f"{label}: expected {{\"text\": ...}} or {{\"messages\": [...]}}")


class ChatRenderer:
    """Renders conversations with transformers' apply_chat_template of the tokenizer's folder."""

    def __init__(self, folder, config):
        if not config.get("chat_template"):
            raise ValueError(f"conversations need a chat template, and {folder}/tokenizer_config.json has no "
                             "\"chat_template\"")
        try:
            from transformers import AutoTokenizer
        except ImportError:
            sys.exit("tokenize_text.py: conversations need the Python package 'transformers' "
                     "(pip install transformers)")
        self.tokenizer = AutoTokenizer.from_pretrained(folder)

    def render(self, messages, generation_prompt=False):
        return self.tokenizer.apply_chat_template(messages, tokenize=False,
                                                  add_generation_prompt=generation_prompt)

    def assistant_spans(self, messages, label):
        """The whole text and the [start, end) character spans of the assistant turns:
        from after the generation prompt to the end of the turn (its end-of-turn marks)."""
        text = self.render(messages)
        spans = []
        for i, message in enumerate(messages):
            if message["role"] != "assistant":
                continue
            before = self.render(messages[:i], generation_prompt=True)
            through = self.render(messages[:i + 1])
            if not (text.startswith(before) and text.startswith(through) and len(before) <= len(through)):
                raise ValueError(f"{label}: the chat template does not render the turns before message {i} as a "
                                 "prefix of the whole conversation, so its assistant tokens cannot be told apart")
            spans.append((len(before), len(through)))
        return text, spans


def encode(paths, tokenizer, dtype, eos, bos, chat=None):
    """(tokens, mask or None, document count). `tokenizer` None: bytes."""
    tokens = token_array(dtype)
    mask = bytearray()
    any_chat = False
    count = 0
    bos_text = tokenizer.id_to_token(bos) if tokenizer is not None and bos is not None else None
    eos_text = tokenizer.id_to_token(eos) if tokenizer is not None and eos is not None else None
    for document in documents(paths):
        count += 1
        if document[0] == "text":
            start = len(tokens)
            if bos is not None:
                tokens.append(bos)
            for piece in document[1]:
                if tokenizer is None:
                    tokens.extend(piece.encode("utf-8"))
                else:
                    tokens.extend(tokenizer.encode(piece, add_special_tokens=False).ids)
            if eos is not None:
                tokens.append(eos)
            mask.extend(b"\x01" * (len(tokens) - start))
            continue
        _, messages, label = document
        if tokenizer is None or chat is None:
            raise ValueError(f"{label}: a conversation needs --tokenizer with a chat template")
        any_chat = True
        text, spans = chat.assistant_spans(messages, label)
        encoding = tokenizer.encode(text, add_special_tokens=False)
        # The template may write BOS and EOS itself; add only what it leaves out.
        if bos is not None and not (bos_text and text.startswith(bos_text)):
            tokens.append(bos)
            mask.append(0)
        tokens.extend(encoding.ids)
        for begin, _ in encoding.offsets:
            mask.append(1 if any(a <= begin < b for a, b in spans) else 0)
        if eos is not None and not (eos_text and text.rstrip().endswith(eos_text)):
            tokens.append(eos)
            mask.append(0)
    return tokens, (mask if any_chat else None), count


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("inputs", nargs="+", metavar="INPUT",
                        help="text files (one document each) or .jsonl files (one document a line), in order")
    parser.add_argument("--out", required=True, help="token file to write")
    parser.add_argument("--tokenizer", help="a Hugging Face tokenizer.json or its folder (default: bytes)")
    parser.add_argument("--dtype", choices=["uint16", "uint32"],
                        help="token width (default: uint16 when the vocabulary fits)")
    parser.add_argument("--eos-id", type=int, help="the id ending every document (default: the tokenizer "
                        "config's eos_token; none for bytes)")
    parser.add_argument("--bos-id", type=int, help="the id starting every document (default: the config's "
                        "bos_token where the tokenizer adds it)")
    args = parser.parse_args()

    for path in args.inputs:
        if not os.path.isfile(path):
            sys.exit(f"tokenize_text.py: {path} is not a file")
    for flag, value in (("--eos-id", args.eos_id), ("--bos-id", args.bos_id)):
        if value is not None and value < 0:
            sys.exit(f"tokenize_text.py: {flag} must not be negative, got {value}")
    try:
        if args.tokenizer:
            json_path, config = tokenizer_files(args.tokenizer)
            tokenizer = load_tokenizer(json_path)
            vocab = tokenizer.get_vocab_size(with_added_tokens=True)
            eos, bos = special_ids(tokenizer, config, args.eos_id, args.bos_id)
            chat = None
            if any(p.endswith(".jsonl") for p in args.inputs) and config.get("chat_template"):
                chat = ChatRenderer(os.path.dirname(os.path.abspath(json_path)), config)
        else:
            json_path, tokenizer, chat = None, None, None
            vocab = BYTE_VOCAB
            eos, bos = args.eos_id, args.bos_id
        for name, value in (("--eos-id", eos), ("--bos-id", bos)):
            if value is not None and value >= vocab:
                if tokenizer is not None:
                    raise ValueError(f"{name} {value} is outside the tokenizer's vocabulary of {vocab}")
                vocab = value + 1  # bytes: a separator id past the byte values widens the vocabulary
        dtype = choose_dtype(vocab, args.dtype)
        if tokenizer is None and eos is None and bos is None and not any(p.endswith(".jsonl") for p in args.inputs):
            tokens, mask, count = byte_tokens(args.inputs, dtype), None, len(args.inputs)
        else:
            tokens, mask, count = encode(args.inputs, tokenizer, dtype, eos, bos, chat)
    except (ValueError, UnicodeDecodeError) as error:
        sys.exit(f"tokenize_text.py: {error}")
    meta = write_tokens(args.out, tokens, {
        "vocab": vocab,
        "source": args.inputs,
        "tokenizer": json_path or "bytes",
        "documents": count,
        "eos_id": eos,
        "bos_id": bos,
    }, mask)
    masked = f", loss mask {args.out}.mask ({meta['masked']} of them masked)" if mask is not None else ""
    print(f"wrote {args.out} ({meta['tokens']} {dtype} tokens, vocabulary {vocab}, {count} documents{masked}) "
          f"and {args.out}.json")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""make_llm_default_exports.py - tiny LLMs exported as a user would, with PyTorch references.

    python3 tests/models/make_llm_default_exports.py [--out tests/models/llm_default]

For each family (Llama, Qwen2, Qwen3, Mistral, Phi-3, Gemma, GPT-2, GPT-NeoX) it builds a
tiny model from frontends/python/export_hf.py's configs (hidden 64, 2 layers, vocabulary
128, fixed seed), in fp32 and in bf16 (and Llama in fp16), and exports the Hugging Face model itself with
`torch.onnx.export(model, (input_ids,), path, dynamo=True)`: the exporter's defaults
(optimizer on, weights as external data `<name>.onnx.data`, the logits output named after
its node), and once more with `optimize=False`. No megatrain metadata is added: these are
the files users have. Writes, in --out:
  <family>_<dtype>_opt.onnx(.data), <family>_<dtype>_noopt.onnx(.data)
  <family>_<dtype>_losses.npy   PyTorch's next-token loss before each of 10 AdamW steps on
                                the fixed batch, in fp32, from the exported weights (for
                                bf16, the bf16 values widened to fp32), float64
  input_ids.npy                 the fixed batch, int64 [2, 16]
  manifest.json                 versions, configs, hyper-parameters, graph outputs, ops
The one-dimensional parameters (norm scales, biases) are drawn around their initial values
(+ normal(0, 0.1)), as in a trained checkpoint: with the initial ones and zeros, the
exporter's optimizer merges the equal norm scales into one initializer and drops the zero
biases, and those exports cannot train as PyTorch does (docs/frontends.md, "Exported
LLMs"). Node metadata (source locations, stack traces) is removed to keep the files small;
nothing else is changed. Needs torch, transformers, onnx, onnxscript.
"""
import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "frontends", "python"))
import export_hf  # noqa: E402

BATCH, SEQ, VOCAB = 2, 16, 128
ADAMW = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
STEPS = 10
SIZE = ["--hidden", "64", "--layers", "2", "--heads", "4", "--vocab", str(VOCAB)]
FAMILIES = {
    "llama": ["--family", "llama", "--kv-heads", "2", "--intermediate", "128"],
    "qwen2": ["--family", "qwen2", "--kv-heads", "2", "--intermediate", "128"],
    "qwen3": ["--family", "qwen3", "--kv-heads", "2", "--intermediate", "128"],
    "mistral": ["--family", "mistral", "--kv-heads", "1", "--intermediate", "128"],
    "phi3": ["--family", "phi3", "--kv-heads", "2", "--intermediate", "128"],
    "gemma": ["--family", "gemma", "--kv-heads", "1", "--intermediate", "128"],
    "gpt2": ["--family", "gpt2", "--intermediate", "128"],
    "gpt_neox": ["--family", "gpt_neox", "--intermediate", "128"],
}
DTYPES = ["float32", "bfloat16"]
# float16 too, for one family: the same path as bf16 (16-bit initializers, widened).
EXTRA_DTYPES = {"llama": ["float16"]}


def build(flags, dtype):
    """The model in `dtype`, and an fp32 copy holding exactly its values."""
    import torch
    args = export_hf.parse_args(flags + SIZE + ["--batch", str(BATCH), "--seq", str(SEQ),
                                                "-o", "unused.onnx"])
    model = export_hf.load_model(args)  # fp32, seeded
    gen = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for _, p in model.named_parameters():
            if p.dim() == 1:
                p.add_(0.1 * torch.randn(p.shape, generator=gen))
    model = model.to(getattr(torch, dtype))
    reference = export_hf.load_model(args)
    reference.load_state_dict({k: v.float() for k, v in model.state_dict().items()})
    return model, reference


def losses_of(model, ids):
    import torch
    x = torch.from_numpy(ids)
    opt = torch.optim.AdamW(model.parameters(), **ADAMW)
    out = []
    for _ in range(STEPS):
        logits = model(input_ids=x, use_cache=False).logits
        loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, VOCAB).float(),
                                                 x[:, 1:].reshape(-1))
        out.append(loss.item())
        opt.zero_grad()
        loss.backward()
        opt.step()
    return np.array(out, dtype=np.float64)


def export(model, ids, path, optimize):
    import onnx
    import torch
    model.config.use_cache = False
    torch.onnx.export(model, (torch.from_numpy(ids),), path, dynamo=True, optimize=optimize)
    m = onnx.load(path)  # with its external data
    for node in m.graph.node:
        del node.metadata_props[:]
        node.doc_string = ""
    del m.graph.value_info[:]
    data = os.path.basename(path) + ".data"
    os.remove(path + ".data")
    onnx.save_model(m, path, save_as_external_data=True, all_tensors_to_one_file=True,
                    location=data, size_threshold=1024)
    return m


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=os.path.join(HERE, "llm_default"))
    p.add_argument("--only", nargs="*", default=None, help="only these families")
    p.add_argument("--dtypes", nargs="*", default=None,
                   help="only these dtypes (default float32 and bfloat16, and float16 for llama)")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    import onnx
    import onnxscript
    import torch
    import transformers
    ids = np.random.RandomState(3).randint(0, VOCAB, size=(BATCH, SEQ)).astype(np.int64)
    np.save(os.path.join(args.out, "input_ids.npy"), ids)
    manifest_path = os.path.join(args.out, "manifest.json")
    manifest = {"models": {}}
    if os.path.exists(manifest_path):
        with open(manifest_path) as f:
            manifest = json.load(f)
    manifest.update({"versions": {"torch": torch.__version__,
                                  "transformers": transformers.__version__,
                                  "onnx": onnx.__version__, "onnxscript": onnxscript.__version__},
                     "generator": "tests/models/make_llm_default_exports.py",
                     "batch": BATCH, "seq": SEQ, "vocab": VOCAB, "adamw": ADAMW, "steps": STEPS,
                     "size_flags": SIZE})
    for fam, flags in FAMILIES.items():
        if args.only and fam not in args.only:
            continue
        for dtype in args.dtypes or DTYPES + EXTRA_DTYPES.get(fam, []):
            model, reference = build(flags, dtype)
            losses = losses_of(reference, ids)
            name = f"{fam}_{dtype}"
            np.save(os.path.join(args.out, f"{name}_losses.npy"), losses)
            entry = {"flags": flags, "losses": losses.tolist()}
            for tag, optimize in (("opt", True), ("noopt", False)):
                m = export(model, ids, os.path.join(args.out, f"{name}_{tag}.onnx"), optimize)
                entry[f"{tag}_outputs"] = [o.name for o in m.graph.output]
                entry[f"{tag}_ops"] = sorted({n.op_type for n in m.graph.node})
            manifest["models"][name] = entry
            print(f"{name}: losses {losses[0]:.4f} -> {losses[-1]:.4f}", flush=True)
    with open(manifest_path, "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()

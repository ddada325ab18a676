#!/usr/bin/env python3
"""make_llm_models.py - exports the tiny LLMs the import tests use, with PyTorch references.

    python3 tests/models/make_llm_models.py --out tests/models/llm

For each family (Llama with grouped-query attention, Qwen2 with q/k/v bias, Mistral, GPT-2
with tied embeddings) it builds a tiny randomly initialized model with a fixed seed and
writes:
  <family>_opt.onnx, <family>_noopt.onnx   exports with the exporter's optimizer on and off
  <family>_logits.npy                      PyTorch logits on the fixed batch, float32
  <family>_losses.npy                      PyTorch next-token loss before each of 10 AdamW
                                           steps on the fixed batch (float64)
and once:
  input_ids.npy                            the fixed batch, int64 [2, 32]
  manifest.json                            versions, configs, hyper-parameters, and the
                                           onnxruntime-vs-PyTorch logits error of each export
Needs torch, transformers, onnx, onnxscript, onnxruntime.
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
EXPORT = os.path.join(HERE, "..", "..", "frontends", "python", "export_hf.py")
BATCH, SEQ, VOCAB = 2, 32, 256
ADAMW = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
STEPS = 10
FAMILIES = {
    "llama": ["--family", "llama", "--hidden", "64", "--layers", "2", "--heads", "4", "--kv-heads", "2",
              "--intermediate", "176"],
    "qwen2": ["--family", "qwen2", "--hidden", "64", "--layers", "2", "--heads", "4", "--kv-heads", "2",
              "--intermediate", "176"],
    "mistral": ["--family", "mistral", "--hidden", "64", "--layers", "2", "--heads", "4", "--kv-heads", "1",
                "--intermediate", "176"],
    "gpt2": ["--family", "gpt2", "--hidden", "64", "--layers", "2", "--heads", "4"],
}


def torch_model(flags):
    sys.path.insert(0, os.path.dirname(EXPORT))
    import export_hf
    args = export_hf.parse_args(flags + ["--vocab", str(VOCAB), "--batch", str(BATCH), "--seq", str(SEQ),
                                         "-o", "unused.onnx"])
    return export_hf.load_model(args)


def references(flags, ids):
    import torch
    model = torch_model(flags)
    x = torch.from_numpy(ids)
    with torch.no_grad():
        logits = model(input_ids=x, use_cache=False).logits.numpy().astype(np.float32)
    opt = torch.optim.AdamW(model.parameters(), **ADAMW)
    losses = []
    for _ in range(STEPS):
        out = model(input_ids=x, use_cache=False).logits
        loss = torch.nn.functional.cross_entropy(out[:, :-1].reshape(-1, VOCAB), x[:, 1:].reshape(-1))
        losses.append(loss.item())
        opt.zero_grad()
        loss.backward()
        opt.step()
    return logits, np.array(losses, dtype=np.float64)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=os.path.join(HERE, "llm"))
    p.add_argument("--only", nargs="*", default=None)
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    import onnxruntime as ort
    import torch
    import transformers
    import onnx
    rng = np.random.RandomState(1)
    ids = rng.randint(0, VOCAB, size=(BATCH, SEQ)).astype(np.int64)
    np.save(os.path.join(args.out, "input_ids.npy"), ids)
    manifest = {"versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                             "onnx": onnx.__version__, "onnxruntime": ort.__version__},
                "batch": BATCH, "seq": SEQ, "vocab": VOCAB, "adamw": ADAMW, "steps": STEPS, "models": {}}
    for fam, flags in FAMILIES.items():
        if args.only and fam not in args.only:
            continue
        logits, losses = references(flags, ids)
        np.save(os.path.join(args.out, f"{fam}_logits.npy"), logits)
        np.save(os.path.join(args.out, f"{fam}_losses.npy"), losses)
        entry = {"flags": flags, "losses": losses.tolist()}
        for tag, opt_flag in (("opt", "--optimize"), ("noopt", "--no-optimize")):
            path = os.path.join(args.out, f"{fam}_{tag}.onnx")
            subprocess.run([sys.executable, EXPORT, *flags, "--vocab", str(VOCAB), "--batch", str(BATCH),
                            "--seq", str(SEQ), opt_flag, "-o", path], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
            got = sess.run(["logits"], {"input_ids": ids})[0]
            err = float(np.abs(got - logits).max() / np.abs(logits).max())
            entry[f"{tag}_ort_rel_err"] = err
            m = onnx.load(path, load_external_data=False)
            entry[f"{tag}_ops"] = sorted({n.op_type for n in m.graph.node})
            print(f"{fam} {tag}: onnxruntime vs torch rel err {err:.2e}", flush=True)
        manifest["models"][fam] = entry
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()

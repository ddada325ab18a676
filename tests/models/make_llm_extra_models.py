#!/usr/bin/env python3
"""make_llm_extra_models.py - what the LLM import tests need beyond make_llm_models.py.

    python3 tests/models/make_llm_extra_models.py --out tests/models/llm

1. llama_opset23_opt.onnx: the tiny Llama of make_llm_models.py exported at opset 23,
   where attention is one Attention node and RMSNorm one RMSNormalization node. Same
   weights, so llama_logits.npy and the Llama losses are its references too.

2. PyTorch losses of the tiny LLMs as their optimized exports train them.

torch.onnx.export(optimize=True) changes which parameters a graph has, so training the
optimized export cannot follow PyTorch's own training exactly (make_llm_models.py's
<family>_losses.npy), however exact the compiler is:
  - initializers with equal values are deduplicated: the RMSNorm/LayerNorm weights (all
    ones) become one initializer, and so do equal zero biases, so they train as one tied
    parameter;
  - GPT-2's Conv1D biases (zeros) disappear when the optimizer folds `x @ W + 0` into a
    Gemm without C, so they never train;
  - GPT-2's position embedding is gathered at constant positions and folded into the
    initializer `embedding_1` (wpe[:32]); the importer trains it, as a table added to an
    embedding lookup (docs/frontends.md, "Trainable rule"), so the rows the positions
    read train as in PyTorch.
This script trains the same PyTorch models with those changes made explicitly (equal
parameters tied; GPT-2's Conv1D biases frozen) and writes, per family,
  <family>_opt_losses_as_exported.npy   loss before each of the 10 AdamW steps (float64)
so tests/e2e/llm_import_test.cpp can check the optimized exports exactly, and the
PyTorch references only as far as the export allows. It checks that each modeled change
is really in the committed export before relying on it.
Needs torch, transformers, onnx; reuses make_llm_models.py's models and hyper-parameters.
"""
import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_llm_models as M  # noqa: E402


def tie_equal_parameters(model):
    """Ties parameters with equal shape and bytes, as the exporter's deduplication does."""
    groups = {}
    for name, p in model.named_parameters():
        groups.setdefault((tuple(p.shape), p.detach().numpy().tobytes()), []).append(name)
    params = dict(model.named_parameters())
    for names in groups.values():
        for name in names[1:]:
            owner, attr = name.rsplit(".", 1)
            setattr(model.get_submodule(owner), attr, params[names[0]])


def freeze(module, attr):
    import torch
    value = getattr(module, attr)
    setattr(module, attr, torch.nn.Parameter(value.detach().clone(), requires_grad=False))


def check_gpt2_export(path):
    """The modeled changes must be what the optimized GPT-2 export holds."""
    import onnx
    m = onnx.load(path, load_external_data=False)
    names = {i.name for i in m.graph.initializer}
    conv_biases = [n for n in names if n.endswith(".bias") and (".attn.c_" in n or ".mlp.c_" in n)]
    assert not conv_biases, f"the export kept Conv1D biases {conv_biases}; the model here is wrong"
    assert "transformer.wpe.weight" not in names, "the export kept wpe; the model here is wrong"
    assert "embedding_1" in names, "the export has no folded position embedding"
    gemms = [n for n in m.graph.node if n.op_type == "Gemm"]
    assert gemms and all(len(n.input) == 2 for n in gemms), "a Gemm has a bias input"


def as_exported_losses(family, ids, out_dir):
    import torch
    model = M.torch_model(M.FAMILIES[family])
    tie_equal_parameters(model)
    if family == "gpt2":
        check_gpt2_export(os.path.join(out_dir, "gpt2_opt.onnx"))
        for module in model.modules():
            if type(module).__name__ == "Conv1D":
                freeze(module, "bias")
    x = torch.from_numpy(ids)
    trainable = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(trainable, **M.ADAMW)
    losses = []
    for _ in range(M.STEPS):
        logits = model(input_ids=x, use_cache=False).logits
        loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, M.VOCAB),
                                                 x[:, 1:].reshape(-1))
        losses.append(loss.item())
        opt.zero_grad()
        loss.backward()
        opt.step()
    return np.array(losses, dtype=np.float64)


def export_opset23(out_dir):
    import subprocess
    path = os.path.join(out_dir, "llama_opset23_opt.onnx")
    subprocess.run([sys.executable, M.EXPORT, *M.FAMILIES["llama"], "--vocab", str(M.VOCAB),
                    "--batch", str(M.BATCH), "--seq", str(M.SEQ), "--opset", "23", "--optimize",
                    "-o", path], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    import onnx
    ops = {n.op_type for n in onnx.load(path, load_external_data=False).graph.node}
    assert {"Attention", "RMSNormalization"} <= ops, f"opset 23 export without them: {ops}"
    print(f"wrote {path}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=os.path.join(HERE, "llm"))
    p.add_argument("--only", nargs="*", default=None,
                   help="write only these families' losses (and not the opset-23 export)")
    args = p.parse_args()
    if not args.only:
        export_opset23(args.out)
    ids = np.load(os.path.join(args.out, "input_ids.npy"))
    for family in M.FAMILIES:
        if args.only and family not in args.only:
            continue
        losses = as_exported_losses(family, ids, args.out)
        np.save(os.path.join(args.out, f"{family}_opt_losses_as_exported.npy"), losses)
        ref = np.load(os.path.join(args.out, f"{family}_losses.npy"))
        print(f"{family}: as exported vs PyTorch, max rel {np.max(np.abs(losses - ref) / np.abs(ref)):.2e}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""export_hf.py - exports a Hugging Face causal LM to ONNX the way megatrain-compile expects.

    # a local pretrained model (a directory with config.json and weights)
    python3 frontends/python/export_hf.py --model path/to/model --batch 8 --seq 2048 -o model.onnx
    # a config, randomly initialized (pre-training from scratch)
    python3 frontends/python/export_hf.py --family llama --hidden 2048 --layers 24 --heads 16 \\
        --intermediate 5632 --vocab 32000 --batch 8 --seq 2048 -o llama.onnx
    # the graph only: weights stay absent (external data the file refers to but does not hold)
    python3 frontends/python/export_hf.py --family llama ... --graph-only -o llama.onnx

What it does, and why:
- Fixed batch and sequence (the compiler binds every shape statically anyway).
- `use_cache=False`, logits only: the graph computes logits only, output `logits`,
  input `input_ids` (int64 [batch, seq]).
- Parameter names are the model's own (`model.layers.0.self_attn.q_proj.weight`), and the
  list of trainable parameters goes into the model's metadata (`megatrain.parameters`,
  comma-separated) so the compiler can tell parameters from buffers such as
  `rotary_emb.inv_freq`. A tied weight is one initializer, listed under the name it has.
- `--optimize/--no-optimize` picks the exporter's graph optimization. Off by default: the
  optimizer ties initializers that happen to be equal (norm weights of ones), drops zero
  biases and folds gathered position embeddings into constants, so those would not train
  as in PyTorch (docs/frontends.md, "Exported LLMs"). Off keeps every parameter under its
  name; the mask and position subgraphs it also keeps are folded by the compiler.
- `--family` builds Llama, Qwen2, Qwen3 (q/k norms), Mistral, Phi-3 (fused qkv and
  gate_up), Gemma (a (1 + w) RMSNorm scale, scaled embeddings, tied head), GPT-2 and
  GPT-NeoX (parallel residual, partial rotary) from the size flags; `--model` any local
  causal LM the dynamo exporter handles.
- `--dtype bfloat16|float16` exports 16-bit initializers, as a model loaded in bf16 does;
  the compiler widens them to fp32 masters.
- External data above 1 GiB of weights (`--external-data auto|always|never`).
- `--graph-only` builds the model on the meta device, so a 70B graph exports in seconds with
  no memory: initializers are written as external-data references to `OUT.data`, which is
  not written. Good for compiling and planning; to train, give megatrain-run the weights
  from elsewhere: `--weights MODEL_DIR` (the checkpoint's safetensors) or `--init normal:STD`.

Needs torch, transformers, onnx (and onnxscript for the dynamo exporter).
"""
import argparse
import json
import os
import sys

GENERATOR = "megatrain export_hf.py"
GENERATOR_VERSION = "1"
ONE_GIB = 1 << 30
# Families --family builds from the size flags (make_config).
FAMILIES = ["llama", "qwen2", "qwen3", "mistral", "phi3", "gemma", "gpt2", "gpt_neox"]


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", help="a local Hugging Face model directory")
    src.add_argument("--family", choices=FAMILIES,
                     help="build a randomly initialized model of this family from the size flags")
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=None, help="grouped-query attention (default: --heads)")
    p.add_argument("--intermediate", type=int, default=None, help="MLP width (default 4 x hidden for gpt2, else 11/4 x hidden)")
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--max-positions", type=int, default=None)
    p.add_argument("--tie-embeddings", action="store_true",
                   help="tie lm_head to the token embedding (gpt2 and gemma always tie)")
    p.add_argument("--head-dim", type=int, default=None,
                   help="attention head width (qwen3, gemma; default hidden / heads)")
    p.add_argument("--rotary-pct", type=float, default=0.25,
                   help="gpt_neox: the fraction of each head that is rotated (partial rotary)")
    p.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default="float32",
                   help="the weights' dtype in the export (a model loaded in bf16 exports bf16 "
                        "initializers; megatrain-compile trains them from fp32 masters)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--seq", type=int, required=True)
    p.add_argument("--optimize", action=argparse.BooleanOptionalAction, default=False)
    p.add_argument("--opset", type=int, default=18)
    p.add_argument("--external-data", choices=["auto", "always", "never"], default="auto")
    p.add_argument("--graph-only", action="store_true")
    p.add_argument("-o", "--out", required=True)
    return p.parse_args(argv)


def make_config(args):
    import transformers as tf
    kv = args.kv_heads or args.heads
    if args.family == "gpt2":
        return tf.GPT2Config(vocab_size=args.vocab, n_embd=args.hidden, n_layer=args.layers,
                             n_head=args.heads, n_inner=args.intermediate,
                             n_positions=args.max_positions or max(args.seq, 64),
                             resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                             tie_word_embeddings=True, use_cache=False)
    inter = args.intermediate or (args.hidden * 11) // 4
    common = dict(vocab_size=args.vocab, hidden_size=args.hidden, num_hidden_layers=args.layers,
                  num_attention_heads=args.heads, num_key_value_heads=kv,
                  intermediate_size=inter, max_position_embeddings=args.max_positions or max(args.seq, 64),
                  tie_word_embeddings=args.tie_embeddings, use_cache=False, attention_dropout=0.0)
    # No padding row (nn.Embedding's padding_idx gets no gradient, which an
    # exported graph does not know) and no special ids outside a tiny vocabulary.
    ids = dict(pad_token_id=None, bos_token_id=None, eos_token_id=None)
    head_dim = args.head_dim or args.hidden // args.heads
    if args.family == "gpt_neox":
        return tf.GPTNeoXConfig(vocab_size=args.vocab, hidden_size=args.hidden,
                                num_hidden_layers=args.layers, num_attention_heads=args.heads,
                                intermediate_size=args.intermediate or 4 * args.hidden,
                                max_position_embeddings=common["max_position_embeddings"],
                                rotary_pct=args.rotary_pct, use_parallel_residual=True,
                                hidden_dropout=0.0, attention_dropout=0.0,
                                tie_word_embeddings=args.tie_embeddings, use_cache=False, **ids)
    if args.family == "llama":
        return tf.LlamaConfig(**common)
    if args.family == "qwen2":
        return tf.Qwen2Config(**common)
    if args.family == "qwen3":
        return tf.Qwen3Config(head_dim=head_dim, **common, **ids)
    if args.family == "phi3":
        return tf.Phi3Config(resid_pdrop=0.0, embd_pdrop=0.0, **common, **ids)
    if args.family == "gemma":
        common["tie_word_embeddings"] = True
        return tf.GemmaConfig(head_dim=head_dim, **common, **ids)
    return tf.MistralConfig(sliding_window=None, **common)


def load_model(args):
    """The model in fp32, or in --dtype (rounded from the fp32 initialization
    when built from a config, so the same seed gives the same values)."""
    import torch
    model = load_model_fp32(args)
    if getattr(args, "dtype", "float32") != "float32":
        model = model.to(getattr(torch, args.dtype))
    return model


def load_model_fp32(args):
    import torch
    import transformers as tf
    if args.model:
        if args.graph_only:
            config = tf.AutoConfig.from_pretrained(args.model)
            with torch.device("meta"):
                model = tf.AutoModelForCausalLM.from_config(config, torch_dtype=torch.float32)
        else:
            model = tf.AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=torch.float32)
    else:
        config = make_config(args)
        torch.manual_seed(args.seed)
        if args.graph_only:
            with torch.device("meta"):
                model = tf.AutoModelForCausalLM.from_config(config, torch_dtype=torch.float32)
        else:
            model = tf.AutoModelForCausalLM.from_config(config, torch_dtype=torch.float32)
    model.config.use_cache = False
    model.eval()  # no dropout: training math is the compiler's, not torch's mode flags
    return model


class LogitsOnly:
    """Wraps the model so the graph's only output is the logits tensor."""

    @staticmethod
    def wrap(model):
        import torch

        class Wrapped(torch.nn.Module):
            def __init__(self, inner):
                super().__init__()
                self.inner = inner

            def forward(self, input_ids):
                return self.inner(input_ids=input_ids, use_cache=False).logits

        return Wrapped(model)


def strip_prefix(name, prefix="inner."):
    return name[len(prefix):] if name.startswith(prefix) else name


def export(args):
    import numpy as np
    import onnx
    import torch

    model = load_model(args)
    # Every name of every parameter: a tied weight is one initializer, named after
    # whichever of its names the exporter picked (GPT-2's wte as lm_head.weight).
    params = [n for n, _ in model.named_parameters(remove_duplicate=False)]
    n_elems = sum(p.numel() for p in model.parameters())
    wrapped = LogitsOnly.wrap(model)
    device = "meta" if args.graph_only else "cpu"
    ids = torch.zeros((args.batch, args.seq), dtype=torch.int64, device=device)
    ext = args.external_data == "always" or (args.external_data == "auto" and n_elems * 4 > ONE_GIB)
    tmp = args.out + ".export-tmp.onnx"
    program = torch.onnx.export(wrapped, (ids,), dynamo=True, optimize=args.optimize,
                                opset_version=args.opset, input_names=["input_ids"],
                                output_names=["logits"])
    if args.graph_only:
        program.save(tmp, include_initializers=False, keep_initializers_as_inputs=True)
    else:
        program.save(tmp, external_data=ext)

    m = onnx.load(tmp, load_external_data=False)
    rename = {}
    for init in m.graph.initializer:
        rename[init.name] = strip_prefix(init.name)
    if args.graph_only:
        external_refs(m, os.path.basename(args.out) + ".data", real_buffers(args, model))
        for init in m.graph.initializer:
            rename[init.name] = strip_prefix(init.name)
    apply_renames(m, rename)
    # Parameters as the compiler sees them: the initializer names left after renaming.
    init_names = {i.name for i in m.graph.initializer}
    listed = [n for n in params if n in init_names]
    meta = {
        "megatrain.generator": f"{GENERATOR} {GENERATOR_VERSION}",
        "megatrain.parameters": ",".join(listed),
        "megatrain.versions": json.dumps({"torch": torch.__version__, "onnx": onnx.__version__,
                                          "transformers": __import__("transformers").__version__}),
        "megatrain.shape": f"input_ids={args.batch}x{args.seq}",
    }
    del m.metadata_props[:]
    for k, v in meta.items():
        m.metadata_props.add(key=k, value=v)
    m.producer_name = GENERATOR
    m.producer_version = GENERATOR_VERSION
    if ext and not args.graph_only:
        # Bring the weights back in, then save them beside the output as external data.
        onnx.load_external_data_for_model(m, os.path.dirname(os.path.abspath(tmp)))
        onnx.save_model(m, args.out, save_as_external_data=True, all_tensors_to_one_file=True,
                        location=os.path.basename(args.out) + ".data", size_threshold=1024)
    else:
        onnx.save_model(m, args.out)
    cleanup(tmp)
    print(f"wrote {args.out}: {len(listed)} parameters, {n_elems:,} elements"
          f"{' (graph only)' if args.graph_only else ''}")


def real_buffers(args, model):
    """The values of the model's buffers (rotary inv_freq, ...), which the compiler folds and
    so needs even when the weights are absent. A meta-device model has none, so they come
    from a one-layer copy of the model built for real: buffers depend on the config, not on
    the depth (a layer's buffer is taken from layer 0)."""
    import copy
    import re
    import torch
    import transformers as tf
    names = [n for n, _ in model.named_buffers()]
    if not names:
        return {}
    config = copy.deepcopy(model.config)
    for key in ("num_hidden_layers", "n_layer"):
        if hasattr(config, key):
            setattr(config, key, 1)
    small = tf.AutoModelForCausalLM.from_config(config, torch_dtype=torch.float32)
    have = dict(small.named_buffers())
    out = {}
    for n in names:
        key = re.sub(r"\b(layers|h)\.\d+\.", r"\1.0.", n)
        if key in have:
            out[n] = have[key].detach().cpu().numpy()
    return out


def external_refs(m, location, inline):
    """Turns initializer graph inputs into external-data initializers at computed offsets,
    except the buffers in `inline` (name -> array), which are written with their data."""
    import onnx
    from onnx import numpy_helper
    inputs = [i for i in m.graph.input if i.name != "input_ids"]
    offset = 0
    keep = [i for i in m.graph.input if i.name == "input_ids"]
    for vi in inputs:
        value = inline.get(strip_prefix(vi.name))
        if value is not None:
            m.graph.initializer.append(numpy_helper.from_array(value, vi.name))
            continue
        tt = vi.type.tensor_type
        dims = [d.dim_value for d in tt.shape.dim]
        elem = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
        length = int(elem.itemsize)
        for d in dims:
            length *= d
        t = m.graph.initializer.add()
        t.name = vi.name
        t.data_type = tt.elem_type
        t.dims.extend(dims)
        t.data_location = onnx.TensorProto.EXTERNAL
        for k, v in (("location", location), ("offset", str(offset)), ("length", str(length))):
            e = t.external_data.add()
            e.key, e.value = k, v
        offset += (length + 63) // 64 * 64
    del m.graph.input[:]
    m.graph.input.extend(keep)


def apply_renames(m, rename):
    rename = {k: v for k, v in rename.items() if k != v}
    if not rename:
        return
    for init in m.graph.initializer:
        init.name = rename.get(init.name, init.name)
    for vi in list(m.graph.input) + list(m.graph.value_info):
        vi.name = rename.get(vi.name, vi.name)
    for node in m.graph.node:
        for i, n in enumerate(node.input):
            if n in rename:
                node.input[i] = rename[n]


def cleanup(tmp):
    for f in (tmp, tmp + ".data"):
        if os.path.exists(f):
            os.remove(f)


if __name__ == "__main__":
    export(parse_args(sys.argv[1:]))

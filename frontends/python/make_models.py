#!/usr/bin/env python3
"""make_models.py - writes megatrain's demo ONNX models with onnx.helper.

    python3 frontends/python/make_models.py [--out-dir frontends/models]

writes
  mlp.onnx               an MLP classifier with its loss:
                           inputs  x [batch, 16] float, labels [batch] int64
                           outputs logits [batch, 10], loss [] (SoftmaxCrossEntropyLoss, mean)
  tiny_transformer.onnx  a one-layer decoder-only byte-level language model:
                           input   input_ids [batch, 64] int64 (bytes, vocab 256)
                           output  logits [batch, 64, 256]

Both use opset 17 (IR version 8). The sequence length of the transformer is
fixed at 64: the learned position embedding [64, 64] and the causal mask
[64, 64] are added to [batch, 64, ...] tensors. Only `batch` is symbolic; the
Reshape shape constants use 0 (copy the dim) so they do not depend on it.

Weights come from numpy's legacy RandomState with a fixed seed, whose stream
numpy keeps stable, so the files are reproducible. The generator version is
stored in producer_version and in the metadata key `megatrain.generator`; the
comma-separated parameter names are under `megatrain.parameters`.

Needs: numpy, onnx (pip install onnx).
"""
import argparse
import math
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

GENERATOR = "megatrain make_models.py"
GENERATOR_VERSION = "1"
OPSET = 17
IR_VERSION = 8


class GraphBuilder:
    """Collects nodes and initializers; every node gets a readable name."""

    def __init__(self, seed):
        self.rng = np.random.RandomState(seed)
        self.nodes = []
        self.initializers = []

    def param(self, name, array):
        self.initializers.append(numpy_helper.from_array(np.asarray(array, np.float32), name))
        return name

    def normal(self, name, shape, std):
        return self.param(name, self.rng.normal(0.0, std, size=shape))

    def zeros(self, name, shape):
        return self.param(name, np.zeros(shape, np.float32))

    def ones(self, name, shape):
        return self.param(name, np.ones(shape, np.float32))

    def constant(self, name, array):
        """A Constant node: imported as mt.constant (never trained)."""
        tensor = numpy_helper.from_array(np.asarray(array), name)
        self.nodes.append(helper.make_node("Constant", [], [name], name=name, value=tensor))
        return name

    def node(self, op, inputs, name, n_outputs=1, **attrs):
        outputs = [name] if n_outputs == 1 else [f"{name}.{i}" for i in range(n_outputs)]
        self.nodes.append(helper.make_node(op, inputs, outputs, name=name, **attrs))
        return outputs[0]

    def parameter_names(self):
        return [t.name for t in self.initializers]


def finish(builder, name, inputs, outputs, doc):
    graph = helper.make_graph(builder.nodes, name, inputs, outputs, builder.initializers)
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name=GENERATOR,
        producer_version=GENERATOR_VERSION,
        doc_string=doc,
    )
    model.ir_version = IR_VERSION
    helper.set_model_props(model, {
        "megatrain.generator": f"{GENERATOR} {GENERATOR_VERSION}",
        "megatrain.parameters": ",".join(builder.parameter_names()),
    })
    onnx.checker.check_model(model, full_check=True)
    return model


def make_mlp():
    """16 -> 32 (relu) -> 32 (tanh) -> 10, weights [out, in] as torch exports them."""
    b = GraphBuilder(seed=1234)
    dims = [(16, 32), (32, 32), (32, 10)]
    h = "x"
    for i, (fan_in, fan_out) in enumerate(dims, start=1):
        # LeCun normal, so activations keep their scale through the layers.
        w = b.normal(f"fc{i}.weight", (fan_out, fan_in), 1.0 / math.sqrt(fan_in))
        bias = b.zeros(f"fc{i}.bias", (fan_out,))
        out = "logits" if i == len(dims) else f"fc{i}"
        h = b.node("Gemm", [h, w, bias], out, transB=1)
        if i == 1:
            h = b.node("Relu", [h], "relu1")
        elif i == 2:
            h = b.node("Tanh", [h], "tanh2")
    b.node("SoftmaxCrossEntropyLoss", ["logits", "labels"], "loss", reduction="mean")
    inputs = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16]),
        helper.make_tensor_value_info("labels", TensorProto.INT64, ["batch"]),
    ]
    outputs = [
        helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10]),
        helper.make_tensor_value_info("loss", TensorProto.FLOAT, []),
    ]
    return finish(b, "mlp", inputs, outputs, "MLP classifier 16-32-32-10 with its loss")


SEQ, VOCAB, D_MODEL, HEADS, D_MLP = 64, 256, 64, 2, 256
D_HEAD = D_MODEL // HEADS


def linear(b, x, name, fan_in, fan_out):
    """x @ W + bias with W [in, out] (MatMul, since x is [batch, seq, in])."""
    w = b.normal(f"{name}.weight", (fan_in, fan_out), 0.02)
    bias = b.zeros(f"{name}.bias", (fan_out,))
    y = b.node("MatMul", [x, w], f"{name}.matmul")
    return b.node("Add", [y, bias], f"{name}.add")


def layer_norm(b, x, name):
    scale = b.ones(f"{name}.weight", (D_MODEL,))
    bias = b.zeros(f"{name}.bias", (D_MODEL,))
    return b.node("LayerNormalization", [x, scale, bias], name, axis=-1, epsilon=1e-5)


def gelu_tanh(b, x, name):
    """0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) from elementwise ops."""
    c_cube = b.constant(f"{name}.c_cube", np.float32(0.044715))
    c_scale = b.constant(f"{name}.c_scale", np.float32(math.sqrt(2.0 / math.pi)))
    one = b.constant(f"{name}.one", np.float32(1.0))
    half = b.constant(f"{name}.half", np.float32(0.5))
    x2 = b.node("Mul", [x, x], f"{name}.x2")
    x3 = b.node("Mul", [x2, x], f"{name}.x3")
    inner = b.node("Add", [x, b.node("Mul", [x3, c_cube], f"{name}.cx3")], f"{name}.inner")
    t = b.node("Tanh", [b.node("Mul", [inner, c_scale], f"{name}.scaled")], f"{name}.tanh")
    gate = b.node("Add", [t, one], f"{name}.gate")
    return b.node("Mul", [b.node("Mul", [x, gate], f"{name}.xgate"), half], name)


def make_tiny_transformer():
    b = GraphBuilder(seed=20240611)
    tok = b.normal("tok_emb.weight", (VOCAB, D_MODEL), 0.02)
    pos = b.normal("pos_emb.weight", (SEQ, D_MODEL), 0.02)
    x = b.node("Gather", [tok, "input_ids"], "tok_emb", axis=0)     # [B, T, C]
    x = b.node("Add", [x, pos], "embed")                            # [B, T, C]

    # Attention block (pre-norm).
    h = layer_norm(b, x, "ln1")
    split = b.constant("attn.split_shape", np.array([0, 0, HEADS, D_HEAD], np.int64))
    merge = b.constant("attn.merge_shape", np.array([0, 0, D_MODEL], np.int64))
    heads = {}
    for part, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3])):
        y = linear(b, h, f"attn.{part}", D_MODEL, D_MODEL)          # [B, T, C]
        y = b.node("Reshape", [y, split], f"attn.{part}.split")     # [B, T, H, Dh]
        heads[part] = b.node("Transpose", [y], f"attn.{part}.heads", perm=perm)
    scores = b.node("MatMul", [heads["q"], heads["k"]], "attn.scores")  # [B, H, T, T]
    scale = b.constant("attn.scale", np.float32(1.0 / math.sqrt(D_HEAD)))
    scores = b.node("Mul", [scores, scale], "attn.scaled")
    mask = np.triu(np.full((SEQ, SEQ), -1e9, np.float32), k=1)      # 0 on and below the diagonal
    scores = b.node("Add", [scores, b.constant("attn.causal_mask", mask)], "attn.masked")
    probs = b.node("Softmax", [scores], "attn.probs", axis=-1)
    y = b.node("MatMul", [probs, heads["v"]], "attn.mix")           # [B, H, T, Dh]
    y = b.node("Transpose", [y], "attn.unheads", perm=[0, 2, 1, 3])  # [B, T, H, Dh]
    y = b.node("Reshape", [y, merge], "attn.merge")                 # [B, T, C]
    y = linear(b, y, "attn.proj", D_MODEL, D_MODEL)
    x = b.node("Add", [x, y], "resid1")

    # MLP block (pre-norm).
    h = layer_norm(b, x, "ln2")
    h = linear(b, h, "mlp.fc1", D_MODEL, D_MLP)
    h = gelu_tanh(b, h, "mlp.gelu")
    h = linear(b, h, "mlp.fc2", D_MLP, D_MODEL)
    x = b.node("Add", [x, h], "resid2")

    h = layer_norm(b, x, "ln_f")
    head = b.normal("lm_head.weight", (D_MODEL, VOCAB), 0.02)
    b.node("MatMul", [h, head], "logits")                           # [B, T, V]

    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", SEQ])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", SEQ, VOCAB])]
    doc = (f"decoder-only transformer: vocab {VOCAB}, seq {SEQ}, d_model {D_MODEL}, "
           f"{HEADS} heads, 1 layer, MLP {D_MLP}")
    return finish(b, "tiny_transformer", inputs, outputs, doc)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", default=os.path.join(here, "..", "models"))
    args = parser.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    for name, model in (("mlp", make_mlp()), ("tiny_transformer", make_tiny_transformer())):
        path = os.path.join(args.out_dir, f"{name}.onnx")
        onnx.save(model, path)
        print(f"wrote {path} ({os.path.getsize(path)} bytes, "
              f"{len(model.graph.initializer)} parameters)")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""make_test_models.py - writes the small ONNX models of the importer tests.

    python3 tests/frontends/make_test_models.py [--out-dir tests/frontends/models]

One model per supported op family, one per error the importer reports, and
two files that are not ONNX at all (truncated.onnx, garbage.onnx).
import_test.cpp says what each one checks. Needs numpy and onnx.
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

GENERATOR = "megatrain make_test_models.py"
GENERATOR_VERSION = "1"
F, I64, I32 = TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32
rng = np.random.RandomState(7)


def vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def init(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def weight(name, shape):
    return init(name, rng.normal(0, 0.1, size=shape).astype(np.float32))


def const(name, array):
    return helper.make_node("Constant", [], [name], name=name,
                            value=numpy_helper.from_array(np.asarray(array), name))


def model(name, nodes, inputs, outputs, initializers=(), opset=17, check=True, extra_opsets=()):
    graph = helper.make_graph(nodes, name, inputs, outputs, list(initializers))
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in extra_opsets]
    m = helper.make_model(graph, opset_imports=opsets, producer_name=GENERATOR,
                          producer_version=GENERATOR_VERSION)
    m.ir_version = 8
    helper.set_model_props(m, {"megatrain.generator": f"{GENERATOR} {GENERATOR_VERSION}"})
    if check:
        onnx.checker.check_model(m, full_check=True)
    return m


def models():
    n = helper.make_node
    out = {}

    # Gemm: alpha/beta scales, transA/transB, optional C.
    out["gemm"] = model("gemm", [
        n("Gemm", ["a", "w1", "b1"], ["y1"], name="gemm_bias", alpha=0.5, beta=2.0, transB=1),
        n("Gemm", ["a2", "w2"], ["y2"], name="gemm_nobias", transA=1),
    ], [vi("a", F, [4, 8]), vi("a2", F, [8, 4])],
        [vi("y1", F, [4, 6]), vi("y2", F, [4, 3])],
        [weight("w1", (6, 8)), init("b1", np.zeros(6, np.float32)), weight("w2", (8, 3))])

    # MatMul: batched by matrix, vector by batch, batch by vector.
    out["matmul"] = model("matmul", [
        n("MatMul", ["x", "w"], ["y"], name="batched"),
        n("MatMul", ["v", "m"], ["vm"], name="vec_lhs"),
        n("MatMul", ["m3", "v"], ["mv"], name="vec_rhs"),
    ], [vi("x", F, [2, 3, 4, 5]), vi("v", F, [5]), vi("m", F, [2, 5, 7]), vi("m3", F, [3, 4, 5])],
        [vi("y", F, [2, 3, 4, 6]), vi("vm", F, [2, 7]), vi("mv", F, [3, 4])],
        [weight("w", (5, 6))])

    # Broadcasting binaries, activations, Identity, a scalar Constant.
    out["elementwise"] = model("elementwise", [
        const("two", np.float32(2.0)),
        n("Add", ["a", "b"], ["sum"], name="add"),
        n("Sub", ["sum", "two"], ["diff"], name="sub"),
        n("Mul", ["diff", "gain"], ["prod"], name="mul"),
        n("Div", ["prod", "a"], ["quot"], name="div"),
        n("Relu", ["quot"], ["r"], name="relu"),
        n("Tanh", ["r"], ["t"], name="tanh"),
        n("Sigmoid", ["t"], ["s"], name="sigmoid"),
        n("Identity", ["s"], ["y"], name="identity"),
    ], [vi("a", F, [4, 1, 8]), vi("b", F, [3, 8])], [vi("y", F, [4, 3, 8])],
        [weight("gain", (8,))])

    # Reshape (0, -1; shape from an initializer and from a Constant node; both
    # folded), Transpose (default and explicit perm), Softmax (negative axis).
    out["shape_ops"] = model("shape_ops", [
        const("shape_c", np.array([4, -1, 2], np.int64)),
        n("Reshape", ["x", "shape_i"], ["flat"], name="reshape_init"),     # [2, 12]
        n("Transpose", ["flat"], ["flat_t"], name="transpose_default"),   # [12, 2]
        n("Reshape", ["x", "shape_c"], ["r3"], name="reshape_const"),      # [4, 3, 2]
        n("Transpose", ["r3"], ["r3_t"], name="transpose_perm", perm=[1, 0, 2]),  # [3, 4, 2]
        n("Softmax", ["r3_t"], ["p"], name="softmax_last", axis=-1),
        n("Softmax", ["x"], ["q"], name="softmax_mid", axis=1),
        n("Reshape", ["x", "same_shape"], ["same"], name="reshape_noop"),
    ], [vi("x", F, [2, 3, 4])],
        [vi("flat_t", F, [12, 2]), vi("p", F, [3, 4, 2]), vi("q", F, [2, 3, 4]),
         vi("same", F, [2, 3, 4])],
        [init("shape_i", np.array([0, -1], np.int64)),
         init("same_shape", np.array([2, 3, 4], np.int64))])

    # Reductions at opset 17: ReduceMean axes attribute, ReduceSum axes input.
    out["reduce_opset17"] = model("reduce_opset17", [
        n("ReduceMean", ["x"], ["mean_last"], name="mean_attr", axes=[-1]),
        const("axes", np.array([-1, 0], np.int64)),
        n("ReduceSum", ["x", "axes"], ["sum_ends"], name="sum_input", keepdims=0),
        n("ReduceSum", ["x"], ["sum_all"], name="sum_all", keepdims=0),
        n("ReduceSum", ["x"], ["sum_noop"], name="sum_noop", noop_with_empty_axes=1),
    ], [vi("x", F, [2, 3, 4])],
        [vi("mean_last", F, [2, 3, 1]), vi("sum_ends", F, [3]), vi("sum_all", F, []),
         vi("sum_noop", F, [2, 3, 4])])

    # ReduceMean at opset 18 takes its axes as an input.
    out["reduce_opset18"] = model("reduce_opset18", [
        const("axes", np.array([1], np.int64)),
        n("ReduceMean", ["x", "axes"], ["m"], name="mean_input", keepdims=0),
    ], [vi("x", F, [2, 3, 4])], [vi("m", F, [2, 4])], opset=18)

    # Gather: embedding lookup, int32 constant indices on axis 1 (negative).
    out["gather"] = model("gather", [
        n("Gather", ["emb", "ids"], ["e"], name="embed"),
        const("cols", np.array([3, 0], np.int32)),
        n("Gather", ["emb", "cols"], ["c"], name="columns", axis=-1),
    ], [vi("ids", I64, [2, 3])], [vi("e", F, [2, 3, 4]), vi("c", F, [10, 2])],
        [weight("emb", (10, 4))])

    # LayerNormalization with bias over the last dim; without bias over two.
    out["layernorm"] = model("layernorm", [
        n("LayerNormalization", ["x", "g", "b"], ["y"], name="ln_last"),
        n("LayerNormalization", ["x", "g2"], ["z"], name="ln_nobias", axis=1, epsilon=1e-3),
    ], [vi("x", F, [2, 3, 8])], [vi("y", F, [2, 3, 8]), vi("z", F, [2, 3, 8])],
        [init("g", np.ones(8, np.float32)), init("b", np.zeros(8, np.float32)),
         init("g2", np.ones((3, 8), np.float32))])

    # SoftmaxCrossEntropyLoss: [N, C] mean; [N, C, D] sum with ignore_index.
    out["softmax_ce"] = model("softmax_ce", [
        n("SoftmaxCrossEntropyLoss", ["logits", "labels"], ["loss"], name="ce_mean"),
        n("SoftmaxCrossEntropyLoss", ["logits3", "labels3"], ["loss3"], name="ce_sum",
          reduction="sum", ignore_index=0),
    ], [vi("logits", F, [4, 5]), vi("labels", I64, [4]),
        vi("logits3", F, [2, 5, 3]), vi("labels3", I64, [2, 3])],
        [vi("loss", F, []), vi("loss3", F, [])])

    # Trainable rule: float initializers are params (one per initializer even
    # when used twice or through Identity), an int64 initializer used as data
    # is an mt.constant, one used as a shape is folded away.
    out["trainable"] = model("trainable", [
        n("MatMul", ["x", "enc.weight"], ["h"], name="enc"),
        n("Add", ["h", "enc.bias"], ["hb"], name="enc_bias"),
        n("Identity", ["enc.weight"], ["tied"], name="tie"),
        n("MatMul", ["hb", "tied"], ["h2"], name="enc_again"),
        n("MatMul", ["h2", "head.weight"], ["logits"], name="head"),
        n("Gather", ["logits", "rows"], ["picked"], name="pick"),
        n("Reshape", ["picked", "flat_shape"], ["y"], name="flatten"),
    ], [vi("x", F, [3, 4])], [vi("y", F, [4])],
        [weight("enc.weight", (4, 4)), init("enc.bias", np.zeros(4, np.float32)),
         weight("head.weight", (4, 2)), init("rows", np.array([0, 2], np.int64)),
         init("flat_shape", np.array([-1], np.int64))])

    # Double precision end to end (gradient checks run in f64).
    out["float64"] = model("float64", [
        const("half", np.float64(0.5)),
        n("MatMul", ["x", "w"], ["xw"], name="matmul"),
        n("Mul", ["xw", "half"], ["y"], name="halve"),
    ], [vi("x", TensorProto.DOUBLE, [2, 3])], [vi("y", TensorProto.DOUBLE, [2, 4])],
        [init("w", np.random.RandomState(64).normal(size=(3, 4)))])

    # Symbolic dims that --shape must bind.
    out["symbolic"] = model("symbolic", [
        n("Gather", ["emb", "input_ids"], ["e"], name="embed"),
    ], [vi("input_ids", I64, ["batch", "seq"])], [vi("e", F, ["batch", "seq", 4])],
        [weight("emb", (16, 4))])

    # Errors.
    out["unknown_op"] = model("unknown_op", [
        n("Relu", ["x"], ["r"], name="relu"),
        n("Einsum", ["r", "r"], ["y"], name="mix", equation="ij,ij->i"),
    ], [vi("x", F, [2, 3])], [vi("y", F, [2])])
    out["unnamed_unknown_op"] = model("unnamed_unknown_op", [
        n("Relu", ["x"], ["r"]),
        n("Einsum", ["r", "r"], ["y"], equation="ij,ij->i"),
    ], [vi("x", F, [2, 3])], [vi("y", F, [2])])
    out["custom_domain"] = model("custom_domain", [
        n("FusedThing", ["x"], ["y"], name="fused", domain="com.example"),
    ], [vi("x", F, [2, 3])], [vi("y", F, [2, 3])], check=False,
        extra_opsets=[("com.example", 1)])
    out["old_opset"] = model("old_opset", [
        n("Relu", ["x"], ["y"], name="relu"),
    ], [vi("x", F, [2, 3])], [vi("y", F, [2, 3])], opset=11)
    out["int32_input"] = model("int32_input", [
        n("Gather", ["emb", "ids"], ["e"], name="embed"),
    ], [vi("ids", I32, [2])], [vi("e", F, [2, 4])], [weight("emb", (16, 4))])
    out["sce_weights"] = model("sce_weights", [
        n("SoftmaxCrossEntropyLoss", ["logits", "labels", "w"], ["loss"], name="ce_weighted"),
    ], [vi("logits", F, [4, 5]), vi("labels", I64, [4])], [vi("loss", F, [])],
        [init("w", np.ones(5, np.float32))])
    out["layernorm_mean_used"] = model("layernorm_mean_used", [
        n("LayerNormalization", ["x", "g"], ["y", "mu"], name="ln_stats"),
    ], [vi("x", F, [2, 8])], [vi("y", F, [2, 8]), vi("mu", F, [2, 1])],
        [init("g", np.ones(8, np.float32))])
    out["reshape_dynamic"] = model("reshape_dynamic", [
        n("Reshape", ["x", "shape"], ["y"], name="reshape_from_input"),
    ], [vi("x", F, [2, 3]), vi("shape", I64, [1])], [vi("y", F, [6])], check=False)
    out["big_constant"] = model("big_constant", [
        const("table", np.zeros((128, 129), np.float32)),
        n("Add", ["x", "table"], ["y"], name="add_table"),
    ], [vi("x", F, [128, 129])], [vi("y", F, [128, 129])])
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", default=os.path.join(here, "models"))
    args = parser.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    made = models()
    for name, m in made.items():
        onnx.save(m, os.path.join(args.out_dir, f"{name}.onnx"))
    # Not ONNX: the first half of a model (cut inside an initializer), and text.
    data = made["gemm"].SerializeToString()
    with open(os.path.join(args.out_dir, "truncated.onnx"), "wb") as f:
        f.write(data[: len(data) // 2])
    with open(os.path.join(args.out_dir, "garbage.onnx"), "wb") as f:
        f.write(b"this is not an ONNX model\n")
    print(f"wrote {len(made) + 2} files to {args.out_dir}")


if __name__ == "__main__":
    main()

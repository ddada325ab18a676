#!/usr/bin/env python3
"""make_test_models.py - writes the small ONNX models of the importer tests.

    python3 tests/frontends/make_test_models.py [--out-dir tests/frontends/models]

One model per supported op family, one per error the importer reports, and
two files that are not ONNX at all (truncated.onnx, garbage.onnx).
import_test.cpp says what each one checks. The llm_* models are fragments cut
out of the real exports in tests/models/llm (masks, rotary tables, attention,
torch.split) and small graphs of the constructs those exports use (model-local
functions, Gelu, the megatrain.parameters rule); tests/lit/import/llm_*.test
check them. Needs numpy and onnx.
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
        n("Softplus", ["s"], ["sp"], name="softplus"),
        n("Identity", ["sp"], ["y"], name="identity"),
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
    out.update(malformed_models())
    return out


def function_model(name, graph_nodes, functions):
    """A model with model-local functions in domain `local`, not checked (the
    checker refuses what these exist to test)."""
    graph = helper.make_graph(graph_nodes, name, [vi("x", F, [2])], [vi("y", F, [2])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18),
                                                helper.make_opsetid("local", 1)],
                          functions=functions, producer_name=GENERATOR,
                          producer_version=GENERATOR_VERSION)
    m.ir_version = 10
    helper.set_model_props(m, {"megatrain.generator": f"{GENERATOR} {GENERATOR_VERSION}"})
    return m


def local_function(name, body):
    return helper.make_function("local", name, ["x"], ["y"], body,
                                [helper.make_opsetid("", 18), helper.make_opsetid("local", 1)])


def malformed_models():
    """Files that once crashed the compiler (issue 14): each must now fail with
    one error line."""
    n = helper.make_node
    out = {}
    # The folder meets a node whose input is "" (ONNX's omitted optional
    # input) where the op needs one, and a node with too few inputs.
    out["fold_empty_input"] = model("fold_empty_input", [
        const("a", np.ones((2, 2), np.float32)),
        n("MatMul", ["a", ""], ["b"], name="matmul_missing"),
        n("Add", ["x", "b"], ["y"], name="add"),
    ], [vi("x", F, [2, 2])], [vi("y", F, [2, 2])], check=False)
    out["fold_few_inputs"] = model("fold_few_inputs", [
        const("a", np.ones((2, 2), np.float32)),
        n("MatMul", ["a"], ["b"], name="matmul_one_input"),
        n("Add", ["x", "b"], ["y"], name="add"),
    ], [vi("x", F, [2, 2])], [vi("y", F, [2, 2])], check=False)
    # Trilu of a [100000, 100000] input: its 10^10-element mask is refused
    # before it is built (a structure-fuzzed model allocated 2 GiB for one).
    out["trilu_huge"] = model("trilu_huge", [
        n("Trilu", ["x"], ["y"], name="trilu"),
    ], [vi("x", F, [100000, 100000])], [vi("y", F, [100000, 100000])], check=False)
    # Pow with no exponent (a structure-fuzzed model: the message read input 1
    # past the end of the node's inputs).
    out["pow_no_exponent"] = model("pow_no_exponent", [
        n("Pow", ["x"], ["y"], name="pow"),
    ], [vi("x", F, [2])], [vi("y", F, [2])], check=False)
    # Functions calling themselves through another, 40 deep, and 24 deep with
    # two calls per level (2^24 nodes).
    out["function_recursion"] = function_model("function_recursion", [
        n("Ping", ["x"], ["y"], name="call", domain="local")], [
        local_function("Ping", [n("Pong", ["x"], ["y"], name="to_pong", domain="local")]),
        local_function("Pong", [n("Ping", ["x"], ["y"], name="to_ping", domain="local")])])
    # Two bodies under one name: which one a call means is undefined.
    out["function_duplicate"] = function_model("function_duplicate", [
        n("Twice", ["x"], ["y"], name="call", domain="local")], [
        local_function("Twice", [n("Relu", ["x"], ["y"], name="relu")]),
        local_function("Twice", [n("Neg", ["x"], ["y"], name="neg")])])
    out["function_deep"] = function_model("function_deep", [
        n("F0", ["x"], ["y"], name="call", domain="local")],
        [local_function(f"F{k}", [n(f"F{k + 1}", ["x"], ["y"], name="next", domain="local")])
         for k in range(39)] + [local_function("F39", [n("Relu", ["x"], ["y"], name="relu")])])
    out["function_wide"] = function_model("function_wide", [
        n("W0", ["x"], ["y"], name="call", domain="local")],
        [local_function(f"W{k}", [
            n(f"W{k + 1}", ["x"], ["h"], name="first", domain="local"),
            n(f"W{k + 1}", ["h"], ["y"], name="second", domain="local")]) for k in range(23)]
        + [local_function("W23", [n("Relu", ["x"], ["y"], name="relu")])])
    # The same with an empty last function: no node at all comes out, but 2^24
    # calls go in (a fuzzed model: 39 s to import before calls were counted).
    out["function_wide_empty"] = function_model("function_wide_empty", [
        n("W0", ["x"], ["y"], name="call", domain="local")],
        [local_function(f"W{k}", [
            n(f"W{k + 1}", ["x"], ["h"], name="first", domain="local"),
            n(f"W{k + 1}", ["h"], ["y"], name="second", domain="local")]) for k in range(23)]
        + [helper.make_function("local", "W23", ["x"], ["y"], [], [helper.make_opsetid("", 18)])])
    # 2^14 calls of a body holding a 64 KiB Constant: within the node limit
    # (65,535 nodes and calls), but 1 GiB to copy.
    out["function_wide_constant"] = function_model("function_wide_constant", [
        n("C0", ["x"], ["y"], name="call", domain="local")],
        [local_function(f"C{k}", [
            n(f"C{k + 1}", ["x"], ["h"], name="first", domain="local"),
            n(f"C{k + 1}", ["h"], ["y"], name="second", domain="local")]) for k in range(14)]
        + [local_function("C14", [
            n("Constant", [], ["table"], name="table",
              value=numpy_helper.from_array(np.arange(16384, dtype=np.float32), "table")),
            n("Add", ["x", "table"], ["y"], name="add")])])
    # Sizes from the file: rank 9, and shapes whose byte size overflows int64.
    out["rank_nine_input"] = model("rank_nine_input", [
        n("Relu", ["x"], ["y"], name="relu"),
    ], [vi("x", F, [1] * 9)], [vi("y", F, [1] * 9)], check=False)
    huge = TensorProto(name="w", data_type=F, dims=[1 << 31, 1 << 31, 1 << 31])
    out["huge_initializer"] = model("huge_initializer", [
        n("Add", ["x", "w"], ["y"], name="add"),
    ], [vi("x", F, [2])], [vi("y", F, [2])], [huge], check=False)
    out["huge_expand"] = model("huge_expand", [
        const("shape", np.array([1 << 31, 1 << 31, 1 << 31], np.int64)),
        n("Expand", ["x", "shape"], ["y"], name="expand"),
    ], [vi("x", F, [1])], [vi("y", F, [1 << 31, 1 << 31, 1 << 31])], check=False)
    return out


def fragment(export, inputs, outputs, name, keep_metadata=True):
    """The part of a real export between `inputs` and `outputs` (names of its values)."""
    here = os.path.dirname(os.path.abspath(__file__))
    full = onnx.load(os.path.join(here, "..", "models", "llm", export))
    full = onnx.shape_inference.infer_shapes(full)
    sub = onnx.utils.Extractor(full).extract_model(inputs, outputs)
    sub.graph.name = name
    # Keep the graph, not torch's per-node stack traces and inferred shapes.
    del sub.graph.value_info[:]
    for node in sub.graph.node:
        node.doc_string = ""
        del node.metadata_props[:]
    sub.producer_name, sub.producer_version = GENERATOR, GENERATOR_VERSION
    props = {"megatrain.generator": f"{GENERATOR} {GENERATOR_VERSION}",
             "megatrain.fragment_of": export}
    if keep_metadata:
        for p in full.metadata_props:
            if p.key == "megatrain.parameters":
                props[p.key] = p.value
    del sub.metadata_props[:]
    helper.set_model_props(sub, props)
    return sub


def llm_models():
    n = helper.make_node
    out = {}

    # Fragments of the real exports.
    # The causal mask of the unoptimized Llama export: Shape, Range, CumSum,
    # GatherND, comparisons and Where fold into one constant.
    out["llm_llama_mask"] = fragment("llama_noopt.onnx", ["input_ids"], ["val_221"],
                                     "llm_llama_mask")
    # Rotary cos/sin tables from the inv_freq buffer.
    out["llm_llama_rotary"] = fragment("llama_noopt.onnx", ["input_ids"],
                                       ["unsqueeze_14", "unsqueeze_15"], "llm_llama_rotary")
    # One attention block of the optimized export: folded transposed weights
    # (val_110, ...), rotary tables and mask as unlisted initializers.
    out["llm_llama_attention"] = fragment("llama_opt.onnx", ["mul_4"], ["linear_3"],
                                          "llm_llama_attention")
    # torch.split as SplitToSequence + SequenceAt.
    out["llm_gpt2_split"] = fragment("gpt2_noopt.onnx", ["view_2"],
                                     ["getitem", "getitem_1", "getitem_2"], "llm_gpt2_split")
    # Opset 23: RMSNormalization and Attention nodes.
    out["llm_llama_opset23"] = fragment("llama_opset23_opt.onnx", ["embedding", "add_4",
                                        "_unsafe_view", "_unsafe_view_1"],
                                        ["mul_4", "scaled_dot_product_attention"],
                                        "llm_llama_opset23")

    # Every folder op family on one chain: y = x + [0, 1, 3, 6].
    f32_one = numpy_helper.from_array(np.ones(1, np.float32), "one")
    out["llm_fold_chain"] = model("llm_fold_chain", [
        n("Shape", ["x"], ["shape"], name="shape"),
        const("one_i", np.int64(1)), const("zero_i", np.int64(0)),
        n("Gather", ["shape", "one_i"], ["len"], name="len"),
        n("Range", ["zero_i", "len", "one_i"], ["r"], name="range"),
        n("Cast", ["r"], ["rf"], name="to_float", to=F),
        const("square", np.array([4, 4], np.int64)),
        n("ConstantOfShape", ["square"], ["ones"], name="ones", value=f32_one),
        n("Trilu", ["ones"], ["upper"], name="upper", upper=1),
        const("axis0", np.array([0], np.int64)),
        n("Unsqueeze", ["rf", "axis0"], ["row"], name="row"),
        n("MatMul", ["row", "upper"], ["prefix2d"], name="prefix_sums"),
        n("Squeeze", ["prefix2d", "axis0"], ["prefix"], name="flat"),
        n("CumSum", ["r", "zero_i"], ["cs"], name="cumsum"),
        n("CastLike", ["cs", "x"], ["csf"], name="cast_like"),
        n("Equal", ["csf", "prefix"], ["same"], name="same"),
        const("minus", np.float32(-1)),
        n("Where", ["same", "prefix", "minus"], ["table"], name="pick"),
        n("Add", ["x", "table"], ["y"], name="add"),
    ], [vi("x", F, [2, 4])], [vi("y", F, [2, 4])])

    # The trainable rule with megatrain.parameters: listed ones train; an
    # unlisted one read (through Transpose) by MatMul is a folded parameter
    # copy; inv_freq is a buffer folded away; a small unlisted mask is a
    # constant; a large or external one a frozen mt.param.
    params = model("llm_params", [
        n("Gather", ["emb.weight", "ids"], ["e"], name="embed"),
        n("Mul", ["e", "norm.weight"], ["h"], name="norm"),
        n("Transpose", ["val_93"], ["w"], name="w_t", perm=[1, 0]),
        n("MatMul", ["h", "w"], ["hw"], name="proj"),
        const("pos", np.arange(3, dtype=np.float32).reshape(3, 1)),
        n("Mul", ["pos", "inv_freq"], ["freqs"], name="freqs"),
        n("Cos", ["freqs"], ["cos"], name="cos"),
        n("Add", ["hw", "cos"], ["a"], name="rotate"),
        n("Add", ["a", "mask"], ["b"], name="masked"),
        n("Mul", ["b", "external_buffer"], ["y"], name="external"),
        n("Add", ["x", "big_buffer"], ["z"], name="big"),
    ], [vi("ids", I64, [2, 3]), vi("x", F, [5000, 4])],
        [vi("y", F, [2, 3, 4]), vi("z", F, [5000, 4])],
        [weight("emb.weight", (16, 4)), init("norm.weight", np.ones(4, np.float32)),
         weight("val_93", (4, 4)),
         init("inv_freq", np.array([1.0, 0.5, 0.25, 0.125], np.float32)),
         init("mask", np.zeros((3, 4), np.float32)),
         init("big_buffer", np.ones((5000, 4), np.float32))], check=False)
    ext = params.graph.initializer.add()
    ext.name, ext.data_type = "external_buffer", F
    ext.dims.extend([3, 4])  # not a per-channel vector: a buffer, not a norm scale
    ext.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "llm_params.onnx.data"), ("offset", "0"), ("length", "48")):
        entry = ext.external_data.add()
        entry.key, entry.value = k, v
    helper.set_model_props(params, {"megatrain.generator": f"{GENERATOR} {GENERATOR_VERSION}",
                                    "megatrain.parameters": "emb.weight,norm.weight"})
    out["llm_params"] = params

    # Model-local functions (IR 10): Norm, with an attribute default, is called
    # twice, once overriding it; its body calls a second function, Scale.
    scale_fn = helper.make_function(
        "local", "Scale", ["x"], ["y"],
        [n("Constant", [], ["k"], name="k", value_float=2.0),
         n("Mul", ["x", "k"], ["y"], name="mul")],
        [helper.make_opsetid("", 18)])
    layer_norm = n("LayerNormalization", ["x", "g"], ["n"], name="ln")
    layer_norm.attribute.append(helper.make_attribute_ref("epsilon", onnx.AttributeProto.FLOAT))
    norm_fn = helper.make_function(
        "local", "Norm", ["x", "g"], ["y"],
        [layer_norm, n("Scale", ["n"], ["y"], name="twice", domain="local")],
        [helper.make_opsetid("", 18), helper.make_opsetid("local", 1)])
    norm_fn.attribute_proto.append(helper.make_attribute("epsilon", 0.25))
    graph = helper.make_graph(
        [n("Norm", ["x", "g"], ["h"], name="first", domain="local"),
         n("Norm", ["h", "g"], ["y"], name="second", domain="local", epsilon=0.5)],
        "llm_function", [vi("x", F, [2, 4])], [vi("y", F, [2, 4])],
        [init("g", np.ones(4, np.float32))])
    fn_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18),
                                                       helper.make_opsetid("local", 1)],
                                 functions=[norm_fn, scale_fn], producer_name=GENERATOR,
                                 producer_version=GENERATOR_VERSION)
    fn_model.ir_version = 10
    helper.set_model_props(fn_model, {"megatrain.generator": f"{GENERATOR} {GENERATOR_VERSION}"})
    onnx.checker.check_model(fn_model)
    out["llm_function"] = fn_model

    # Opset 20 Gelu, both forms, and inference-mode Dropout.
    out["llm_gelu"] = model("llm_gelu", [
        n("Gelu", ["x"], ["exact"], name="gelu_exact"),
        n("Gelu", ["x"], ["approx"], name="gelu_tanh", approximate="tanh"),
        n("Dropout", ["approx"], ["kept"], name="dropout"),
    ], [vi("x", F, [2, 4])], [vi("exact", F, [2, 4]), vi("kept", F, [2, 4])], opset=20)

    # Refusals.
    out["llm_cumsum_runtime"] = model("llm_cumsum_runtime", [
        const("axis", np.int64(1)),
        n("CumSum", ["x", "axis"], ["y"], name="running_sum"),
    ], [vi("x", F, [2, 4])], [vi("y", F, [2, 4])])
    out["llm_pow_runtime"] = model("llm_pow_runtime", [
        n("Pow", ["x", "e"], ["y"], name="power"),
    ], [vi("x", F, [2, 4]), vi("e", F, [])], [vi("y", F, [2, 4])])
    out["llm_gqa"] = model("llm_gqa", [
        n("GroupQueryAttention", ["q", "k", "v"], ["y"], name="gqa", domain="com.microsoft",
          num_heads=2, kv_num_heads=1),
    ], [vi("q", F, [1, 3, 8]), vi("k", F, [1, 3, 4]), vi("v", F, [1, 3, 4])],
        [vi("y", F, [1, 3, 8])], check=False, extra_opsets=[("com.microsoft", 1)])
    out["llm_big_fold"] = model("llm_big_fold", [
        const("start", np.float32(0)), const("limit", np.float32(4500000)),
        const("step", np.float32(1)),
        n("Range", ["start", "limit", "step"], ["r"], name="positions"),
        n("Add", ["x", "r"], ["y"], name="add_positions"),
    ], [vi("x", F, [4500000])], [vi("y", F, [4500000])])

    # The trainable rule without megatrain.parameters, on what torch.onnx.export's
    # optimizer makes: a Pow exponent and a scale lifted into scalar initializers
    # (buffers), an anonymous W^T and a folded norm scale `add_4` (parameters, as
    # read), a mask (buffer), the embedding named like a parameter; `add_4` scales
    # two norms (merged by the optimizer: a warning).
    out["llm_no_metadata"] = model("llm_no_metadata", [
        n("Gather", ["emb.weight", "ids"], ["e"], name="embed"),
        n("Pow", ["e", "val_2"], ["sq"], name="square"),
        n("Mul", ["sq", "add_4"], ["h"], name="norm_1"),
        n("Mul", ["h", "add_4"], ["h2"], name="norm_2"),
        n("Transpose", ["val_93"], ["w"], name="w_t", perm=[1, 0]),
        n("MatMul", ["h2", "w"], ["hw"], name="proj"),
        n("Add", ["hw", "val_mask"], ["m"], name="masked"),
        n("Mul", ["m", "val_scale"], ["y"], name="scaled"),
    ], [vi("ids", I64, [2, 3])], [vi("y", F, [2, 3, 4])],
        [weight("emb.weight", (16, 4)), init("val_2", np.float32(2.0)),
         init("add_4", np.full(4, 1.5, np.float32)), weight("val_93", (4, 4)),
         init("val_mask", np.zeros((3, 4), np.float32)), init("val_scale", np.float32(0.5))],
        opset=18)
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", default=os.path.join(here, "models"))
    args = parser.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    made = models()
    made.update(llm_models())
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

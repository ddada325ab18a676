#!/usr/bin/env python3
"""run_node_tests.py - run the ONNX backend node tests shipped with the pip `onnx` package
for every op the importer supports (docs/frontends.md, "Supported ops"), forward on the CPU
backend, and write a pass/fail table.

    python3 tests/conformance/run_node_tests.py --bin build/bin --out tests/conformance/RESULTS.md

megatrain-compile needs a loss, so each test's model is wrapped: a new output
`mt_conformance_loss` = the sum of ReduceSum(output) over the test's outputs (cast to FLOAT
where needed) is appended, and the test's own outputs are kept with --keep-output and read
back after one step with megatrain-run --dump-output. The models have no parameters, so the
step changes nothing; the outputs are the forward results. Each is compared with the test's
expected output (np.allclose, rtol 1e-4, atol 1e-5; NaNs equal; exact for bool/int).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto

# docs/frontends.md, "Supported ops" (ops that become mt ops on run-time values).
SUPPORTED = {
    "MatMul", "Gemm", "Add", "Sub", "Mul", "Div", "Max", "Min", "Relu", "Tanh", "Sigmoid", "Softplus",
    "Neg", "Sqrt", "Reciprocal", "Exp", "Log", "Erf", "Cos", "Sin", "Pow", "IsNaN", "Where",
    "Gelu", "Softmax", "Reshape", "Unsqueeze", "Squeeze", "Flatten", "Transpose", "Expand",
    "Concat", "Slice", "Split", "SplitToSequence", "SequenceConstruct", "SequenceAt",
    "SequenceLength", "Cast", "CastLike", "Trilu", "ReduceSum", "ReduceMean", "Gather",
    "LayerNormalization", "RMSNormalization", "Attention", "SoftmaxCrossEntropyLoss",
    "Dropout", "Identity", "Constant",
}
LOSS = "mt_conformance_loss"
RTOL, ATOL = 1e-4, 1e-5


def node_dir(cache):
    """The node test data of the installed onnx. Some wheels (onnx 1.23 on PyPI) ship only the
    case definitions (onnx/backend/test/case/node), not the generated data; then the data is
    generated from those definitions into CACHE with onnx's own writer
    (onnx.backend.test.cmd_tools.generate_data), which is how onnx makes its data directory."""
    shipped = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")
    if os.path.isdir(shipped) and os.listdir(shipped):
        return shipped, "shipped"
    out = os.path.join(cache, "node")
    if not (os.path.isdir(out) and os.listdir(out)):
        import argparse as _argparse
        import warnings
        from onnx.backend.test import cmd_tools
        from onnx.backend.test.case import node as node_cases
        cmd_tools.model_test.collect_testcases = lambda: node_cases.collect_testcases(None)
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            cmd_tools.generate_data(_argparse.Namespace(output=cache))
    return out, "generated from onnx.backend.test.case.node"


def first_line(text):
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line
    return "(no message)"


def wrap(model):
    """A copy of model with a scalar FLOAT output LOSS summing every output."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    terms = []
    for i, out in enumerate(model.graph.output):
        if not out.type.HasField("tensor_type"):
            continue
        name = out.name
        if out.type.tensor_type.elem_type != TensorProto.FLOAT:
            g.node.append(helper.make_node("Cast", [name], [f"{LOSS}_c{i}"], to=TensorProto.FLOAT))
            name = f"{LOSS}_c{i}"
        g.node.append(helper.make_node("ReduceSum", [name], [f"{LOSS}_r{i}"], keepdims=0))
        terms.append(f"{LOSS}_r{i}")
    acc = terms[0]
    for j, t in enumerate(terms[1:]):
        nxt = LOSS + f"_a{j}"
        g.node.append(helper.make_node("Add", [acc, t], [nxt]))
        acc = nxt
    g.node.append(helper.make_node("Identity", [acc], [LOSS]))
    g.output.append(helper.make_tensor_value_info(LOSS, TensorProto.FLOAT, []))
    return m


def static_shape(vi):
    if not vi.type.HasField("tensor_type") or not vi.type.tensor_type.HasField("shape"):
        return False
    return all(d.HasField("dim_value") for d in vi.type.tensor_type.shape.dim)


def run_plan(bindir, plan, wrapped, arrays, outputs, tmp, k):
    cmd = [os.path.join(bindir, "megatrain-run"), plan, "--weights", wrapped, "--steps", "1",
           "--quiet", "--backend", "cpu"]
    for n, a in arrays.items():
        p = os.path.join(tmp, f"in_{len(cmd)}.npy")
        np.save(p, a)
        cmd += ["--input", f"{n}={p}"]
    dumps = []
    for j, o in enumerate(outputs):
        p = os.path.join(tmp, f"out_{k}_{j}.npy")
        dumps.append(p)
        cmd += ["--dump-output", f"{o}={p}"]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120), dumps
    except subprocess.TimeoutExpired:
        return None, dumps


def run_test(test, bindir, tmp):
    """Returns (result, reason)."""
    model = onnx.load(os.path.join(test, "model.onnx"))
    sets = sorted(d for d in os.listdir(test) if d.startswith("test_data_set_"))
    inputs = [i.name for i in model.graph.input]
    outputs = [o.name for o in model.graph.output]
    init = {t.name for t in model.graph.initializer}
    feeds = [n for n in inputs if n not in init]
    kinds = [o.type.WhichOneof("value") for o in model.graph.output]
    if any(k != "tensor_type" for k in kinds):
        return "compile error", (f"not run: a graph output is a {', '.join(sorted(set(k for k in kinds if k != 'tensor_type')))}; "
                                 "megatrain outputs are tensors (sequences never reach the IR)")
    wrapped = os.path.join(tmp, "model.onnx")
    try:
        onnx.save(wrap(model), wrapped)
    except Exception as e:  # noqa: BLE001
        return "compile error", f"wrapping the outputs into a loss: {first_line(str(e))}"
    plan = os.path.join(tmp, "model.plan")
    for k, ds in enumerate(sets):
        d = os.path.join(test, ds)
        arrays = {}
        for j, n in enumerate(feeds):
            p = os.path.join(d, f"input_{j}.pb")
            t = onnx.TensorProto()
            with open(p, "rb") as f:
                t.ParseFromString(f.read())
            arrays[n] = numpy_helper.to_array(t)
        expected = []
        for j in range(len(outputs)):
            p = os.path.join(d, f"output_{j}.pb")
            t = onnx.TensorProto()
            with open(p, "rb") as f:
                t.ParseFromString(f.read())
            expected.append(numpy_helper.to_array(t))
        if k == 0:
            # Exact fp32: the outputs are compared with ONNX's references.
            cmd = [os.path.join(bindir, "megatrain-compile"), wrapped, "-o", plan,
                   "--loss-output", LOSS, "--precision", "fp32"]
            for vi in model.graph.input:
                if vi.name in arrays and not static_shape(vi) and arrays[vi.name].ndim > 0:
                    cmd += ["--shape", vi.name + "=" + "x".join(str(s) for s in arrays[vi.name].shape)]
            for o in outputs:
                cmd += ["--keep-output", o]
            try:
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            except subprocess.TimeoutExpired:
                return "compile error", "megatrain-compile timed out (120 s)"
            if r.returncode != 0:
                msg = first_line(r.stderr or r.stdout).replace(tmp + "/", "")
                return "compile error", msg
        while True:
            r, dumps = run_plan(bindir, plan, wrapped, arrays, outputs, tmp, k)
            if r is None:
                return "run error", "megatrain-run timed out (120 s)"
            # An input the computation does not read (Dropout's ratio in inference mode) is
            # not in the plan: feed the others.
            m = re.search(r"--input (\S+): the plan has no input named", r.stderr)
            if r.returncode != 0 and m and m.group(1) in arrays:
                del arrays[m.group(1)]
                continue
            break
        if r.returncode != 0:
            return "run error", first_line(r.stderr or r.stdout).replace(tmp + "/", "")
        for o, p, want in zip(outputs, dumps, expected):
            got = np.load(p)
            if got.shape != want.shape:
                return "fail", f"output '{o}': shape {list(got.shape)}, expected {list(want.shape)}"
            if want.dtype.kind in "fc":
                g64, w64 = got.astype(np.float64), want.astype(np.float64)
                if not np.allclose(g64, w64, rtol=RTOL, atol=ATOL, equal_nan=True):
                    diff = np.abs(g64 - w64)
                    diff = diff[~(np.isnan(g64) & np.isnan(w64))]
                    err = float(np.nanmax(diff)) if diff.size else float("nan")
                    if np.isnan(diff).any():
                        return "fail", f"output '{o}': NaN where a number is expected (or the reverse); max abs err {err:.3g}"
                    return "fail", f"output '{o}': max abs err {err:.3g}"
            else:
                if not np.array_equal(got.astype(want.dtype), want):
                    n = int(np.sum(got.astype(want.dtype) != want))
                    return "fail", f"output '{o}': {n} of {want.size} elements differ"
    return "pass", ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True, help="the build's bin directory")
    ap.add_argument("--out", required=True, help="RESULTS.md to write")
    ap.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), f"megatrain-onnx-node-{onnx.__version__}"),
                    help="where to generate the node test data if the onnx wheel lacks it")
    ap.add_argument("--filter", default="", help="only tests whose name contains this")
    args = ap.parse_args()
    bindir = os.path.abspath(args.bin)
    root, origin = node_dir(args.cache)
    rows = []
    for name in sorted(os.listdir(root)):
        if args.filter and args.filter not in name:
            continue
        test = os.path.join(root, name)
        mpath = os.path.join(test, "model.onnx")
        if not os.path.exists(mpath):
            continue
        model = onnx.load(mpath)
        nodes = model.graph.node
        if any(n.domain not in ("", "ai.onnx") for n in nodes):
            continue
        ops = [n.op_type for n in nodes]
        if not ops or not all(o in SUPPORTED for o in ops):
            continue
        shown = sorted(set(o for o in ops if o != "Constant")) or ["Constant"]
        with tempfile.TemporaryDirectory() as tmp:
            try:
                result, reason = run_test(test, bindir, tmp)
            except Exception as e:  # noqa: BLE001
                result, reason = "run error", f"harness: {first_line(str(e))}"
        rows.append((name, ", ".join(shown), result, reason))
        print(f"{result:13s} {name}  {reason}", flush=True)
    passed = sum(r[2] == "pass" for r in rows)
    counts = {k: sum(r[2] == k for r in rows) for k in ("fail", "compile error", "run error")}
    summary = (f"{len(rows)} tests of supported ops; {passed} passed / {len(rows) - passed} failed "
               f"({counts['fail']} wrong numbers, {counts['compile error']} compile errors, "
               f"{counts['run error']} run errors)")
    with open(args.out, "w") as f:
        f.write("# ONNX backend node tests: conformance of the importer and the CPU backend\n\n")
        f.write(f"onnx {onnx.__version__}, node tests (data {origin}) whose ops are all "
                "in the supported list of docs/frontends.md; forward on the CPU backend; outputs "
                f"compared with np.allclose(rtol={RTOL:g}, atol={ATOL:g}, equal_nan=True), exact for "
                "integer and bool outputs. Generated by `python3 tests/conformance/run_node_tests.py "
                "--bin build/bin --out tests/conformance/RESULTS.md` (see the script's docstring for "
                "how the forward pass is run through a training step).\n\n")
        f.write(f"**{summary}**\n\n")
        causes = {}
        for _, _, result, reason in rows:
            if result != "pass":
                key = re.sub(r"'[^']*'", "'...'", re.sub(r"^megatrain-\w+: error: ", "", reason))
                key = re.sub(r"^#\d+ \(model.onnx\): ", "", key)
                key = re.sub(r"max abs err \S+", "max abs err ...", key)
                key = re.sub(r"\[[^\]]*\]", "[...]", key)
                key = re.sub(r"opset \d+ of domain", "opset N of domain", key)
                key = re.sub(r"--shape \S+", "--shape ...", key)
                causes[(result, key)] = causes.get((result, key), 0) + 1
        f.write("Failures by cause (names and numbers elided):\n\n| count | result | cause |\n"
                "| --- | --- | --- |\n")
        for (result, key), n in sorted(causes.items(), key=lambda kv: (-kv[1], kv[0])):
            f.write(f"| {n} | {result} | {key.replace('|', chr(92) + '|')} |\n")
        f.write("\n## All tests\n\n")
        f.write("| test | op | result | reason |\n| --- | --- | --- | --- |\n")
        for name, op, result, reason in rows:
            reason = reason.replace("|", "\\|")
            f.write(f"| {name} | {op} | {result} | {reason} |\n")
    print(summary)


if __name__ == "__main__":
    sys.exit(main())

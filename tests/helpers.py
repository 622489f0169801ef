"""Helpers shared by tests: small ONNX models quantized by ONNX Runtime, and
running tessera's SCons build in a scratch output directory."""

import os
import re
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# the reference kernels pulp_nn's row-wise kernels (rowwise.c) hand the rows
# they do not cover to: a test compiling kernels/pulp_nn/*.c alone adds them,
# as a build compiles the library's fallback in
PNN_FALLBACK = [os.path.join(ROOT, "kernels", "reference", f) for f in ("attention.c", "elementwise.c")]
MODEL_CACHE = os.path.join(ROOT, "generated", ".models")


def scons(*args, out, check=False, timeout=3600, env=None):
    """Run tessera's SCons with out=<out>; returns CompletedProcess (text)."""
    cmd = [sys.executable, "-m", "SCons", "-C", ROOT, f"out={out}", *args]
    run_env = dict(os.environ, TESSERA_MODEL_CACHE=MODEL_CACHE, **(env or {}))
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=run_env)
    if check and res.returncode != 0:
        raise AssertionError(f"scons {' '.join(args)} failed ({res.returncode}):\n{res.stdout[-4000:]}\n{res.stderr[-4000:]}")
    return res


def build_tree(out):
    """{relative path: bytes} of a build tree, without SCons' signature
    database (it records the history of builds, not their outputs)."""
    files = {}
    for d, _, names in os.walk(out):
        for n in names:
            if n.startswith(".sconsign"):
                continue
            p = os.path.join(d, n)
            with open(p, "rb") as f:
                files[os.path.relpath(p, out)] = f.read()
    return files


def step_lines(text):
    """The lines of the build steps that ran (`tessera: <step> ...`), not the
    verdict every build ends with (a no-op one too)."""
    return re.findall(r"^tessera: (?!PASS |FAIL ).*$", text, re.M)


def hal_lines(text):
    """A HAL self-test's output (tests/c/*_hal_test.c, hal_cluster_test.c)
    as {check: [values]}, from its `HAL <check> <values>` lines."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"HAL (\S+)\s*(.*)", line.strip())
        if m:
            out[m.group(1)] = m.group(2).split()
    return out


def chain_graph(op, hw, c, k, s, pad, co, rq):
    """x -> pointwise -> m -> `op` (kernel k, stride s, pad) -> y, square
    tensors, rq(channels) each layer's requantization: m is consumed by the
    layer under test alone, so it may run in place or be overlapped (x, the
    network's input, never is)."""
    from tessera.ir import Graph, Layer, Tensor

    ho = (hw + pad[0] + pad[2] - k) // s + 1
    co = c if op == "depthwise" else co
    tensors = {"x": Tensor("x", [hw, hw, c]), "m": Tensor("m", [hw, hw, c]), "y": Tensor("y", [ho, ho, co])}
    layers = [Layer("l0", "pointwise", ["x"], "m", input_offset=0, weights="l0.w", bias="l0.b", requant=rq(c)),
              Layer("l1", op, ["m"], "y", kernel=[k, k], stride=[s, s], pad=list(pad), input_offset=0,
                    weights="l1.w", bias="l1.b", requant=rq(co))]
    return Graph("g", "test", tensors, layers, ["x"], ["y"])


def one_error(res):
    """The single `tessera: error:` line of a failed command (asserting the
    rules: non-zero exit, one line, no traceback)."""
    lines = [l for l in res.stderr.splitlines() if l.startswith("tessera: error:")]
    assert res.returncode != 0
    assert len(lines) == 1, res.stderr
    assert "Traceback" not in res.stderr + res.stdout
    return lines[0]


def plant_golden_error(netdir, layer_index, hwc):
    """Change one element of a layer's golden output, as a golden-model bug
    would (the preparation's stamp is updated too, or the build would see a
    damaged file and make it again): the check step must catch and name it.
    Returns the layer's IR entry."""
    import json

    from tessera.util import canon

    golden = canon.load_npz(str(netdir / "golden.npz"))
    layer = json.loads((netdir / "graph.json").read_text())["layers"][layer_index]
    arr = golden[layer["output"]].copy()
    arr[hwc] = arr[hwc] + 1 if arr[hwc] < 127 else arr[hwc] - 1
    golden[layer["output"]] = arr
    canon.save_npz(str(netdir / "golden.npz"), golden)
    stamp = canon.read_json(str(netdir / ".prepare.json"))
    stamp["golden_outputs"]["golden.npz"] = canon.file_digest(str(netdir / "golden.npz"))
    canon.write_json(str(netdir / ".prepare.json"), stamp)
    return layer


def report(out, target, model):
    """A build's report.json."""
    import json

    with open(os.path.join(out, target, model, "report.json")) as f:
        return json.load(f)


def float_model(nodes, inits, in_shape, out_shape, opset=13):
    """A float ONNX model from nodes and {name: array} initializers."""
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        nodes, "test",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, in_shape)],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, out_shape)],
        [numpy_helper.from_array(np.asarray(v, dtype=np.float32), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def quantize(model, path, fmt="qdq", activation="int8", seed=0, samples=8, per_channel=True,
             input_scale=1.0, every_op=False, extra_options=None):
    """Quantize a float model with ONNX Runtime static quantization,
    calibrated on seeded normal inputs times input_scale; every_op: every op
    type of the graph quantized (ORT's default list leaves some float)."""
    import onnx
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_static)

    src = str(path) + ".float.onnx"
    onnx.save(model, src)
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    rng = np.random.default_rng(seed)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.left = samples

        def get_next(self):
            if self.left == 0:
                return None
            self.left -= 1
            return {"input": (rng.standard_normal(shape) * input_scale).astype(np.float32)}

    qtype = QuantType.QInt8 if activation == "int8" else QuantType.QUInt8
    ops = {"op_types_to_quantize": sorted({n.op_type for n in model.graph.node})} if every_op else {}
    quantize_static(src, str(path), Reader(),
                    quant_format=QuantFormat.QDQ if fmt == "qdq" else QuantFormat.QOperator,
                    per_channel=per_channel, activation_type=qtype, weight_type=QuantType.QInt8,
                    extra_options=extra_options or {}, **ops)
    return str(path)

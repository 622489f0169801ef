"""tessera's fuzzer: structure-aware mutants of every input format through
the entry points a build runs, each result classified.

    nice -n 10 .venv/bin/python tools/fuzz.py --count 5000 --build-every 100 --out /tmp/fuzz

Formats and their seeds (a seed tessera does not take is dropped, named):
  qdq        the bundled tiny network (ONNX Runtime's static QDQ quantization)
  qoperator  the same float network quantized to QLinear* ops; ONNX's own qlinearconv test model
  dory       DORY's graphs with their reference files (../shared/peer_tests/dory)
  deeploy    Deeploy's kernel and model tests with their .npz references (../shared/peer_tests/deeploy)
  tflite     converted int8 models (tests/data/tflite, ../shared/mlperf_tiny, ../shared/public_models)
  yaml       target and model YAML files (targets/, models/tiny.yaml)

Mutations know each format's structure: ONNX types, shapes, attributes,
initializer data, names (dangling, doubled, not UTF-8, or renamed
everywhere to text with C's and YAML's special characters), opsets, nodes;
TFLite tensor types, shapes, buffers, quantization, operator inputs,
opcodes, options; YAML values retyped, keys dropped, renamed or added;
and for every format truncations and byte flips.

Each mutant runs in a worker process, as a build reads SConstruct:
config.load_model, prepare.prepare (import, the validity gates, the golden
model, the comparison with ONNX Runtime / the TFLite interpreter / the
reference files), the weight fit and every layer's tiler view. A mutant
tessera accepts is then given to its runtime directly (a model ONNX
Runtime or the TFLite interpreter refuses must not be accepted), and every
`--build-every`-th one is built for `host` (scons, -j1) and must pass
bit-exact. Classes:

  clean error     one line naming the file (TesseraError), or a failed build's one line
  accepted        imported, equal to its runtime / reference
  built           accepted and its host firmware built and passed
  wrong success   accepted although its runtime refuses it, or a build that passed what differs
  traceback       any other exception (or a crashed worker)
  hang            past --timeout (import) or --build-timeout
  bad message     a TesseraError of more than one line or not naming the file

Every mutant is a function of (--seed, its index): `--only I` reruns one.
Findings (everything but clean error, accepted and built) are kept under
--out/findings/<format>-<index>/ with the traceback.
"""

import argparse
import json
import math
import multiprocessing
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import time
import traceback
from collections import Counter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.normpath(os.path.join(ROOT, "..", "shared"))
sys.path.insert(0, os.path.join(ROOT, "site_scons"))
sys.path.insert(0, os.path.join(ROOT, "tests"))   # tflite_edit: the in-place flatbuffer editor the corpus uses

FORMATS = ("qdq", "qoperator", "dory", "deeploy", "tflite", "yaml")
CLASSES = ("clean error", "accepted", "built", "wrong success", "traceback", "hang", "bad message")
FINDINGS = ("wrong success", "traceback", "hang", "bad message")
HOST = os.path.join(ROOT, "targets", "host.yaml")

ODD_NUMBERS = [math.nan, math.inf, -math.inf, 0.0, -1.0, 0.5, 1e30, 2.0 ** 31, -2.0 ** 40, 255.0, 3.0]
ODD_INTS = [-1, 0, 1, 2, 3, 7, 1000, 1 << 20, 1 << 31, -(1 << 31), (1 << 62)]
# characters that mean something in C, YAML, JSON, shells or terminals
ODD_TEXT = ["*/", "/*", "\"", "'", "\n", "#", "\\", "\u00e9\u4e2d", "$(x)", "%s", "\x00", " ", "..", "/", ""]


class Seed:
    """A model tessera takes: its files ({relative path: bytes}) and the
    model YAML that names them; `main` is the file mutated."""

    def __init__(self, fmt, name, files, model_text, main):
        self.fmt, self.name, self.files, self.model_text, self.main = fmt, name, files, model_text, main


# ---- seeds ---------------------------------------------------------------------

def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _folder_refs(folder, prefix="ref/"):
    return {prefix + f: _read(os.path.join(folder, f)) for f in sorted(os.listdir(folder))
            if f.endswith((".txt", ".npz")) and f != "activations.npz"}


def _qoperator_tiny(cache):
    """The tiny network's float graph quantized to QLinear* ops by ONNX Runtime."""
    import onnx
    from onnxruntime.quantization import (CalibrationMethod, QuantFormat, QuantType, quantize_static)
    from tessera import zoo
    from tessera.zoo.quantize import RandomDataReader
    path = os.path.join(cache, "tiny-qoperator.onnx")
    if not os.path.exists(path):
        float_model = zoo.build_float_model({"arch": "tiny", "resolution": 16, "channels": 3, "classes": 10, "seed": 0})
        src = path + ".float.onnx"
        onnx.save(float_model, src)
        quantize_static(src, path, RandomDataReader([1, 3, 16, 16], 8, 0), quant_format=QuantFormat.QOperator,
                        per_channel=True, activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                        calibrate_method=CalibrationMethod.MinMax)
        os.remove(src)
    return _read(path)


def seeds(cache):
    """{format: [Seed]} of every seed found."""
    from tessera import config
    from tessera.model import prepare
    out = {f: [] for f in FORMATS}
    onnx_yaml = "description: fuzz\nonnx: net.onnx\n"
    tiny = config.load_model(os.path.join(ROOT, "models", "tiny.yaml"), "tiny")
    out["qdq"].append(Seed("qdq", "tiny", {"net.onnx": _read(prepare.model_onnx(tiny, cache, log=lambda l: None))},
                           onnx_yaml, "net.onnx"))
    out["qoperator"].append(Seed("qoperator", "tiny", {"net.onnx": _qoperator_tiny(cache)}, onnx_yaml, "net.onnx"))
    qlc = os.path.join(SHARED, "public_models", "onnx_backend", "qlinearconv_model.onnx")
    if os.path.exists(qlc):
        out["qoperator"].append(Seed("qoperator", "qlinearconv", {"net.onnx": _read(qlc)}, onnx_yaml, "net.onnx"))
    for name in ("Residual_connection_test_1",):
        folder = os.path.join(SHARED, "peer_tests", "dory", name)
        if os.path.isdir(folder):
            out["dory"].append(Seed("dory", name, {"net.onnx": _read(os.path.join(folder, "model_int.onnx")),
                                                   **_folder_refs(folder)},
                                    onnx_yaml + "reference: {kind: dory, dir: ref}\n", "net.onnx"))
    for rel in ("Kernels/Integer/Conv/Regular_2D_RQ", "Kernels/Integer/GEMM/Regular_RQPerRow",
                "Kernels/Integer/Add/Regular_RQ", "Models/miniMobileNet"):
        folder = os.path.join(SHARED, "peer_tests", "deeploy", rel)
        if os.path.isdir(folder):
            out["deeploy"].append(Seed("deeploy", rel, {"net.onnx": _read(os.path.join(folder, "network.onnx")),
                                                        **_folder_refs(folder)},
                                       onnx_yaml + "reference: {kind: deeploy, dir: ref}\n", "net.onnx"))
    tflites = [os.path.join(ROOT, "tests", "data", "tflite", n + ".tflite") for n in ("residual", "convs", "issue10_ops")]
    tflites += [os.path.join(SHARED, "mlperf_tiny", "kws_ref_model.tflite"),
                os.path.join(SHARED, "public_models", "tflm", "hello_world_int8.tflite"),
                os.path.join(SHARED, "public_models", "tvm_web_data", "mnist_model_quant.tflite")]
    for path in tflites:
        if os.path.exists(path):
            out["tflite"].append(Seed("tflite", os.path.basename(path), {"net.tflite": _read(path)},
                                      "description: fuzz\ntflite: net.tflite\n", "net.tflite"))
    for name in ("host", "gap8", "stm32h7"):
        out["yaml"].append(Seed("yaml", f"target {name}", {"t.yaml": _read(os.path.join(ROOT, "targets", name + ".yaml"))},
                                None, "t.yaml"))
    out["yaml"].append(Seed("yaml", "model tiny", {"m.yaml": _read(os.path.join(ROOT, "models", "tiny.yaml"))},
                            None, "m.yaml"))
    return out


# ---- byte mutations ------------------------------------------------------------

def flip(data, rng):
    data = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        data[rng.randrange(len(data))] ^= rng.randint(1, 255)
    return bytes(data)


def truncate(data, rng):
    return data[:rng.randrange(len(data))]


def _bytes_mutation(data, rng, structured):
    """(kind, bytes) of a byte flip or a truncation, one draw in
    `structured` + 2; None for a structure-aware mutation instead."""
    how = rng.choice(["structure"] * structured + ["flip", "truncate"])
    if how == "flip":
        return "byte flip", flip(data, rng)
    if how == "truncate":
        return "truncation", truncate(data, rng)
    return None


# ---- ONNX ------------------------------------------------------------------------

def _set_attr(node, attr):
    for a in list(node.attribute):
        if a.name == attr.name:
            node.attribute.remove(a)
    node.attribute.append(attr)


def _rename_everywhere(m, old, new):
    g = m.graph
    for node in g.node:
        for field in (node.input, node.output):
            for i, t in enumerate(field):
                if t == old:
                    field[i] = new
    for coll in (g.input, g.output, g.value_info, g.initializer):
        for x in coll:
            if x.name == old:
                x.name = new


def onnx_mutant(data, rng):
    """(kind, bytes): one structure-aware mutation of an ONNX model."""
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper
    damaged = _bytes_mutation(data, rng, 8)
    if damaged:
        return damaged
    m = onnx.load_from_string(data)
    g = m.graph
    node = rng.choice(list(g.node))
    inits = list(g.initializer)
    init = rng.choice(inits) if inits else None
    kind = rng.choice(["type: initializer", "type: graph input", "type: cast", "shape: initializer dims",
                       "shape: graph input", "shape: huge input", "shape: huge initializer", "attribute: value",
                       "attribute: drop", "attribute: auto_pad", "buffer: short raw_data", "buffer: long raw_data",
                       "buffer: resize", "buffer: odd value", "name: dangling", "name: two producers",
                       "name: not UTF-8", "name: special characters", "graph: opset", "graph: ir_version",
                       "graph: op type", "graph: drop node", "graph: swap inputs", "graph: duplicate node",
                       "graph: external data"])
    if kind == "type: initializer" and init is not None:
        init.data_type = rng.choice([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 16, 40])
    elif kind == "type: graph input":
        g.input[0].type.tensor_type.elem_type = rng.choice([0, 2, 3, 6, 7, 8, 9, 10, 11, 16])
    elif kind == "type: cast":
        casts = [n for n in g.node if n.op_type == "Cast"] or [node]
        _set_attr(rng.choice(casts), helper.make_attribute("to", rng.choice([0, 1, 2, 3, 6, 7, 8, 9, 10, 16, 99])))
    elif kind == "shape: initializer dims" and init is not None and len(init.dims):
        init.dims[rng.randrange(len(init.dims))] = rng.choice([-2, -1, 0, 1, 2, 3, 64])
    elif kind == "shape: graph input":
        dims = g.input[0].type.tensor_type.shape.dim
        if len(dims):
            dims[rng.randrange(len(dims))].dim_value = rng.choice([-1, 0, 1, 2, 5, 17, 1000])
    elif kind == "shape: huge input":   # a memory bomb: no data, only a declared size
        dims = g.input[0].type.tensor_type.shape.dim
        for d in dims[1:]:
            d.dim_value = rng.choice([1 << 14, 1 << 16, 1 << 20])
    elif kind == "shape: huge initializer" and init is not None:
        del init.dims[:]
        init.dims.extend([1 << 20, 1 << 20, rng.choice([1, 1 << 10])])
        init.ClearField("raw_data")
    elif kind == "attribute: value":
        attrs = [(n, a) for n in g.node for a in n.attribute] or [(node, None)]
        n, a = rng.choice(attrs)
        name = a.name if a is not None else rng.choice(["alpha", "axis", "pads", "div"])
        value = rng.choice([rng.choice(ODD_NUMBERS), rng.choice(ODD_INTS), rng.choice(ODD_TEXT).encode("utf-8"),
                            [rng.choice(ODD_INTS) for _ in range(rng.randint(0, 6))],
                            [rng.choice(ODD_NUMBERS) for _ in range(rng.randint(1, 3))]])
        _set_attr(n, helper.make_attribute(name, value, attr_type=onnx.AttributeProto.INTS if value == [] else None))
    elif kind == "attribute: drop" and node.attribute:
        node.attribute.remove(rng.choice(list(node.attribute)))
    elif kind == "attribute: auto_pad":
        convs = [n for n in g.node if n.op_type in ("Conv", "MaxPool", "AveragePool", "QLinearConv")] or [node]
        _set_attr(rng.choice(convs), helper.make_attribute("auto_pad", rng.choice(["SAME_UPPER", "SAME_LOWER",
                                                                                    "VALID", "NOTSET", "BOGUS"])))
    elif kind.startswith("buffer") and init is not None:
        try:
            arr = numpy_helper.to_array(init)
        except Exception:
            arr = None
        if arr is not None:
            flat = arr.reshape(-1).copy()
            if kind == "buffer: resize":
                flat = np.resize(flat, rng.randint(0, flat.size + 3))
                init.CopyFrom(numpy_helper.from_array(flat, init.name))
            elif kind == "buffer: odd value" and flat.size:
                v = rng.choice(ODD_NUMBERS)
                if flat.dtype.kind in "iu":
                    info = np.iinfo(flat.dtype)
                    v = int(min(max(v, info.min), info.max)) if math.isfinite(v) else info.max
                flat[rng.randrange(flat.size)] = v
                init.CopyFrom(numpy_helper.from_array(flat.reshape(arr.shape), init.name))
            else:
                init.CopyFrom(numpy_helper.from_array(arr, init.name))
                raw = init.raw_data
                init.raw_data = raw[:rng.randrange(max(len(raw), 1))] if kind.endswith("short raw_data") \
                    else raw + bytes(rng.randint(1, 9))
    elif kind == "name: dangling" and node.input:
        node.input[rng.randrange(len(node.input))] = rng.choice(["missing", "", node.name or "x"])
    elif kind == "name: two producers":
        other = rng.choice(list(g.node))
        if other is not node and other.output and node.output:
            node.output[0] = other.output[0]
    elif kind == "name: special characters":
        # renamed consistently: the model means the same, so it must build the same
        tensors = sorted({t for n in g.node for t in n.output if t})
        if tensors:
            old = rng.choice(tensors)
            _rename_everywhere(m, old, old + "".join(rng.choice(ODD_TEXT[:-1]) for _ in range(3)))
        node.name = "n" + "".join(rng.choice(ODD_TEXT[:-1]) for _ in range(4))
    elif kind == "graph: opset":
        next(o for o in m.opset_import if o.domain in ("", "ai.onnx")).version = rng.choice([1, 6, 7, 10, 13, 21, 27, 99])
    elif kind == "graph: ir_version":
        m.ir_version = rng.choice([0, 1, 2, 3, 7, 13, 14, 99])
    elif kind == "graph: op type":
        node.op_type = rng.choice(["Conv", "Relu", "Clip", "Add", "Mul", "Div", "Floor", "QuantizeLinear",
                                   "DequantizeLinear", "QLinearConv", "RequantShift", "MaxPool", "Gemm", "Nope", ""])
    elif kind == "graph: drop node":
        g.node.remove(node)
    elif kind == "graph: swap inputs" and len(node.input) > 1:
        a, b = rng.randrange(len(node.input)), rng.randrange(len(node.input))
        node.input[a], node.input[b] = node.input[b], node.input[a]
    elif kind == "graph: duplicate node":
        copy = g.node.add()
        copy.CopyFrom(node)
        copy.name += "_again"
    elif kind == "graph: external data" and init is not None:
        # the initializer's bytes said to be in a file beside the model (missing, or here but short)
        init.data_location = onnx.TensorProto.EXTERNAL
        del init.external_data[:]
        for k, v in (("location", rng.choice(["weights.bin", "../outside.bin", "/etc/passwd", ""])),
                     ("offset", str(rng.choice([0, 4, 1 << 40]))), ("length", str(rng.choice([1, 16, 1 << 40])))):
            e = init.external_data.add()
            e.key, e.value = k, v
        init.ClearField("raw_data")
    out = m.SerializeToString()
    if kind == "name: not UTF-8" and node.name:
        out = out.replace(node.name.encode(), b"\xff" + node.name.encode()[1:], 1)
    return kind, out


def reference_mutant(files, rng):
    """(kind, files) with one reference file damaged."""
    name = rng.choice(sorted(k for k in files if k.startswith("ref/")))
    how = rng.choice(["flip", "truncate", "missing"])
    if how == "missing":
        return "reference: missing", {**files, name: None}
    return f"reference: {how}", {**files, name: (flip if how == "flip" else truncate)(files[name], rng)}


# ---- TFLite ----------------------------------------------------------------------

def tflite_mutant(data, rng):
    """(kind, bytes): one mutation of a .tflite flatbuffer, in place (every
    offset stays valid, one field is wrong) or of its bytes."""
    from tflite_edit import CONV_ACTIVATION, CONV_PADDING, CONV_STRIDE_H, CONV_STRIDE_W, Flatbuffer
    how = rng.choice(["field"] * 6 + ["flip", "truncate", "length"])
    if how == "flip":
        return "byte flip", flip(data, rng)
    if how == "truncate":
        return "truncation", truncate(data, rng)
    f = Flatbuffer(data)
    n_t, n_op = f.sg.TensorsLength(), f.sg.OperatorsLength()
    t, op = rng.randrange(n_t), rng.randrange(n_op)
    if how == "length":   # a vector's length past the buffer's end: buffer bounds
        kind = "buffer bounds: vector length"
        try:
            pos, _ = f._vector(f.sg.Tensors(t), 4)
            f.put(pos - 4, "I", rng.choice([1 << 20, (1 << 32) - 1, len(data)]))
        except KeyError:
            pass
        return kind, f.bytes()
    kind = rng.choice(["type", "shape", "huge shape", "scale", "zero point", "no scales", "buffer index",
                       "operator input", "conv option", "opcode", "opcode version", "buffer data"])
    try:
        if kind == "type":
            f.tensor_type(t, rng.choice([0, 1, 2, 3, 4, 6, 7, 9, 10, 16, 17, 99, -1]))
        elif kind in ("shape", "huge shape"):
            k = rng.randrange(max(1, f.sg.Tensors(t).ShapeLength()))
            f.shape_dim(t, k, rng.choice([-1, 0, 1, 2, 3, 7, 13]) if kind == "shape" else rng.choice([1 << 20, 1 << 30]))
        elif kind == "scale":
            q = f.sg.Tensors(t).Quantization()
            f.scale(t, rng.choice(ODD_NUMBERS + [1e-30, 1e-3]), rng.randrange(max(1, q.ScaleLength() if q else 1)))
        elif kind == "zero point":
            f.zero_point(t, rng.choice([-129, -128, 1, 127, 128, 300, 1 << 40]))
        elif kind == "no scales":
            f.drop_scales(t)
        elif kind == "buffer index":
            f.tensor_buffer(t, rng.choice([0, 1, 2, 5, 999, (1 << 32) - 1]))
        elif kind == "operator input":
            n_in = f.sg.Operators(op).InputsLength()
            f.op_input(op, rng.randrange(max(1, n_in)), rng.choice([-1, 0, 1, t, n_t, 1 << 30]))
        elif kind == "conv option":
            convs = [i for i in range(n_op) if f.sg.Operators(i).BuiltinOptionsType() == 1]
            if convs:
                slot, fmt, values = rng.choice([(CONV_STRIDE_H, "i", [0, -1, 2, 3, 1 << 20]),
                                                (CONV_STRIDE_W, "i", [0, -1, 2, 5]), (CONV_PADDING, "b", [0, 1, 2, 9]),
                                                (CONV_ACTIVATION, "b", [0, 1, 2, 3, 4, 5, 6, 99])])
                f.conv_option(rng.choice(convs), slot, fmt, rng.choice(values))
        elif kind == "opcode":
            f.opcode_builtin(rng.randrange(f.model.OperatorCodesLength()),
                             rng.choice([0, 1, 3, 4, 9, 14, 17, 22, 25, 34, 39, 114, 999]))
        elif kind == "opcode version":   # an operator version the kernels may lack
            f.opcode_version(rng.randrange(f.model.OperatorCodesLength()), rng.choice([0, 2, 7, 99, -1]))
        elif kind == "buffer data":   # a constant's bytes (weights, bias) changed
            for _ in range(8):
                b = f.model.Buffers(rng.randrange(f.model.BuffersLength()))
                if b.DataLength():
                    pos, n = f._vector(b, 4)
                    f.put(pos + rng.randrange(n), "B", rng.randrange(256))
                    break
    except (KeyError, AttributeError, struct.error):
        pass   # a field left at its default has no bytes to change
    return kind, f.bytes()


# ---- YAML --------------------------------------------------------------------------

def _yaml_paths(tree, prefix=()):
    yield prefix
    if isinstance(tree, dict):
        for k, v in tree.items():
            yield from _yaml_paths(v, prefix + (k,))
    elif isinstance(tree, list):
        for i, v in enumerate(tree):
            yield from _yaml_paths(v, prefix + (i,))


def yaml_mutant(data, rng):
    """(kind, bytes): a value retyped, a key dropped, renamed or added (the
    document parsed and written back), or the text cut or flipped."""
    import yaml
    damaged = _bytes_mutation(data, rng, 6)
    if damaged:
        return damaged
    tree = yaml.safe_load(data)
    paths = [p for p in _yaml_paths(tree) if p]
    path = rng.choice(paths)
    parent = tree
    for k in path[:-1]:
        parent = parent[k]
    key = path[-1]
    kind = rng.choice(["value", "value", "drop", "rename", "add"])
    if kind == "value":
        parent[key] = rng.choice([None, True, "", "x" * 3, -1, 0, 1 << 40, 1e300, math.nan, math.inf, [], {},
                                  [1, 2], {"a": 1}, rng.choice(ODD_TEXT), 0.5, "18446744073709551616"])
    elif kind == "drop":
        del parent[key]
    elif kind == "rename" and isinstance(parent, dict):
        parent[str(key) + rng.choice(["_", "X", " "])] = parent.pop(key)
    elif kind == "add" and isinstance(parent, dict):
        parent[rng.choice(["bogus", "size", "kind", "cores", "onnx"])] = rng.choice([1, "x", None, [1]])
    return f"yaml: {kind}", yaml.safe_dump(tree, allow_unicode=True).encode("utf-8")


# ---- making a mutant ---------------------------------------------------------------

def make(seed_sets, fmt, seed, index):
    """(seed, kind, files) of mutant `index`: a function of (seed, index)."""
    rng = random.Random(f"{seed}:{index}")
    base = rng.choice(seed_sets[fmt])
    files = dict(base.files)
    if fmt == "yaml":
        kind, files[base.main] = yaml_mutant(files[base.main], rng)
    elif fmt == "tflite":
        kind, files[base.main] = tflite_mutant(files[base.main], rng)
    elif any(k.startswith("ref/") for k in files) and rng.random() < 0.15:
        kind, files = reference_mutant(files, rng)
    else:
        kind, files[base.main] = onnx_mutant(files[base.main], rng)
    return base, kind, files


def write_case(folder, base, files):
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(os.path.join(folder, "ref"))
    for name, data in files.items():
        if data is not None:
            with open(os.path.join(folder, name), "wb") as f:
                f.write(data)
    if base.model_text:
        with open(os.path.join(folder, "m.yaml"), "w") as f:
            f.write(base.model_text)


# ---- running one mutant (in the worker) ----------------------------------------------

def _one_line(err, folder):
    msg = str(err)
    from tessera.errors import MAX_MESSAGE
    return "\n" not in msg and len(msg) <= MAX_MESSAGE and (folder in msg or (err.where or "").startswith("m"))


def _runtime_refusal(fmt, folder, main):
    """The runtime's own verdict on an accepted mutant: None, or why it refuses."""
    path = os.path.join(folder, main)
    if fmt == "tflite":
        return _tflite_refuses(path)
    if fmt in ("qdq", "qoperator", "dory"):
        return _ort_refuses(path)
    return None   # Deeploy's custom operators: no runtime runs them; the reference files judged it


_LITERT = """
import sys, numpy as np
from ai_edge_litert.interpreter import Interpreter
interp = Interpreter(model_path=sys.argv[1])
interp.allocate_tensors()
for d in interp.get_input_details():
    interp.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
interp.invoke()
"""


def _tflite_refuses(path):
    """The TFLite interpreter's own verdict, in a process of its own (it
    aborts on some models): load, allocate, run once on zeros."""
    try:
        res = subprocess.run([sys.executable, "-c", _LITERT, path], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return "the interpreter did not finish in 120 s"
    if res.returncode != 0:
        return ((res.stderr.strip().splitlines() or [f"exit {res.returncode}"])[-1])[:300]
    return None


def _ort_refuses(path):
    """ONNX Runtime's own verdict, asked here rather than through tessera's
    gate (which it checks): load the file, run it once on zeros."""
    import numpy as np
    import onnxruntime as ort
    types = {"tensor(float)": np.float32, "tensor(int8)": np.int8, "tensor(uint8)": np.uint8,
             "tensor(int32)": np.int32}
    opts = ort.SessionOptions()
    opts.log_severity_level = 4
    try:
        session = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
        feeds = {}
        for i in session.get_inputs():
            if i.type not in types:
                return f"input {i.name!r} of type {i.type}"
            feeds[i.name] = np.zeros([d if isinstance(d, int) and d > 0 else 1 for d in i.shape], types[i.type])
        session.run(None, feeds)
    except Exception as err:
        return (str(err).strip().splitlines() or [type(err).__name__])[0][:300]
    return None


def run_import(fmt, folder, main):
    """(class, detail) of one mutant through what a build reads."""
    from tessera import config
    from tessera.config import views
    from tessera.errors import TesseraError
    from tessera.ir import Graph
    from tessera.model import prepare
    from tessera.planning import memplan
    from tessera.util import canon
    try:
        if fmt == "yaml":
            if main == "t.yaml":
                t = config.load_target(os.path.join(folder, main), "mutant")
                views.kernel_library(t["kernels"])
                views.memory_target(t)
            else:
                config.load_model(os.path.join(folder, main), "mutant")
            return "accepted", ""
        model = config.load_model(os.path.join(folder, "m.yaml"), "m")
        paths = prepare.prepare(model, os.path.join(folder, "out"), os.path.join(folder, "..", "cache"),
                                log=lambda line: None)
        graph = Graph.from_json(canon.read_json(paths["graph"]))
        memplan.check_weights(graph, views.memory_target(config.load_target(HOST, "host")), "")
        for layer in graph.layers:
            views.tiler_layer(layer, graph)
    except TesseraError as err:
        if not _one_line(err, folder):
            return "bad message", str(err)[:2000]
        return "clean error", str(err).split(": ", 2)[-1][:60]
    refusal = _runtime_refusal(fmt, folder, main)
    if refusal:
        return "wrong success", f"accepted, but its runtime refuses it: {refusal}"
    return "accepted", ""


# a worker's address space: a memory bomb that gets past the gates fails an
# allocation here (a finding) instead of taking the machine's memory
WORKER_MEMORY = 8 << 30
# mutants per worker: a fresh process now and then keeps what the libraries cache small
RECYCLE = 200


def worker(conn):
    import resource
    os.setsid()   # the parent ends a hung mutant's whole process group (builds included)
    resource.setrlimit(resource.RLIMIT_AS, (WORKER_MEMORY, WORKER_MEMORY))
    import warnings
    warnings.simplefilter("ignore")
    while True:
        job = conn.recv()
        if job is None:
            return
        try:
            result = run_import(*job)
        except BaseException:
            result = ("traceback", traceback.format_exc()[-3000:])
        conn.send(result)


class Worker:
    def __init__(self):
        ctx = multiprocessing.get_context("fork")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=worker, args=(child,), daemon=True)
        self.proc.start()

    def run(self, job, timeout):
        self.conn.send(job)
        if not self.conn.poll(timeout):
            self.kill()
            return "hang", f"no verdict in {timeout} s"
        try:
            return self.conn.recv()
        except EOFError:
            code = self.proc.exitcode
            self.kill()
            return "traceback", f"the worker died (exit {code})"

    def stop(self):
        if self.proc.is_alive():
            self.conn.send(None)
            self.proc.join(10)
        self.kill()

    def kill(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        self.proc.join(5)


def build(folder, timeout):
    """(class, detail) of the host build of an accepted mutant."""
    out = os.path.join(folder, "build")
    cmd = [sys.executable, "-m", "SCons", "-C", ROOT, f"out={out}", "target=host",
           f"model={os.path.join(folder, 'm.yaml')}", "-j1"]
    env = dict(os.environ, TESSERA_MODEL_CACHE=os.path.join(folder, "..", "cache"))
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, start_new_session=True)
    except subprocess.TimeoutExpired:
        return "hang", f"build past {timeout} s"
    text = res.stdout + res.stderr
    if "Traceback" in text:
        return "traceback", text[-3000:]
    if res.returncode != 0:
        errors = [line for line in text.splitlines() if line.startswith("tessera: error")]
        return ("clean error", "build: " + errors[0][:80]) if errors else ("bad message", text[-2000:])
    report = os.path.join(out, "host", "m", "report.json")
    try:
        with open(report) as f:
            verdict = json.load(f)["verdict"]
    except (OSError, ValueError, KeyError):
        return "wrong success", f"the build passed without a report ({report})"
    return ("built", "") if verdict == "pass" else ("wrong success", f"build exit 0, verdict {verdict}")


# ---- the run ---------------------------------------------------------------------------

def _takes(w, seed, folder, timeout, log):
    """Whether tessera accepts the unmutated seed (else its mutants would
    only ever fail for the seed's own reason)."""
    write_case(folder, seed, seed.files)
    cls, detail = w.run((seed.fmt, folder, seed.main), timeout)
    if cls != "accepted":
        log(f"seed {seed.fmt} {seed.name} dropped: {cls}: {detail.strip()[-300:]}")
    return cls == "accepted"


def run(count, seed=0, formats=FORMATS, out="/tmp/tessera-fuzz", build_every=0, timeout=120, build_timeout=900,
        only=None, log=print):
    """Fuzz `count` mutants spread over `formats`; {format: Counter(class)}
    and the findings [(format, index, kind, class, detail)]."""
    cache = os.path.join(out, "cache")
    os.makedirs(cache, exist_ok=True)
    w = Worker()
    seed_sets = {}
    for fmt, found in seeds(os.path.join(ROOT, "generated", ".models")).items():
        if fmt in formats:
            seed_sets[fmt] = [s for s in found if _takes(w, s, os.path.join(out, "case"), timeout, log)]
    formats = [f for f in formats if seed_sets.get(f)]
    counts = {f: Counter() for f in formats}
    kinds = {f: Counter() for f in formats}
    findings = []
    accepted = 0
    indices = [only] if only is not None else range(count)
    t0 = time.time()
    try:
        for index in indices:
            fmt = formats[index % len(formats)]
            base, kind, files = make(seed_sets, fmt, seed, index)
            folder = os.path.join(out, "case")
            write_case(folder, base, files)
            if index % RECYCLE == 0 and index:
                w.stop()
                w = Worker()
            cls, detail = w.run((fmt, folder, base.main), timeout)
            if cls in ("hang", "traceback") and not w.proc.is_alive():
                w = Worker()
            if cls == "accepted" and base.model_text and build_every:
                accepted += 1
                if accepted % build_every == 1 or build_every == 1:
                    cls, detail = build(folder, build_timeout)
            counts[fmt][cls] += 1
            kinds[fmt][kind] += 1
            if cls in FINDINGS:
                keep = os.path.join(out, "findings", f"{fmt}-{index}")
                shutil.rmtree(keep, ignore_errors=True)
                shutil.copytree(folder, keep, ignore=shutil.ignore_patterns("out", "build"))
                with open(os.path.join(keep, "finding.txt"), "w") as f:
                    f.write(f"{fmt} {base.name} mutant {index} ({kind}): {cls}\n{detail}\n")
                findings.append((fmt, index, kind, cls, detail))
                log(f"{fmt} {index} ({base.name}, {kind}): {cls}: {detail.strip().splitlines()[-1][:200] if detail.strip() else ''}")
            if (index + 1) % 200 == 0:
                log(f"{index + 1} mutants, {time.time() - t0:.0f} s: {_totals(counts)}")
    finally:
        w.stop()
    return counts, kinds, findings


def _totals(counts):
    total = Counter()
    for c in counts.values():
        total.update(c)
    return dict(total)


def table(counts):
    lines = ["| format | mutants | " + " | ".join(CLASSES) + " |", "|---" * (len(CLASSES) + 2) + "|"]
    for fmt, c in list(counts.items()) + [("all", Counter(_totals(counts)))]:
        lines.append(f"| {fmt} | {sum(c.values())} | " + " | ".join(str(c.get(k, 0)) for k in CLASSES) + " |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=600, help="mutants, spread evenly over the formats")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--formats", default=",".join(FORMATS))
    ap.add_argument("--out", default="/tmp/tessera-fuzz", help="scratch folder (the findings stay in it)")
    ap.add_argument("--build-every", type=int, default=0, help="build every N-th accepted mutant for host (0: none)")
    ap.add_argument("--timeout", type=float, default=120, help="seconds for one mutant's import")
    ap.add_argument("--build-timeout", type=float, default=900)
    ap.add_argument("--only", type=int, help="run mutant I alone")
    ap.add_argument("--json", help="write the counts here")
    args = ap.parse_args(argv)
    counts, kinds, findings = run(args.count, args.seed, tuple(args.formats.split(",")), args.out, args.build_every,
                                  args.timeout, args.build_timeout, args.only)
    print(table(counts))
    for fmt, k in kinds.items():
        print(f"{fmt} mutations: {dict(sorted(k.items()))}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"counts": {f: dict(c) for f, c in counts.items()},
                       "kinds": {f: dict(k) for f, k in kinds.items()},
                       "findings": [list(x[:4]) + [x[4][-500:]] for x in findings]}, f, indent=1, sort_keys=True)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())

"""Fuzzed models of the other input dialects through the real entry point
(prepare.prepare, what a build runs when it reads SConstruct, then the
weight fit and the tiler's view of every layer):

- int8 .tflite flatbuffers (byte flips, truncations, in-place field edits:
  types, shapes, scales, zero points, buffers, operator inputs, options,
  opcodes); an accepted mutant must equal the TFLite interpreter on every
  tensor (prepare checks it: tflitecheck);
- integer ONNX graphs with their reference files: Deeploy (QuantLib,
  RequantShift) and DORY (NEMO, Mul/Add/Cast/Div/Clip chains): random
  attribute and initializer mutations of RequantShift and of the Mul/Div/
  Floor/Clip chains, weights, dims, op types, dropped nodes, byte flips,
  and mutations of the reference files (values, NaN, dtypes, headers,
  lengths); an accepted mutant must reproduce its reference files bit for
  bit (prepare checks it: reference.check).

Every case ends in one bounded TesseraError line naming the file, or in a
success checked against the source framework: never another exception,
never a wrong success. Each test prints how many mutants each class of
check caught (pytest -s, or the JUnit file's output)."""

import io
import math
import os
import shutil
from collections import Counter

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import helper, numpy_helper

from helpers import MODEL_CACHE, ROOT
from mutations import flip, truncate
from tessera.util import canon
from tessera import config
from tessera.planning import memplan
from tessera.model import prepare
from tessera.config import views
from tessera.errors import MAX_MESSAGE, TesseraError

TFLITE_EXAMPLES = 150
DEEPLOY_EXAMPLES = 400
NEMO_EXAMPLES = 400
SETTINGS = dict(deadline=None, suppress_health_check=list(HealthCheck), database=None, derandomize=True)
PEER = os.path.normpath(os.path.join(ROOT, "..", "shared", "peer_tests"))
HOST = os.path.join(ROOT, "targets", "host.yaml")


class Bases(dict):
    """{base name: {file: bytes}} with a short repr (hypothesis prints its strategies)."""

    def __repr__(self):
        return f"<bases {sorted(self)}>"


class Case:
    """A mutant: its files' bytes, with a short repr for hypothesis."""

    def __init__(self, kind, files):
        self.kind, self.files = kind, files

    def __repr__(self):
        return f"<{self.kind}: {', '.join(f'{k} {len(v)} B' for k, v in self.files.items() if v is not None)}>"


def caught_by(err):
    """Which class of check stopped a mutant, from its class and message."""
    name = type(err).__name__
    what = err.what or ""
    if name in ("ReferenceMismatch", "TfliteMismatch", "GoldenError", "FitError"):
        return {"ReferenceMismatch": "reference check (golden != reference files)",
                "TfliteMismatch": "TFLite interpreter check (golden != interpreter)",
                "GoldenError": "golden model (integer overflow)", "FitError": "weight fit"}[name]
    for prefix, label in (("not a readable ONNX", "ONNX load"), ("not a TFLite flatbuffer", "TFLite identifier"),
                          ("the TFLite interpreter cannot read", "TFLite interpreter gate (verifier)"),
                          ("the TFLite interpreter refuses", "TFLite interpreter gate (prepare/invoke)"),
                          ("the TFLite interpreter crashed", "TFLite interpreter gate (crash, in a child)")):
        if what.startswith(prefix):
            return label
    if "the flatbuffer says shape" in what:
        return "TFLite interpreter gate (shapes)"
    where = err.where or ""
    if where.endswith((".npz", ".txt")) or ".txt:" in where or "out_layer" in what or where.endswith("ref"):
        return "reference file checks"
    for words, label in ((("also made by",), "single-producer gate"),
                         (("has type", "expected"), "attribute-type gate"),
                         (("inputs and", "outputs"), "arity gate"),
                         (("not UTF-8",), "UTF-8 names"),
                         (("has shape",), "tensor shape check"),
                         (("weights of shape",), "weights against input check"),
                         (("scale",), "quantization checks"),
                         (("zero point",), "quantization checks"),
                         (("quantization",), "quantization checks"),
                         (("bias is not",), "quantization checks"),
                         (("not supported",), "unsupported op/feature"),
                         (("outside the",), "unsupported op/feature"),
                         (("Add of a constant",), "unsupported op/feature"),
                         (("ONNX checker",), "ONNX checker"),
                         (("not quantized",), "type checks (parser)"),
                         (("a float",), "type checks (parser)"),
                         (("tensor (",), "type checks (parser)"),
                         (("-bit values",), "type checks (parser)"),
                         (("non-integer",), "integer-value checks (parser)"),
                         (("too large",), "integer-value checks (parser)"),
                         (("outside int",), "integer-value checks (parser)"),
                         (("unreadable",), "integer-value checks (parser)"),
                         (("Clip bound",), "integer-value checks (parser)"),
                         (("shape",), "shape/geometry checks (parser)"),
                         (("columns",), "shape/geometry checks (parser)"),
                         (("channels",), "shape/geometry checks (parser)"),
                         (("stride",), "shape/geometry checks (parser)"),
                         (("activation",), "graph structure checks (parser)"),
                         (("constant",), "graph structure checks (parser)"),
                         (("produced by",), "graph structure checks (parser)"),
                         (("matrix",), "graph structure checks (parser)"),
                         (("no layers",), "graph structure checks (parser)"),
                         (("attribute",), "attribute-type gate")):
        if all(w in what for w in words):
            return label
    if "RequantShift" in what or "n_levels" in what or "div=" in what:
        return "RequantShift checks"
    return f"{name} (frontend)"


def one_line(err, path):
    msg = str(err)
    assert "\n" not in msg and len(msg) <= MAX_MESSAGE, msg[:1000]
    assert path in msg or (err.where or "").startswith(("m:", "m ")), msg   # the file, or the network by name
    return msg


def run_case(tmp_path, case, model_text, caught):
    """Write the case's files into a fresh folder and prepare the model as a
    build does; count the check that stops it (or the checked success)."""
    folder = tmp_path / "case"
    if folder.exists():
        shutil.rmtree(folder)
    (folder / "ref").mkdir(parents=True)
    for name, data in case.files.items():
        if data is not None:
            (folder / name).write_bytes(data)
    mpath = folder / "m.yaml"
    mpath.write_text(model_text)
    try:
        model = config.load_model(str(mpath), "m")
        paths = prepare.prepare(model, str(folder / "out"), MODEL_CACHE, log=lambda line: None)
        from tessera.ir import Graph
        graph = Graph.from_json(canon.read_json(paths["graph"]))
        memplan.check_weights(graph, views.memory_target(config.load_target(HOST, "host")), "")
        for layer in graph.layers:
            views.tiler_layer(layer, graph)
    except TesseraError as err:
        one_line(err, str(folder))
        caught[caught_by(err)] += 1
        return
    # accepted: prepare compared it with the source framework and stamped it
    stamp = canon.read_json(str(folder / "out" / ".prepare.json"))
    assert "golden" in stamp
    if "reference" in paths:
        assert canon.read_json(paths["reference"])["equal"] is True
        caught["accepted, equals its reference files"] += 1
    else:
        assert canon.read_json(paths["tflite"])["equal"] is True
        caught["accepted, equals the TFLite interpreter"] += 1


def report(title, kinds, caught, examples):
    print(f"\n{title} mutants by kind: {dict(sorted(kinds.items()))}")
    print(f"{title} mutants by the check that caught them: {dict(caught.most_common())}")
    assert sum(caught.values()) == examples


ODD_FLOATS = [math.nan, math.inf, -math.inf, 0.0, -1.0, 0.5, 3.0, 1e30, 2.0 ** 31, 255.0, -2.0 ** 40]


# ---- TFLite ---------------------------------------------------------------------

TFLITE_BASES = ("residual", "convs", "issue10_ops")


@pytest.fixture(scope="module")
def tflite_bases():
    out = Bases()
    for name in TFLITE_BASES:
        with open(os.path.join(ROOT, "tests", "data", "tflite", name + ".tflite"), "rb") as f:
            out[name] = f.read()
    return out


def _tflite_field(data, draw):
    from tflite_edit import CONV_ACTIVATION, CONV_STRIDE_H, CONV_STRIDE_W, Flatbuffer
    f = Flatbuffer(data)
    n_t, n_op = f.sg.TensorsLength(), f.sg.OperatorsLength()
    t = draw(st.integers(0, n_t - 1))
    op = draw(st.integers(0, n_op - 1))
    kind = draw(st.sampled_from(["type", "shape", "scale", "zero_point", "no_scales", "buffer", "op_input",
                                 "conv_option", "opcode"]))
    try:
        if kind == "type":
            f.tensor_type(t, draw(st.sampled_from([0, 1, 2, 3, 4, 7, 9, 10, 17, 99])))
        elif kind == "shape":
            k = draw(st.integers(0, max(0, f.sg.Tensors(t).ShapeLength() - 1)))
            f.shape_dim(t, k, draw(st.sampled_from([-1, 0, 1, 2, 3, 7, 13, 1 << 20, -(1 << 31)])))
        elif kind == "scale":
            q = f.sg.Tensors(t).Quantization()
            k = draw(st.integers(0, max(0, (q.ScaleLength() if q else 1) - 1)))
            f.scale(t, draw(st.sampled_from(ODD_FLOATS + [1e-30, 1e-3])), k)
        elif kind == "zero_point":
            f.zero_point(t, draw(st.sampled_from([-129, -128, 1, 127, 128, 300, 1 << 40])))
        elif kind == "no_scales":
            f.drop_scales(t)
        elif kind == "buffer":
            f.tensor_buffer(t, draw(st.sampled_from([0, 1, 2, 5, 999, (1 << 32) - 1])))
        elif kind == "op_input":
            n_in = f.sg.Operators(op).InputsLength()
            f.op_input(op, draw(st.integers(0, max(0, n_in - 1))), draw(st.sampled_from([-1, 0, 1, t, n_t, 1 << 30])))
        elif kind == "conv_option":
            slot, fmt, values = draw(st.sampled_from([(CONV_STRIDE_H, "i", [0, -1, 2, 3, 1 << 20]),
                                                      (CONV_STRIDE_W, "i", [0, -1, 2, 5]),
                                                      (CONV_ACTIVATION, "b", [0, 1, 2, 3, 4, 5, 6, 99])]))
            convs = [i for i in range(n_op) if f.sg.Operators(i).BuiltinOptionsType() == 1]
            if convs:
                f.conv_option(draw(st.sampled_from(convs)), slot, fmt, draw(st.sampled_from(values)))
        elif kind == "opcode":
            f.opcode_builtin(draw(st.integers(0, f.model.OperatorCodesLength() - 1)),
                             draw(st.sampled_from([0, 1, 3, 4, 9, 14, 17, 22, 25, 34, 39, 114, 999])))
    except (KeyError, AttributeError):
        pass   # a field the converter left at its default has no bytes to edit
    return kind, f.bytes()


@st.composite
def tflite_mutants(draw, bases):
    base = draw(st.sampled_from(sorted(bases)))
    data = bases[base]
    how = draw(st.sampled_from(["field", "flip", "field", "truncate", "field"]))
    if how == "flip":
        return Case(f"{base}: byte flip", {"net.tflite": flip(data, draw)})
    if how == "truncate":
        return Case(f"{base}: truncation", {"net.tflite": truncate(data, draw)})
    kind, mutant = _tflite_field(data, draw)
    return Case(f"field: {kind}", {"net.tflite": mutant})


def test_mutated_tflite_is_an_error_or_equals_the_interpreter(tmp_path, tflite_bases):
    caught, kinds = Counter(), Counter()

    @settings(max_examples=TFLITE_EXAMPLES, **SETTINGS)
    @given(tflite_mutants(tflite_bases))
    def run(case):
        kinds[case.kind.split(": ")[-1] if case.kind.startswith("field") else case.kind.split(": ")[1]] += 1
        run_case(tmp_path, case, "description: fuzz\ntflite: net.tflite\n", caught)

    run()
    report("TFLite", kinds, caught, TFLITE_EXAMPLES)


# ---- integer ONNX graphs with reference files -----------------------------------------

def _values(m, name):
    """(array, setter) of an initializer or a Constant node's value named `name`."""
    for init in m.graph.initializer:
        if init.name == name:
            def put(arr, init=init):
                init.CopyFrom(numpy_helper.from_array(np.asarray(arr), init.name))
            return numpy_helper.to_array(init), put
    for node in m.graph.node:
        if node.op_type == "Constant" and node.output and node.output[0] == name:
            attr = next((a for a in node.attribute if a.name == "value"), None)
            if attr is not None:
                def put(arr, attr=attr):
                    attr.t.CopyFrom(numpy_helper.from_array(np.asarray(arr)))
                return numpy_helper.to_array(attr.t), put
    return None, None


def _mutate_array(arr, draw):
    """A numeric mutation of a constant: odd values, fractions, a resize."""
    how = draw(st.sampled_from(["odd", "odd", "scale", "fraction", "resize", "retype"]))
    flat = np.array(arr, copy=True).reshape(-1)
    if how == "resize" or not flat.size:
        return np.resize(flat, draw(st.integers(0, flat.size + 3))).astype(arr.dtype)
    if how == "retype":
        return flat.reshape(arr.shape).astype(draw(st.sampled_from([np.int64, np.float64, np.int8, np.float16])))
    i = draw(st.integers(0, flat.size - 1))
    value = draw(st.sampled_from(ODD_FLOATS))
    if how == "scale":
        value = float(flat[i]) * draw(st.sampled_from([-1, 2, 1000, 1e9]))
    elif how == "fraction":
        value = float(flat[i]) + 0.5
    if flat.dtype.kind in "iu":
        if not math.isfinite(value):
            value = 0
        value = int(np.clip(value, np.iinfo(flat.dtype).min, np.iinfo(flat.dtype).max))
    flat[i] = value
    return flat.reshape(arr.shape)


CHAIN_OPS = ("RequantShift", "Mul", "Div", "Floor", "Clip", "Cast", "Add", "Conv", "Gemm")


def _onnx_field(data, draw):
    m = onnx.load_from_string(data)
    g = m.graph
    nodes = [n for n in g.node if n.op_type in CHAIN_OPS] or list(g.node)
    node = draw(st.sampled_from(nodes))
    kind = draw(st.sampled_from(["attribute", "constant", "constant", "op_type", "drop_node", "input_dim",
                                 "two_producers", "swap_inputs"]))
    if kind == "attribute":
        name = draw(st.sampled_from({"RequantShift": ["div", "n_levels", "signed"], "Clip": ["min", "max"],
                                     "Cast": ["to"]}.get(node.op_type, ["div", "n_levels", "min", "alpha"])))
        for a in list(node.attribute):
            if a.name == name:
                node.attribute.remove(a)
        if name == "to":
            node.attribute.append(helper.make_attribute("to", draw(st.sampled_from([1, 2, 3, 6, 7, 9, 10, 16]))))
        else:
            node.attribute.append(helper.make_attribute(name, draw(st.sampled_from(ODD_FLOATS))))
    elif kind == "constant":
        names = [i for i in node.input if _values(m, i)[0] is not None]
        if names:
            arr, put = _values(m, draw(st.sampled_from(names)))
            put(_mutate_array(arr, draw))
    elif kind == "op_type":
        node.op_type = draw(st.sampled_from(["Floor", "Ceil", "Div", "Mul", "Add", "Identity", "Relu", "Clip",
                                             "RequantShift", "Conv", ""]))
    elif kind == "drop_node":
        g.node.remove(node)
    elif kind == "input_dim":
        d = g.input[0].type.tensor_type.shape.dim
        if len(d):
            d[draw(st.integers(0, len(d) - 1))].dim_value = draw(st.sampled_from([0, 1, 2, 5, 1000]))
    elif kind == "two_producers":
        other = draw(st.sampled_from(list(g.node)))
        if other is not node and node.output and other.output:
            node.output[0] = other.output[0]
    elif kind == "swap_inputs" and len(node.input) > 1:
        a, b = draw(st.integers(0, len(node.input) - 1)), draw(st.integers(0, len(node.input) - 1))
        node.input[a], node.input[b] = node.input[b], node.input[a]
    return kind, m.SerializeToString()


def _npz_bytes(arrays):
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def _npz_mutant(data, draw):
    with np.load(io.BytesIO(data)) as z:
        arrays = {k: np.asarray(z[k]) for k in z.files}
    how = draw(st.sampled_from(["value", "nan", "fraction", "resize", "rename", "drop", "dtype", "bytes"]))
    key = draw(st.sampled_from(sorted(arrays)))
    a = arrays[key]
    if how == "bytes":
        return how, flip(data, draw)
    if how == "value" and a.size:
        a = a.astype(np.int64)
        a.reshape(-1)[draw(st.integers(0, a.size - 1))] += draw(st.sampled_from([1, -1, 300, 1 << 33]))
    elif how == "nan":
        a = a.astype(np.float64)
        if a.size:
            a.reshape(-1)[draw(st.integers(0, a.size - 1))] = draw(st.sampled_from([math.nan, math.inf]))
    elif how == "fraction":
        a = a + 0.25
    elif how == "resize":
        a = np.resize(a.reshape(-1), draw(st.integers(0, a.size + 3)))
    elif how == "rename":
        arrays[key + "_x"] = arrays.pop(key)
        return how, _npz_bytes(arrays)
    elif how == "drop":
        del arrays[key]
        return how, _npz_bytes(arrays)
    elif how == "dtype":
        a = a.astype(draw(st.sampled_from([np.float32, np.uint8, np.int8, np.complex64, np.bool_, str])))
    arrays[key] = a
    return how, _npz_bytes(arrays)


def _txt_mutant(data, draw):
    lines = data.decode().splitlines(True)
    how = draw(st.sampled_from(["value", "value", "header", "drop", "text", "cut"]))
    i = draw(st.integers(1 if len(lines) > 1 else 0, len(lines) - 1))
    if how == "value":
        lines[i] = draw(st.sampled_from(["nan,\\\n", "inf,\\\n", "0.5,\\\n", "-1,\\\n", "256,\\\n", "99999999999,\\\n",
                                         "1e400,\\\n", "7,\\\n", "\\\n"]))
    elif how == "header":
        lines[0] = draw(st.sampled_from(["# x (shape [1, 2, 3]),\\\n", "# x (shape []),\\\n", "# x shape,\\\n",
                                         "# x (shape [0, 4]),\\\n", "# x (shape [a, b]),\\\n", "\n"]))
    elif how == "drop":
        del lines[i]
    elif how == "text":
        lines.insert(i, "abc,\\\n")
    else:
        lines = lines[:i]
    return how, "".join(lines).encode()


def _reference_mutant(files, draw):
    names = sorted(k for k in files if k.startswith("ref/"))
    name = draw(st.sampled_from(names))
    if draw(st.integers(0, 9)) == 0:
        return "reference: missing", {**files, name: None}
    mutate = _npz_mutant if name.endswith(".npz") else _txt_mutant
    how, data = mutate(files[name], draw)
    return f"reference {os.path.splitext(name)[1]}: {how}", {**files, name: data}


@st.composite
def integer_mutants(draw, bases):
    base = draw(st.sampled_from(sorted(bases)))
    files = bases[base]
    onnx_name = next(k for k in files if k.endswith(".onnx"))
    # hypothesis leans to a list's first entries: the field edits first
    how = draw(st.sampled_from(["field", "reference", "field", "flip", "field", "reference", "truncate"]))
    if how == "flip":
        return Case("byte flip", {**files, onnx_name: flip(files[onnx_name], draw)})
    if how == "truncate":
        return Case("truncation", {**files, onnx_name: truncate(files[onnx_name], draw)})
    if how == "reference":
        kind, mutated = _reference_mutant(files, draw)
        return Case(kind, mutated)
    kind, data = _onnx_field(files[onnx_name], draw)
    return Case(f"field: {kind}", {**files, onnx_name: data})


def _read_folder(folder, onnx_name):
    out = {}
    for f in sorted(os.listdir(folder)):
        if f.endswith(".onnx"):
            out[onnx_name] = open(os.path.join(folder, f), "rb").read()
        elif f.endswith((".npz", ".txt")) and f != "activations.npz":
            out["ref/" + f] = open(os.path.join(folder, f), "rb").read()
    return out


@pytest.fixture(scope="module")
def deeploy_bases(tmp_path_factory):
    """The corpus's own QuantLib graph with its formula-computed reference,
    and two of Deeploy's own test folders when ../shared has them."""
    import test_bad_input_corpus as corpus
    base = tmp_path_factory.mktemp("deeploy")
    corpus._quantlib_graph(base / "net.onnx")
    files, _ = corpus._deeploy_folder()
    bases = Bases({"own": {"net.onnx": (base / "net.onnx").read_bytes(), **{"ref/" + k: v for k, v in files.items()}}})
    for rel in ("Kernels/Integer/Conv/Regular_2D_RQ", "Models/miniMobileNet"):
        folder = os.path.join(PEER, "deeploy", rel)
        if os.path.isdir(folder):
            bases[rel] = _read_folder(folder, "net.onnx")
    return bases


@pytest.fixture(scope="module")
def nemo_bases(tmp_path_factory):
    """test_nemo_export's NEMO graph (7 DORY layers) with references from
    ONNX Runtime, in HWC and CHW files."""
    import test_nemo_export as nemo
    out = Bases()
    for order in ("hwc", "chw"):
        folder = str(tmp_path_factory.mktemp("nemo") / order)
        nemo.export(folder, order)
        out[order] = _read_folder(folder, "net.onnx")
    return out


def _fuzz_integer(tmp_path, bases, kind, examples):
    caught, kinds = Counter(), Counter()
    model_text = f"description: fuzz\nonnx: net.onnx\nreference: {{kind: {kind}, dir: ref}}\n"

    @settings(max_examples=examples, **SETTINGS)
    @given(integer_mutants(bases))
    def run(case):
        kinds[case.kind] += 1
        run_case(tmp_path, case, model_text, caught)

    run()
    return kinds, caught


def test_mutated_deeploy_is_an_error_or_equals_its_reference(tmp_path, deeploy_bases):
    kinds, caught = _fuzz_integer(tmp_path, deeploy_bases, "deeploy", DEEPLOY_EXAMPLES)
    report("Deeploy (QuantLib)", kinds, caught, DEEPLOY_EXAMPLES)


def test_mutated_nemo_is_an_error_or_equals_its_reference(tmp_path, nemo_bases):
    kinds, caught = _fuzz_integer(tmp_path, nemo_bases, "dory", NEMO_EXAMPLES)
    report("DORY (NEMO)", kinds, caught, NEMO_EXAMPLES)


def test_the_unmutated_bases_are_accepted(tmp_path, tflite_bases, deeploy_bases, nemo_bases):
    """Each fuzz class starts from models tessera takes, so a mutant that
    fails, fails for its mutation."""
    caught = Counter()
    for name, data in tflite_bases.items():
        run_case(tmp_path, Case(name, {"net.tflite": data}), "description: base\ntflite: net.tflite\n", caught)
    for kind, bases in (("deeploy", deeploy_bases), ("dory", nemo_bases)):
        for name, files in bases.items():
            run_case(tmp_path, Case(name, files),
                     f"description: base\nonnx: net.onnx\nreference: {{kind: {kind}, dir: ref}}\n", caught)
    total = len(tflite_bases) + len(deeploy_bases) + len(nemo_bases)
    assert sum(v for k, v in caught.items() if k.startswith("accepted")) == total, caught

"""Fuzzed inputs through the real entry points: ONNX protobufs mutated
(byte flips, truncations, field mutations) go through the import, the
golden model and, when accepted, the comparison with ONNX Runtime; target
and model YAML texts mutated go through the loaders. Every case ends in a
one-line TesseraError or a success, never another exception, and an
accepted ONNX mutant still matches ONNX Runtime within 1 LSB (no wrong
success). Each test prints how many mutants each class of check caught
(pytest -s, or the JUnit file's output)."""

import math
import os
from collections import Counter

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import helper, numpy_helper

from helpers import MODEL_CACHE, ROOT
from mutations import flip, truncate
from tessera import config, frontend, golden
from tessera.planning import memplan
from tessera.model import prepare
from tessera.config import views
from tessera.errors import MAX_MESSAGE, TesseraError

ONNX_EXAMPLES = 800
YAML_EXAMPLES = 600
SETTINGS = dict(deadline=None, suppress_health_check=list(HealthCheck), database=None)


def _caught_by(err):
    """Which class of check stopped a mutant, from its message."""
    what = err.what
    for prefix, name in (("not a readable ONNX", "load"), ("external data", "load"),
                         ("ONNX checker", "onnx checker (full)"), ("ONNX Runtime refuses", "ONNX Runtime gate"),
                         ("shape inference", "shape inference")):
        if what.startswith(prefix):
            return name
    if "scale" in what and ("holds" in what or "has shape" in what):
        return "scale gate"
    if "input" in what and "has type" in what:
        return "ONNX Runtime gate"
    return f"{type(err).__name__} (frontend/golden)"


def _one_line(err):
    msg = str(err)
    assert "\n" not in msg and len(msg) <= MAX_MESSAGE, msg[:1000]
    return msg


class Mutant(bytes):
    """A mutant's bytes with a short repr (hypothesis prints failing cases)."""

    def __repr__(self):
        return f"<{len(self)} bytes, sha256 {__import__('hashlib').sha256(self).hexdigest()[:12]}>"


@pytest.fixture(scope="module")
def tiny_bytes():
    model = config.load_model(os.path.join(ROOT, "models", "tiny.yaml"), "tiny")
    with open(prepare.model_onnx(model, MODEL_CACHE, log=lambda line: None), "rb") as f:
        return Mutant(f.read())


# ---- ONNX mutations -------------------------------------------------------------

def _field(data, draw):
    m = onnx.load_from_string(data)
    g = m.graph
    kind = draw(st.sampled_from(["retype", "short_raw", "dims", "resize", "pads", "nan_attr", "input_dim",
                                 "two_producers", "opset", "op_type", "drop_node", "drop_init", "swap_inputs",
                                 "bad_utf8"]))
    init = g.initializer[draw(st.integers(0, len(g.initializer) - 1))]
    node = g.node[draw(st.integers(0, len(g.node) - 1))]
    if kind == "retype":
        init.data_type = draw(st.sampled_from([1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 16]))
    elif kind == "short_raw":
        arr = numpy_helper.to_array(init)
        init.CopyFrom(numpy_helper.from_array(arr, init.name))
        init.raw_data = init.raw_data[:draw(st.integers(0, max(0, len(init.raw_data) - 1)))]
    elif kind == "dims" and len(init.dims):
        k = draw(st.integers(0, len(init.dims) - 1))
        init.dims[k] = draw(st.integers(-2, 40))
    elif kind == "resize":
        arr = numpy_helper.to_array(init).reshape(-1)
        n = draw(st.integers(0, arr.size + 3))
        init.CopyFrom(numpy_helper.from_array(np.resize(arr, n).astype(arr.dtype) if n else arr[:0], init.name))
    elif kind == "pads":
        convs = [n for n in g.node if n.op_type in ("Conv", "MaxPool", "AveragePool")] or [node]
        node = convs[draw(st.integers(0, len(convs) - 1))]
        for a in list(node.attribute):
            if a.name == "pads":
                node.attribute.remove(a)
        node.attribute.append(helper.make_attribute("pads", draw(st.lists(st.integers(-2, 3), min_size=1, max_size=5))))
    elif kind == "nan_attr":
        node.attribute.append(helper.make_attribute(draw(st.sampled_from(["alpha", "div", "n_levels", "axis"])),
                                                    draw(st.sampled_from([math.nan, math.inf, -1.0]))))
    elif kind == "input_dim":
        d = g.input[0].type.tensor_type.shape.dim[draw(st.integers(0, 3))]
        d.dim_value = draw(st.sampled_from([-1, 0, 1, 2, 5, 17, 1000]))
    elif kind == "two_producers":
        other = g.node[draw(st.integers(0, len(g.node) - 1))]
        if other is not node and node.output and other.output:
            node.output[0] = other.output[0]
    elif kind == "opset":
        m.opset_import[0].version = draw(st.sampled_from([1, 7, 10, 12, 19, 21, 99]))
    elif kind == "op_type":
        node.op_type = draw(st.sampled_from(["Conv", "Relu", "Sigmoid", "Add", "QuantizeLinear",
                                             "DequantizeLinear", "MaxPool", "Gemm", "Nope", ""]))
    elif kind == "drop_node":
        g.node.remove(node)
    elif kind == "drop_init":
        g.initializer.remove(init)
    elif kind == "swap_inputs" and len(node.input) > 1:
        a, b = draw(st.integers(0, len(node.input) - 1)), draw(st.integers(0, len(node.input) - 1))
        node.input[a], node.input[b] = node.input[b], node.input[a]
    data = m.SerializeToString()
    if kind == "bad_utf8":
        # protobuf will not write invalid UTF-8: change a name's bytes in place
        name = node.name.encode()
        if name:
            data = data.replace(name, b"\xff" + name[1:], 1)
    return kind, data


@st.composite
def onnx_mutants(draw, data):
    how = draw(st.sampled_from(["flip", "truncate", "field", "field", "field"]))
    if how == "flip":
        return "byte flip", Mutant(flip(data, draw))
    if how == "truncate":
        return "truncation", Mutant(truncate(data, draw))
    kind, mutant = _field(data, draw)
    return f"field: {kind}", Mutant(mutant)


def _import_and_check(path):
    graph, weights = frontend.import_onnx(path, "fuzz")
    inputs = golden.random_input(graph, 0)
    values = golden.run(graph, weights, inputs)
    target = config.load_target(os.path.join(ROOT, "targets", "host.yaml"), "host")
    memplan.check_weights(graph, views.memory_target(target), "")
    for layer in graph.layers:
        views.tiler_layer(layer, graph)
    return graph, weights, inputs, values


def test_mutated_onnx_is_an_error_or_a_correct_success(tmp_path, tiny_bytes):
    from tessera.frontend.normalize import for_ort_check
    from tessera.golden.ortcheck import compare

    caught, kinds = Counter(), Counter()
    path = str(tmp_path / "mutant.onnx")

    @settings(max_examples=ONNX_EXAMPLES, **SETTINGS)
    @given(onnx_mutants(tiny_bytes))
    def run(case):
        kind, data = case
        kinds[kind] += 1
        with open(path, "wb") as f:
            f.write(data)
        try:
            graph, weights, inputs, values = _import_and_check(path)
        except TesseraError as err:
            _one_line(err)
            caught[_caught_by(err)] += 1
            return
        # accepted: it must be what ONNX Runtime computes (no wrong success)
        rows = compare(for_ort_check(onnx.load(path), path), graph, weights, inputs, values)
        assert all(r["max_diff"] <= 1 for r in rows), (kind, rows)
        caught["accepted, matches ONNX Runtime"] += 1

    run()
    print(f"\nONNX mutants by kind: {dict(sorted(kinds.items()))}")
    print(f"ONNX mutants by the check that caught them: {dict(caught.most_common())}")
    assert sum(caught.values()) >= ONNX_EXAMPLES * 0.9


# ---- YAML mutations -------------------------------------------------------------

TOKENS = ["-1", "0", "1e30", "18446744073709551616", ".nan", ".inf", "~", "[", "]", "{", "}", "*x", "&x",
          "\"", "'", ":", "- ", "yes", "[1, 2]", "{a: 1}", "<<: *x", "!!binary AAAA", "\t", "#", "\u00e9"]


@st.composite
def yaml_mutants(draw):
    which = draw(st.sampled_from(["target", "model"]))
    name = {"target": os.path.join(ROOT, "targets", draw(st.sampled_from(["host", "gap8", "stm32f4"])) + ".yaml"),
            "model": os.path.join(ROOT, "models", "tiny.yaml")}[which]
    with open(name, encoding="utf-8") as f:
        lines = f.read().splitlines()
    for _ in range(draw(st.integers(1, 3))):
        how = draw(st.sampled_from(["token", "token", "drop", "dup", "cut"]))
        i = draw(st.integers(0, len(lines) - 1))
        if how == "token":
            line = lines[i]
            j = draw(st.integers(0, len(line)))
            k = draw(st.integers(j, min(len(line), j + 12)))
            lines[i] = line[:j] + draw(st.sampled_from(TOKENS)) + line[k:]
        elif how == "drop":
            del lines[i]
        elif how == "dup":
            lines.insert(i, lines[i])
        else:
            lines = lines[:i]
        if not lines:
            lines = [""]
    return which, "\n".join(lines) + "\n"


def test_mutated_yaml_is_an_error_or_a_success(tmp_path):
    caught = Counter()
    path = tmp_path / "mutant.yaml"

    @settings(max_examples=YAML_EXAMPLES, **SETTINGS)
    @given(yaml_mutants())
    def run(case):
        which, text = case
        path.write_text(text, encoding="utf-8")
        try:
            if which == "target":
                t = config.load_target(str(path), "mutant")
                views.kernel_library(t["kernels"])
                views.memory_target(t)
            else:
                m = config.load_model(str(path), "mutant")
                assert m["generator"] is not None
        except TesseraError as err:
            assert str(path) in _one_line(err)
            what = err.what
            caught["YAML syntax" if "invalid YAML" in what or "duplicate key" in what
                   else "schema" if (err.where or "") != str(path) else "cross-reference/platform"] += 1
            return
        caught["accepted"] += 1

    run()
    print(f"\nYAML mutants by the check that caught them: {dict(caught.most_common())}")
    assert sum(caught.values()) == YAML_EXAMPLES

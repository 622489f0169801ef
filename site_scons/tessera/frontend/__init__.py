"""ONNX to IR. One parser per input dialect; the dialect is recognized from
the graph's ops, never from the file name.

    graph, weights = import_onnx(path, name)
"""

import numpy as np
import onnx

from ..errors import FrontendError
from .builder import Builder
from .gate import (check_arity, check_attributes, check_initializers, check_input_types, check_onnx, check_pads,
                   check_single_producers, check_sizes, check_text, check_typed, check_versions, ort_refusal)
from .nemo import NemoParser
from .normalize import normalize
from .onnxgraph import OnnxGraph, checked_graph, load, read_model
from .qdq import QdqParser
from .qoperator import QOperatorParser
from .quantlib import QuantLibParser

FRONTEND_VERSION = "2"

QOPERATOR_OPS = {"QLinearConv", "QLinearMatMul", "QGemm", "QLinearAdd",
                 "QLinearGlobalAveragePool", "QLinearAveragePool"}
# NEMO folds batch-norm and requantization into these after every layer
NEMO_OPS = {"Div", "Floor", "Cast", "Clip", "Mul"}
# integer graphs with no requantization at all (QuantLib/Deeploy kernel
# tests): lowered by the QuantLib parser, every layer outputs int32
PLAIN_INTEGER_OPS = {"Conv", "Gemm", "MatMul", "Add", "MaxPool", "Pad", "Flatten", "Reshape",
                     "Squeeze", "Unsqueeze", "Identity", "Constant"}
# QuantLib's integer transformer ops (Deeploy's iSoftmax, ITAMax, ...)
QUANTLIB_OPS = {"RequantShift", "iSoftmax", "ITAMax", "ITAPartialMax", "iLayerNorm", "iGELU", "IntegerMean"}
PARSERS = {"qdq": QdqParser, "qoperator": QOperatorParser, "nemo": NemoParser, "quantlib": QuantLibParser}
INTEGER_DIALECTS = ("nemo", "quantlib")


def _float_constants(g):
    for name in list(g.inits) + list(g.consts):
        arr = np.asarray(g.array(name))
        if arr.dtype.kind == "f" and arr.size:
            yield arr


def _integer_valued(g):
    """True when every float initializer holds whole numbers (integer dialects)."""
    seen = False
    for arr in _float_constants(g):
        seen = True
        if not np.all(np.equal(np.mod(arr, 1), 0)):
            return False
    return seen


def detect_dialect(g):
    ops = {n.op_type for n in g.graph.node}
    if ops & QUANTLIB_OPS:
        return "quantlib"
    if ops & QOPERATOR_OPS:
        return "qoperator"
    if {"QuantizeLinear", "DequantizeLinear"} & ops:
        return "qdq"
    no_fractions = all(np.all(np.equal(np.mod(a, 1), 0)) for a in _float_constants(g))
    if no_fractions and ops <= PLAIN_INTEGER_OPS:
        return "quantlib"
    if _integer_valued(g) and ops & NEMO_OPS:
        return "nemo"
    if _integer_valued(g):
        return "nemo"   # so the NEMO parser names the node it cannot lower
    return "float"


def _load_integer(path, err):
    """A model the ONNX checker or shape inference rejects may still be an
    integer-dialect graph (Deeploy writes Pad with the opset-2 `pads`
    attribute under opset 13): those parsers read every node themselves and
    compute shapes from each op's geometry. Anything else keeps the error."""
    try:
        model = onnx.load(path)
    except Exception:
        raise err from None
    try:
        model = onnx.shape_inference.infer_shapes(model)
    except Exception:
        pass
    try:
        g = checked_graph(model, path)
    except FrontendError:
        raise err from None     # the standard path's line (the checker's) says it first
    if detect_dialect(g) not in INTEGER_DIALECTS:
        raise err
    return g


def input_names(path):
    """Names of the graph inputs that are not initializers, in graph order."""
    model = read_model(path, load_external_data=False)
    inits = {i.name for i in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in inits]


def import_onnx(path, name, input_types=None, input_shape=None, constants=None):
    """Lower the ONNX file at `path` to (Graph, {key: array}).

    input_types: {graph input: "int8" | "uint8" | "int32"} for the integer
    dialects, whose graphs do not say (see tessera.model.reference).
    input_shape: {graph input or "*": dims} for free input dimensions
    other than the batch (standard dialects, normalized first: see
    tessera.frontend.normalize).
    constants: {graph input: TensorProto file} of parameter inputs
    (normalize.bind_constants)."""
    try:
        g = load(path)
    except FrontendError as err:
        if err.what.startswith(("file not found", "not a readable ONNX")):
            raise
        g = _load_integer(path, err)
    if constants:
        from .normalize import bind_constants
        g = OnnxGraph(onnx.shape_inference.infer_shapes(bind_constants(g.model, path, constants)), path)
    dialect = detect_dialect(g)
    if dialect == "float":
        raise FrontendError(path, "the model is not quantized (float weights, no QuantizeLinear/"
                            "DequantizeLinear or QLinear* ops)",
                            "quantize it, e.g. onnxruntime.quantization.quantize_static with QuantFormat.QDQ")
    parser = PARSERS.get(dialect)
    if parser is None:
        raise FrontendError(path, f"the {dialect} integer dialect is not supported yet")
    check_text(g.model, path)   # the ONNX checker lets a node name that is not UTF-8 through
    check_sizes(g.model, path)
    if dialect in INTEGER_DIALECTS:
        return _import_integer(g, path, name, dialect, input_types)
    g0 = g
    check_onnx(g.model, path)
    refusal = _runtime_refusal(g.model, path)
    try:
        model, notes = normalize(g.model, path, input_shape)
        g = OnnxGraph(model, path)
        graph, weights = parser(g, Builder(name, dialect, path)).parse()
    except FrontendError:
        raise   # the parser names the node (an unsupported op) better than ONNX Runtime would
    except Exception:
        if refusal is None:
            raise
        raise refusal from None
    if refusal is not None:
        raise refusal
    if getattr(g0, "stale_value_info", 0):
        notes["stale_value_info"] = g0.stale_value_info
    _check_windows(graph, path)
    layouts = notes.get("input_layout", {})
    for onnx_name, ir_name in zip(g.input_names, graph.inputs):
        if onnx_name in layouts:
            graph.tensors[ir_name].source_layout = "hwc"
    graph.notes = notes or None
    return graph, weights


def _runtime_refusal(model, path):
    """What ONNX Runtime refuses in a standard-dialect model, as an error
    the parser's own line (naming the node) may come before: versions past
    what it loads, graph input types, then its own load and run."""
    try:
        check_versions(model, path)
        check_input_types(model, path, "standard")
    except FrontendError as err:
        return err
    return ort_refusal(model, path)


def _import_integer(g, path, name, dialect, input_types):
    """The integer dialects' gate, then their parser: the structural checks
    their custom ops need, the full checker on every standard node, and for
    NEMO (standard ops only) ONNX Runtime running it, as the standard
    dialects; the parser's own line wins when it names the node."""
    check_versions(g.model, path)
    check_input_types(g.model, path, "integer")
    check_single_producers(g.model, path)
    check_attributes(g.model, path)
    check_arity(g.model, path)
    check_initializers(g.model, path)
    check_pads(g.model, path)
    check_typed(g.model, path)
    refusal = ort_refusal(g.model, path) if dialect == "nemo" else None
    result = PARSERS[dialect](g, Builder(name, dialect, path), input_types).parse()
    if refusal is not None:
        raise refusal
    return result


def _check_windows(graph, path):
    """A window larger than its padded input (a model whose input shape was
    changed under its convolutions: ONNX Runtime refuses it) is one line."""
    from ..ir import effective_kernel

    for layer in graph.layers:
        if list(layer.kernel) == [1, 1] or not layer.inputs:
            continue
        shape = graph.tensor(layer.inputs[0]).shape
        top, left, bottom, right = layer.pad
        kh, kw = effective_kernel(layer)
        if len(shape) == 3 and (shape[0] + top + bottom < kh or shape[1] + left + right < kw):
            raise FrontendError(path, f"layer {layer.name!r} ({layer.op}): its {kh}x{kw} window is larger than its "
                                f"{shape[0]}x{shape[1]} input with its padding",
                                "check the model's input shape")

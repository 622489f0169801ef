"""ONNX to IR. One parser per input dialect; the dialect is recognized from
the graph's ops, never from the file name.

    graph, weights = import_onnx(path, name)
"""

import numpy as np

from ..errors import FrontendError
from .builder import Builder
from .onnxgraph import load
from .qdq import QdqParser
from .qoperator import QOperatorParser

FRONTEND_VERSION = "1"

QOPERATOR_OPS = {"QLinearConv", "QLinearMatMul", "QGemm", "QLinearAdd",
                 "QLinearGlobalAveragePool", "QLinearAveragePool"}
PARSERS = {"qdq": QdqParser, "qoperator": QOperatorParser}


def _integer_valued(g):
    """True when every float initializer holds whole numbers (integer dialects)."""
    seen = False
    for name in g.inits:
        arr = g.array(name)
        if arr.dtype.kind == "f" and arr.size:
            seen = True
            if not np.all(np.equal(np.mod(arr, 1), 0)):
                return False
    return seen


def detect_dialect(g):
    ops = {n.op_type for n in g.graph.node}
    if "RequantShift" in ops:
        return "quantlib"
    if ops & QOPERATOR_OPS:
        return "qoperator"
    if {"QuantizeLinear", "DequantizeLinear"} & ops:
        return "qdq"
    if _integer_valued(g):
        return "nemo"
    return "float"


def import_onnx(path, name):
    """Lower the ONNX file at `path` to (Graph, {key: array})."""
    g = load(path)
    dialect = detect_dialect(g)
    if dialect == "float":
        raise FrontendError(path, "the model is not quantized (float weights, no QuantizeLinear/"
                            "DequantizeLinear or QLinear* ops)",
                            "quantize it, e.g. onnxruntime.quantization.quantize_static with QuantFormat.QDQ")
    parser = PARSERS.get(dialect)
    if parser is None:
        raise FrontendError(path, f"the {dialect} integer dialect is not supported yet")
    return parser(g, Builder(name, dialect, path)).parse()

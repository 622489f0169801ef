"""The ONNX validity gate for the standard dialects (QDQ, QOperator): a
model ONNX Runtime itself refuses (opset 99, string inputs, float16
scales, a Conv with auto_pad, a DequantizeLinear axis out of range, zero
points of the wrong length) is not a network tessera should build and call
passing. Checked before lowering: the ONNX checker in full mode (types and
shapes), every quantization scale finite and positive, and ONNX Runtime
accepting the model."""

import numpy as np
import onnx
from onnx import numpy_helper

from ..errors import FrontendError

# op -> the input positions that are scales
SCALE_INPUTS = {"QuantizeLinear": (1,), "DequantizeLinear": (1,), "QLinearConv": (1, 4, 6),
                "QLinearMatMul": (1, 4, 6), "QGemm": (1, 4, 7), "QLinearAdd": (1, 4, 6),
                "QLinearGlobalAveragePool": (1, 3), "QLinearAveragePool": (1, 3)}


_ORT_TYPES = {"tensor(float)": np.float32, "tensor(int8)": np.int8, "tensor(uint8)": np.uint8}


def _first_line(err):
    return (str(err).strip().splitlines() or [type(err).__name__])[0]


def check_scales(model, path):
    """Every quantization scale given as an initializer is finite and > 0
    (NaN, inf or 0 would make every requantization meaningless)."""
    inits = {i.name: i for i in model.graph.initializer}
    for node in model.graph.node:
        for pos in SCALE_INPUTS.get(node.op_type, ()):
            if pos >= len(node.input) or node.input[pos] not in inits:
                continue
            name = node.input[pos]
            try:
                arr = numpy_helper.to_array(inits[name])
            except Exception as err:
                raise FrontendError(path, f"initializer {name!r}: unreadable ({_first_line(err)})",
                                    "re-export the model") from None
            if arr.dtype.kind != "f":
                continue
            bad = ~np.isfinite(arr) | (arr <= 0)
            if bad.any():
                value = arr.reshape(-1)[np.argmax(bad.reshape(-1))]
                raise FrontendError(path, f"node {node.name!r} ({node.op_type}): scale {name!r} holds {value}",
                                    "a quantization scale must be a finite number above 0; re-quantize the model")


def check_onnx(model, path):
    """The checker in full mode and the scales."""
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as err:
        raise FrontendError(path, f"ONNX checker: {_first_line(err)}", "re-export the model") from None
    check_scales(model, path)


def ort_refusal(model, path):
    """A FrontendError when ONNX Runtime refuses to load the model or to run
    it once on zeros (some refusals, a zero point of the wrong length or an
    axis out of range, only show when a node runs); None when it accepts."""
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    try:
        session = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        feeds = {}
        for inp in session.get_inputs():
            dtype = _ORT_TYPES.get(inp.type)
            if dtype is None:
                return FrontendError(path, f"input {inp.name!r} has type {inp.type}",
                                     "tessera takes float or 8-bit integer inputs")
            feeds[inp.name] = np.zeros([d if isinstance(d, int) and d > 0 else 1 for d in inp.shape], dtype)
        session.run(None, feeds)
    except Exception as err:
        return FrontendError(path, f"ONNX Runtime refuses the model: {_first_line(err)[:300]}",
                             "fix or re-export the model; tessera builds only models ONNX Runtime can run")
    return None

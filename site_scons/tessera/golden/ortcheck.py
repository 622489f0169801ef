"""Compare the golden model with ONNX Runtime on a standard QDQ/QOperator
model, layer by layer.

ONNX Runtime requantizes in float (round half to even); tessera uses a 32-bit
fixed-point multiplier with round half up, as the MCU kernels do. The two
agree within one LSB per layer. The check feeds every golden layer the
activations ONNX Runtime itself computed, so each layer's difference is
measured alone instead of accumulating through the network.
"""

import numpy as np
import onnx

from ..errors import TesseraError
from . import run, run_layer


def _to_hwc(arr, shape, layout=None):
    """ORT's array (NCHW, NCL, NC, or channel-last NHWC as tf2onnx leaves
    some tensors; held as it is: source_layout "hwc", as a recurrent
    layer's sequence) as tessera's [H, W, C]."""
    arr = np.asarray(arr)
    if layout == "hwc":
        return arr.reshape(shape)
    h, w, c = shape
    if arr.ndim == 4:
        if list(arr.shape[1:]) == [h, w, c] and list(arr.shape[1:]) != [c, h, w]:
            return arr[0]
        arr = arr[0].transpose(1, 2, 0)
    elif arr.ndim == 3:
        arr = arr[0].transpose(1, 0)[None]
    return arr.reshape(shape)


def _feed(inp, t, stored, layout):
    """An ONNX Runtime feed for a graph input from its stored HWC value."""
    q = stored.astype(np.int64) + t.shift
    shape = [d if isinstance(d, int) else 1 for d in inp.shape]
    if "int8" in inp.type:               # tensor(int8) / tensor(uint8): the input is quantized
        arr, dtype = q, (np.uint8 if "uint8" in inp.type else np.int8)
    else:
        arr, dtype = (q - t.zero_point) * t.scale, np.float32
    if layout in ("nhwc", "nlc") or t.source_layout == "hwc":   # the user's channel-last array is tessera's HWC
        return arr.reshape(shape).astype(dtype)
    # HWC -> CHW, then the ONNX input's own shape (a flattened input keeps
    # ONNX's C-order flatten of NCHW)
    return arr.transpose(2, 0, 1).reshape(shape).astype(dtype)


def ort_activations(onnx_path, graph, inputs):
    """Every IR tensor ONNX Runtime computes too (stored domain, HWC); IR
    tensors that normalization made are not in it."""
    import onnxruntime as ort

    model = onnx.load(onnx_path) if isinstance(onnx_path, str) else onnx_path
    known = {o.name for o in model.graph.output}
    produced = {o for n in model.graph.node for o in n.output}
    elem = {"int8": onnx.TensorProto.INT8, "uint8": onnx.TensorProto.UINT8,
            "int32": onnx.TensorProto.INT32}
    names = [n for n in graph.tensors if n in produced]
    for name in names:
        if name not in known:
            t = graph.tensors[name]
            model.graph.output.append(onnx.helper.make_tensor_value_info(name, elem[t.source_dtype], None))
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    try:
        sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    except Exception as err:   # the import gate ran ORT on the model; with every layer an output it may not
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise TesseraError(onnx_path if isinstance(onnx_path, str) else graph.name,
                           f"ONNX Runtime refuses the model with every layer as an output: {first[:200]}",
                           "report it with the model") from None
    layouts = (graph.notes or {}).get("input_layout", {})
    feeds = {}
    for inp, name in zip(sess.get_inputs(), graph.inputs):
        feeds[inp.name] = _feed(inp, graph.tensor(name), np.asarray(inputs[name]), layouts.get(inp.name))
    results = sess.run(names, feeds)
    out = {}
    for name, arr in zip(names, results):
        t = graph.tensor(name)
        out[name] = (_to_hwc(arr, t.shape, t.source_layout).astype(np.int64) - t.shift)
    return out


def compare(onnx_path, graph, weights, inputs, golden_values=None, outputs=None):
    """Per layer: max |golden - ORT| with both fed ORT's inputs, and the share
    of elements that differ. Returns a list of dicts in layer order. A
    layer whose output is not in the ONNX graph (one normalization or the
    lowering made: a requantization, a pool before its rescale) has no row;
    it is computed from ORT's inputs all the same and feeds the layers
    after it (the golden value where even its inputs are not ORT's).
    `outputs`: a dict to receive ORT's own values of the graph's outputs
    it has (stored domain, HWC), for the report's top outputs."""
    ref = ort_activations(onnx_path, graph, inputs)
    if outputs is not None:
        outputs.update({name: ref[name] for name in graph.outputs if name in ref})
    if golden_values is None:
        golden_values = run(graph, weights, inputs)
    rows = []
    own = {}   # tessera's values, from ORT's inputs, of tensors ORT does not have
    for layer in graph.layers:
        feeds = {name: ref[name] if name in ref else own.get(name, golden_values[name]) for name in layer.inputs}
        mine = run_layer(layer, graph, weights, feeds).astype(np.int64)
        if layer.output not in ref:
            own[layer.output] = mine
            continue
        diff = np.abs(mine - ref[layer.output])
        rows.append({"layer": layer.name, "max_diff": int(diff.max()),
                     "differing": float(np.mean(diff > 0))})
    return rows

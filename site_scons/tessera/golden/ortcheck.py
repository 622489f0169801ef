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

from . import run_layer


def _nchw_to_hwc(arr, shape):
    arr = np.asarray(arr)
    if arr.ndim == 4:
        arr = arr[0].transpose(1, 2, 0)
    elif arr.ndim == 3:
        arr = arr[0].transpose(1, 0)[None]
    return arr.reshape(shape)


def ort_activations(onnx_path, graph, inputs):
    """Every IR tensor as ONNX Runtime computes it (stored domain, HWC)."""
    import onnxruntime as ort

    model = onnx.load(onnx_path)
    known = {o.name for o in model.graph.output}
    elem = {"int8": onnx.TensorProto.INT8, "uint8": onnx.TensorProto.UINT8,
            "int32": onnx.TensorProto.INT32}
    # tensors the lowering added (a pool before its rescale) are not in ONNX
    produced = {o for n in model.graph.node for o in n.output} | {i.name for i in model.graph.input}
    for name, t in graph.tensors.items():
        if name not in known and name in produced:
            model.graph.output.append(onnx.helper.make_tensor_value_info(name, elem[t.source_dtype], None))
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    feeds = {}
    onnx_inputs = [i for i in sess.get_inputs()]
    for inp, name in zip(onnx_inputs, graph.inputs):
        t = graph.tensor(name)
        q = inputs[name].astype(np.float64) + t.shift
        real = (q - t.zero_point) * t.scale
        # HWC -> CHW, then the ONNX input's own shape (a flattened input
        # keeps ONNX's C-order flatten of NCHW)
        shape = [d if isinstance(d, int) else 1 for d in inp.shape]
        feeds[inp.name] = real.transpose(2, 0, 1).reshape(shape).astype(np.float32)
    names = [n for n in graph.tensors if n in produced]
    results = sess.run(names, feeds)
    out = {}
    for name, arr in zip(names, results):
        t = graph.tensor(name)
        out[name] = (_nchw_to_hwc(arr, t.shape).astype(np.int64) - t.shift)
    return out


def compare(onnx_path, graph, weights, inputs):
    """Per layer: max |golden - ORT| with both fed ORT's inputs, and the share
    of elements that differ. Returns a list of dicts in layer order."""
    ref = ort_activations(onnx_path, graph, inputs)
    rows = []
    own = {}   # golden values of tensors ONNX Runtime does not have
    for layer in graph.layers:
        feeds = {name: ref[name] if name in ref else own[name] for name in layer.inputs}
        mine = run_layer(layer, graph, weights, feeds).astype(np.int64)
        if layer.output not in ref:
            own[layer.output] = mine
            continue
        diff = np.abs(mine - ref[layer.output])
        rows.append({"layer": layer.name, "max_diff": int(diff.max()),
                     "differing": float(np.mean(diff > 0))})
    return rows

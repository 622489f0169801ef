"""Integer golden model: runs the IR layer by layer in NumPy.

`run(graph, weights, inputs)` returns every tensor's stored value (HWC,
int8 or int32 as the IR says). The firmware must match it bit for bit.
"""

import numpy as np

from . import ops, recurrent
from ..errors import TesseraError
from ..ir import RESIZE_FRAC

GOLDEN_VERSION = "1"

_STORAGE = {"int8": np.int8, "int32": np.int32}


def run_layer(layer, graph, weights, values):
    """Compute one layer's output from `values` (tensor name -> array)."""
    x = values[layer.inputs[0]]
    w = weights[layer.weights] if layer.weights else None
    if w is not None and getattr(layer, "weight_offset", None):
        w = w.astype(np.int64) + layer.weight_offset
    b = weights[layer.bias] if layer.bias else None
    op = layer.op
    if op == "conv2d":
        acc = ops.conv2d(x, w, b, layer.input_offset, layer.kernel, layer.stride, layer.pad, layer.dilation)
    elif op == "depthwise":
        acc = ops.depthwise(x, w, b, layer.input_offset, layer.kernel, layer.stride, layer.pad, layer.dilation)
    elif op == "pointwise":
        acc = ops.pointwise(x, w, b, layer.input_offset)
    elif op == "linear":
        acc = ops.linear(x, w, b, layer.input_offset)
    elif op == "avgpool":
        acc = ops.avgpool_sum(x, layer.input_offset, layer.kernel, layer.stride)
    elif op == "maxpool":
        acc = ops.maxpool(x, layer.kernel, layer.stride, layer.pad)
    elif op == "add":
        acc = ops.add(x, values[layer.inputs[1]], layer.in_mul, layer.in_offset, layer.in_shift)
    elif op == "matmul":
        acc = ops.matmul(x, values[layer.inputs[1]], layer.in_offset, bool(layer.trans_b))
    elif op == "mul":
        acc = ops.mul(x, values[layer.inputs[1]], layer.in_offset)
    elif op == "concat":
        acc = ops.concat([values[n] for n in layer.inputs], layer.in_mul, layer.in_offset, layer.axis)
    elif op == "resize":
        h, w_, _ = graph.tensor(layer.output).shape
        acc = ops.resize(x, layer.input_offset, layer.table, h, w_, RESIZE_FRAC)
    elif op == "lut":
        acc = ops.lut(x, layer.table if layer.table is not None else w)
    elif op == "softmax":
        acc = ops.softmax(x, layer.table, layer.requant, layer.mode)
    elif op == "lstm":
        rnn = layer.rnn
        arrays = recurrent.unpack(rnn, w)
        cell = {"lstm": recurrent.lstm, "ops": recurrent.ops_cell}.get(rnn["cell"], recurrent.onnx_cell)
        acc = cell(x.reshape(rnn["steps"], rnn["n_input"]), rnn, arrays)
        acc = acc.reshape(1, acc.shape[0], -1)
    elif op == "transpose":
        acc = ops.transpose(x, layer.perm, layer.dims, graph.tensor(layer.output).shape)
    elif op == "argmax":
        acc = ops.argmax(x)
    elif op == "reshape":
        acc = ops.reshape(x, graph.tensor(layer.output).shape)
    elif op == "gather":
        acc = ops.gather(x, layer.table, layer.axis, layer.fill)
    elif op == "layernorm":
        acc = ops.layernorm(x, layer.input_offset, layer.table, layer.requant, layer.mode)
    else:
        raise ValueError(f"golden model has no op {op!r}")
    out = graph.tensor(layer.output)
    # softmax applies its own requantization (a division, not a multiply),
    # and so does Deeploy's iLayerNorm
    own = op == "softmax" or (op == "layernorm" and layer.mode == "ilayernorm")
    y = ops.requantize(acc, layer.requant) if layer.requant is not None and not own else acc
    info = np.iinfo(_STORAGE[out.dtype])
    if y.min() < info.min or y.max() > info.max:
        raise OverflowError(f"layer {layer.name}: output outside {out.dtype}")
    y = y.astype(_STORAGE[out.dtype])
    assert list(y.shape) == list(out.shape), (layer.name, y.shape, out.shape)
    return y


class GoldenError(TesseraError):
    """A layer whose integer arithmetic leaves the widths its framework
    computes in (an int32 accumulator that overflows on the golden input):
    no exact answer exists to check the firmware against."""


def run(graph, weights, inputs):
    """Every tensor's value: inputs (name -> stored array) plus each layer's output."""
    values = {}
    for name in graph.inputs:
        t = graph.tensor(name)
        values[name] = np.asarray(inputs[name]).astype(_STORAGE[t.dtype]).reshape(t.shape)
    for layer in graph.layers:
        try:
            values[layer.output] = run_layer(layer, graph, weights, values)
        except OverflowError as err:
            # a model's numbers (weights, bias, multipliers) out of range: one
            # line naming the layer and the source node(s) it came from
            source = f" (from {', '.join(layer.source)})" if layer.source else ""
            raise GoldenError(f"layer {layer.name}{source}", str(err),
                              "the model's weights, biases or scales are out of range for its integer "
                              "arithmetic; re-quantize it") from None
    return values


def random_input(graph, seed):
    """The seeded golden input for zoo models.

    Where the input's scale is known, draw standard-normal real values (as
    the calibration did) and quantize them, so the input exercises the range
    the network was calibrated for; otherwise draw uniformly over the dtype.
    """
    rng = np.random.default_rng(seed)
    out = {}
    for name in graph.inputs:
        t = graph.tensor(name)
        info = np.iinfo(_STORAGE[t.dtype])
        if t.scale:
            real = rng.standard_normal(size=t.shape)
            q = np.rint(real / t.scale) + t.zero_point - t.shift
        else:
            q = rng.integers(info.min, info.max + 1, size=t.shape)
        out[name] = np.clip(q, info.min, info.max).astype(_STORAGE[t.dtype])
    return out

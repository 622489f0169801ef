"""ONNX QOperator dialect: QLinearConv, QLinearMatMul, QGemm, QLinearAdd,
QLinear(Global)AveragePool and MaxPool on 8-bit tensors, with
QuantizeLinear at the input and DequantizeLinear at the output (ONNX
Runtime's QuantFormat.QOperator)."""

import numpy as np

from ..errors import FrontendError
from .geometry import conv_geometry, hwc, out_hw, pool_geometry
from .onnxgraph import attrs, input_quantizers


class QOperatorParser:
    def __init__(self, g, builder):
        self.g = g
        self.b = builder
        self.alias = {}

    def _const(self, node, i, what):
        if len(node.input) <= i or not node.input[i]:
            return None
        if not self.g.is_const(node.input[i]):
            raise FrontendError(self.g.where(node), f"{what} is not a constant")
        return np.asarray(self.g.array(node.input[i]))

    def _scalar(self, node, i, what):
        arr = self._const(node, i, what)
        if arr is None:
            return 0
        if arr.size != 1:
            raise FrontendError(self.g.where(node), f"{what} must be per tensor",
                                "quantize activations per tensor")
        return arr.reshape(()).item()

    def _in(self, node, i):
        name = self.alias.get(node.input[i], node.input[i])
        if name not in self.b.tensors:
            raise FrontendError(self.g.where(node), f"input {node.input[i]!r} is not a quantized activation")
        return name

    def _out(self, node, scale_i, zp_i, shape):
        """Register the output tensor; `shape` [H, W, C] comes from the op's
        geometry (ONNX shape inference does not know com.microsoft ops)."""
        scale = float(self._scalar(node, scale_i, "output scale"))
        zp_arr = self._const(node, zp_i, "output zero point")
        zp = int(zp_arr.reshape(()).item()) if zp_arr is not None else 0
        dtype = str(zp_arr.dtype) if zp_arr is not None else "uint8"
        name = node.output[0]
        self.b.tensor(name, shape, dtype, scale, zp)
        return name

    def _check_in_params(self, node, x, scale_i, zp_i):
        t = self.b.tensors[x]
        scale = float(self._scalar(node, scale_i, "input scale"))
        zp = int(self._scalar(node, zp_i, "input zero point"))
        if not np.isclose(scale, t.scale, rtol=1e-6) or zp != t.zero_point:
            raise FrontendError(self.g.where(node), "input quantization parameters differ from the "
                                "producer's output parameters")

    def _weights(self, node, wi, si, zi):
        w = self._const(node, wi, "weights")
        scale = self._const(node, si, "weight scale").astype(np.float64)
        zp = self._const(node, zi, "weight zero point")
        if w.dtype != np.int8 or (zp is not None and np.any(zp != 0)):
            raise FrontendError(self.g.where(node), f"weights are {w.dtype} with non-zero zero point",
                                "use symmetric int8 weights (weight_type=QInt8)")
        return w.astype(np.int64), scale

    def parse(self):
        g, b = self.g, self.b
        skip = set()
        for name in g.input_names:
            qs, views = input_quantizers(g, name)
            skip.update(id(v) for v in views)
            for q in qs:
                scale = float(self._scalar(q, 1, "input scale"))
                zp_arr = self._const(q, 2, "input zero point")
                b.tensor(q.output[0], hwc(g.shape(q.input[0]), g.path), str(zp_arr.dtype), scale,
                         int(zp_arr.reshape(()).item()))
                b.inputs.append(q.output[0])
        for node in g.graph.node:
            if node.op_type in ("QuantizeLinear", "Constant") or id(node) in skip:
                continue
            if node.op_type == "DequantizeLinear":
                if node.output[0] not in g.output_names:
                    raise FrontendError(g.where(node), "DequantizeLinear inside the graph",
                                        "only the graph outputs may be dequantized")
                continue
            handler = getattr(self, "op_" + node.op_type, None)
            if handler is None:
                raise FrontendError(g.where(node), "unsupported op",
                                    "tessera lowers QLinearConv, QLinearMatMul, QGemm, QLinearAdd, "
                                    "QLinear(Global)AveragePool, MaxPool, Flatten/Reshape")
            handler(node)
        for name in g.output_names:
            prod = g.producer.get(name)
            if prod is None or prod.op_type != "DequantizeLinear":
                raise FrontendError(g.path, f"graph output {name!r} is not dequantized from an activation")
            b.outputs.append(self.alias.get(prod.input[0], prod.input[0]))
        return b.finish()

    def op_QLinearConv(self, node):
        g, b = self.g, self.b
        x = self._in(node, 0)
        self._check_in_params(node, x, 1, 2)
        w, w_scale = self._weights(node, 3, 4, 5)
        if w.ndim == 3:
            w = w[:, :, None, :]
        bias = self._const(node, 8, "bias")
        geo = conv_geometry(node, b.tensors[x].shape, list(w.shape), g.where(node))
        y = self._out(node, 6, 7, out_hw(b.tensors[x].shape, geo) + [w.shape[0]])
        b.conv(node.name or "conv", x, y, w, w_scale, bias, geo, g.where(node), None, [node.name])

    def op_QLinearMatMul(self, node):
        x = self._in(node, 0)
        self._check_in_params(node, x, 1, 2)
        w, w_scale = self._weights(node, 3, 4, 5)
        y = self._out(node, 6, 7, [1, 1, w.shape[1]])
        self.b.linear(node.name or "linear", x, y, w.T, w_scale, None, self.g.where(node), sources=[node.name])

    def op_QGemm(self, node):
        a = attrs(node)
        if a.get("transA", 0) or a.get("alpha", 1.0) != 1.0:
            raise FrontendError(self.g.where(node), "QGemm with transA or alpha != 1 is not supported")
        if len(node.input) < 8 or not node.input[7]:
            raise FrontendError(self.g.where(node), "QGemm with a float output is not supported",
                                "quantize the Gemm output")
        x = self._in(node, 0)
        self._check_in_params(node, x, 1, 2)
        w, w_scale = self._weights(node, 3, 4, 5)
        if not a.get("transB", 0):
            w = w.T
        bias = self._const(node, 6, "bias")
        y = self._out(node, 7, 8, [1, 1, w.shape[0]])
        self.b.linear(node.name or "linear", x, y, w, w_scale, bias, self.g.where(node), sources=[node.name])

    def op_QLinearAdd(self, node):
        xa, xb = self._in(node, 0), self._in(node, 3)
        self._check_in_params(node, xa, 1, 2)
        self._check_in_params(node, xb, 4, 5)
        y = self._out(node, 6, 7, list(self.b.tensors[xa].shape))
        self.b.add(node.name or "add", xa, xb, y, self.g.where(node), None, [node.name])

    def op_QLinearGlobalAveragePool(self, node):
        if attrs(node).get("channels_last", 0):
            raise FrontendError(self.g.where(node), "channels_last pooling is not supported")
        x = self._in(node, 0)
        self._check_in_params(node, x, 1, 2)
        h, w, c = self.b.tensors[x].shape
        y = self._out(node, 3, 4, [1, 1, c])
        self.b.avgpool(node.name or "gap", x, y, [h, w], [1, 1], self.g.where(node), [node.name])

    def op_QLinearAveragePool(self, node):
        x = self._in(node, 0)
        self._check_in_params(node, x, 1, 2)
        geo = pool_geometry(node, self.b.tensors[x].shape, self.g.where(node), allow_pad=False)
        y = self._out(node, 3, 4, out_hw(self.b.tensors[x].shape, geo) + [self.b.tensors[x].shape[2]])
        self.b.avgpool(node.name or "avgpool", x, y, geo["kernel"], geo["stride"],
                       self.g.where(node), [node.name])

    def op_MaxPool(self, node):
        x = self._in(node, 0)
        t = self.b.tensors[x]
        geo = pool_geometry(node, t.shape, self.g.where(node), allow_pad=True)
        y = self.b.tensor(node.output[0], out_hw(t.shape, geo) + [t.shape[2]],
                          t.source_dtype, t.scale, t.zero_point)
        self.b.maxpool(node.name or "maxpool", x, y, geo["kernel"], geo["stride"], geo["pad"],
                       self.g.where(node), [node.name])

    def _view(self, node):
        src = self._in(node, 0)
        self.alias[node.output[0]] = src

    op_Flatten = op_Reshape = op_Squeeze = op_Unsqueeze = op_Identity = _view

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
        """(weights less their zero point, scales): int8, or up to 9 bits for
        asymmetric int8/uint8 weights (the builder gives those a weight offset)."""
        w = self._const(node, wi, "weights")
        scale = self._const(node, si, "weight scale").astype(np.float64)
        zp = self._const(node, zi, "weight zero point")
        if w.dtype not in (np.int8, np.uint8) or (zp is not None and zp.size > 1 and np.any(zp != zp.flat[0])):
            raise FrontendError(self.g.where(node), f"weights are {w.dtype} with a zero point per channel",
                                "use 8-bit weights with one zero point (symmetric int8 is what the kernels run fastest)")
        return w.astype(np.int64) - (0 if zp is None else int(zp.flat[0])), scale

    def _direct_input(self, name):
        """An 8-bit graph input read by QLinear ops themselves (ONNX's own
        QLinearConv test): its parameters are the readers' input parameters."""
        g = self.g
        dtype = g.dtypes.get(name)
        users = g.consumers.get(name, [])
        if dtype not in ("int8", "uint8") or not users or any(
                not u.op_type.startswith("QLinear") or list(u.input).index(name) != 0 for u in users):
            return False
        u = users[0]
        scale = float(self._scalar(u, 1, "input scale"))
        zp = int(self._scalar(u, 2, "input zero point"))
        self.b.tensor(name, hwc(g.shape(name), g.path), dtype, scale, zp)
        self.b.inputs.append(name)
        return True

    def parse(self):
        g, b = self.g, self.b
        skip = set()
        for name in g.input_names:
            if self._direct_input(name):
                continue
            qs, views = input_quantizers(g, name)
            skip.update(id(v) for v in views)
            for q in qs:
                scale = float(self._scalar(q, 1, "input scale"))
                zp_arr = self._const(q, 2, "input zero point")
                b.tensor(q.output[0], hwc(g.shape(q.input[0]), g.path), str(zp_arr.dtype), scale,
                         int(zp_arr.reshape(()).item()))
                b.inputs.append(q.output[0])
        # ONNX Runtime leaves ops without a QLinear form in float between
        # DequantizeLinear and QuantizeLinear (HardSwish, Tanh, PRelu, ...):
        # those islands are lowered as in the QDQ dialect
        from .qdq import COMPUTE_OPS, LUT_OPS, QdqParser

        qdq = QdqParser(g, b)
        qdq.alias = self.alias
        for node in g.graph.node:
            if node.op_type in ("QuantizeLinear", "Constant") or id(node) in skip | qdq.handled:
                continue
            if node.op_type == "DequantizeLinear":
                continue   # read by a float island or a graph output (checked below)
            handler = getattr(self, "op_" + node.op_type, None)
            if handler is None and node.op_type in COMPUTE_OPS + LUT_OPS:
                qdq.handled.add(id(node))
                handler = getattr(qdq, "op_" + node.op_type, None) or qdq.op_lut
            if handler is None:
                raise FrontendError(g.where(node), "unsupported op",
                                    "tessera lowers QLinearConv, QLinearMatMul, QGemm, QLinearAdd, QLinearMul, "
                                    "QLinearConcat, QLinearSigmoid, QLinearLeakyRelu, QLinearSoftmax, "
                                    "QLinear(Global)AveragePool, MaxPool, Resize, Flatten/Reshape")
            handler(node)
        for name in g.output_names:
            prod = g.producer.get(name)
            if prod is not None and prod.op_type.startswith("QLinear") and name in b.tensors:
                b.outputs.append(self.alias.get(name, name))    # an 8-bit output
                continue
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
        y = self._out(node, 6, 7, self._broadcast_shape(xa, xb))
        self.b.add(node.name or "add", xa, xb, y, self.g.where(node), None, [node.name])

    def _broadcast_shape(self, xa, xb):
        ta, tb = self.b.tensors[xa], self.b.tensors[xb]
        return [max(a, b) for a, b in zip(ta.shape, tb.shape)]   # the builder checks the rule

    def _rank(self, name):
        """The ONNX rank of an activation (contrib ops have no inferred
        shapes: then the graph input's rank)."""
        shape = self.g.shapes.get(name)
        if shape is not None:
            return len(shape)
        return len(self.g.shape(self.g.input_names[0]))

    def op_QLinearMul(self, node):
        xa, xb = self._in(node, 0), self._in(node, 3)
        self._check_in_params(node, xa, 1, 2)
        self._check_in_params(node, xb, 4, 5)
        y = self._out(node, 6, 7, self._broadcast_shape(xa, xb))
        self.b.mul(node.name or "mul", xa, xb, y, self.g.where(node), None, [node.name])

    def op_QLinearConcat(self, node):
        g = self.g
        xs = []
        for i in range(2, len(node.input), 3):
            x = self._in(node, i)
            self._check_in_params(node, x, i + 1, i + 2)
            xs.append(x)
        rank = self._rank(node.input[2])
        axis = attrs(node).get("axis", 1)
        axis = axis + rank if axis < 0 else axis
        table = {4: {1: 2, 2: 0, 3: 1}, 3: {1: 2, 2: 1}, 2: {1: 2}}.get(rank, {})
        if axis not in table:
            raise FrontendError(g.where(node), f"concatenation along axis {attrs(node).get('axis', 1)} "
                                f"of a rank-{rank} tensor", "concatenate along channels, height or width")
        shape = list(self.b.tensors[xs[0]].shape)
        shape[table[axis]] = sum(self.b.tensors[x].shape[table[axis]] for x in xs)
        y = self._out(node, 0, 1, shape)
        self.b.concat(node.name or "concat", xs, y, table[axis], g.where(node), [node.name])

    def _table_op(self, node, fn, a):
        from .tables import lut_table

        x = self._in(node, 0)
        self._check_in_params(node, x, 1, 2)
        y = self._out(node, 3, 4, list(self.b.tensors[x].shape))
        table = lut_table(fn, a, self.b.qparams(x), self.b.qparams(y))
        self.b.lut(node.name or fn.lower(), x, y, table, [node.name])

    def op_QLinearSigmoid(self, node):
        self._table_op(node, "Sigmoid", {})

    def op_QLinearLeakyRelu(self, node):
        self._table_op(node, "LeakyRelu", {"alpha": attrs(node).get("alpha", 0.01)})

    def op_QLinearSoftmax(self, node):
        x = self._in(node, 0)
        self._check_in_params(node, x, 1, 2)
        h, w, c = self.b.tensors[x].shape
        rank = self._rank(node.input[0])
        axis = attrs(node).get("axis", -1)
        axis = axis + rank if axis < 0 else axis
        if not (axis == 1 or (h * w == 1 and axis == rank - 1)):
            raise FrontendError(self.g.where(node), f"Softmax over axis {attrs(node).get('axis', -1)}",
                                "apply softmax over the channels")
        y = self._out(node, 3, 4, [h, w, c])
        self.b.softmax(node.name or "softmax", x, y, self.g.where(node), sources=[node.name])

    def op_Resize(self, node):
        """Resize on the quantized tensor itself (output parameters = input's)."""
        from .qdq import resize_geometry
        from .tables import resize_table

        g = self.g
        x = self._in(node, 0)
        t = self.b.tensors[x]
        mode, coord, rule, scales = resize_geometry(g, node)
        out_shape = g.shape(node.output[0])
        hwc_out = hwc(out_shape, g.where(node))
        y = self.b.tensor(node.output[0], hwc_out, t.source_dtype, t.scale, t.zero_point)
        if len(out_shape) == 3:
            scales = [1.0] + scales
        table = resize_table(t.shape[:2], hwc_out[:2], scales, mode, coord, rule)
        self.b.resize(node.name or "resize", x, y, table, "nearest" if mode == "nearest" else "bilinear",
                      g.where(node), [node.name])

    op_Upsample = op_Resize

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

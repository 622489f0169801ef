"""Standard ONNX QDQ dialect (ONNX Runtime's quantize_static, PyTorch export).

Float ops sit between DequantizeLinear (their activation and weight inputs)
and QuantizeLinear (their output):

    Q(x) -> DQ -> Conv(DQ(w_int8), DQ(b_int32)) [-> Relu | Clip] -> Q(y)

Each such island becomes one IR layer. Flatten/Reshape between a DQ and a
Gemm (or wrapped in their own Q/DQ pair) only change the view: tessera's
tensors stay HWC and the linear layer's weights are permuted instead.
Transformers' token-major tensors, attention and its row-wise ops:
qdq_tokens.py.

Data movement between a DQ and a Q of the same parameters (Transpose,
Reshape, Flatten, Squeeze, Unsqueeze: a detection head's NCHW -> NHWC ->
[1, N, k]) is composed as index arrays (frontend.movement) and emitted
only when a layer reads it: nothing, a reshape, a transpose or a gather.
A tensor is held channel first (NCHW, NCL, NC as [H, W, C]) or, where
that moves nothing (a head's [1, N, k]), as it is (source_layout "hwc"):
Concat and Softmax take either.
"""

import numpy as np

from ..errors import FrontendError
from . import movement
from .geometry import conv_geometry, hwc, out_hw, pool_geometry
from .layout import ir_shape
from .onnxgraph import VIEW_OPS, attrs, input_quantizers
from .qdq_tokens import TokenOps

CLAMP_OPS = ("Relu", "Clip")
COMPUTE_OPS = ("Conv", "Gemm", "MatMul", "Add", "MaxPool", "AveragePool", "GlobalAveragePool",
               "Mul", "Concat", "Resize", "Upsample", "Softmax", "ReduceMean", "GlobalMaxPool", "PRelu", "Pad",
               "Max", "Min", "LayerNormalization", "LSTM", "GRU")
# float ops only found inside elementwise islands (islands.py: one table each)
ISLAND_OPS = ("Div", "Sub", "Erf", "Pow", "Sqrt", "Neg", "Abs")
# Unary float ops between DQ and Q that become an int8 lookup table (Relu and
# Clip too when they stand alone, not folded into the op before them).
LUT_OPS = ("Sigmoid", "Tanh", "HardSigmoid", "HardSwish", "LeakyRelu", "Elu", "Relu", "Clip")


def _scalar(arr):
    arr = np.asarray(arr)
    if arr.size != 1:
        return None
    return arr.reshape(()).item()


class QdqParser(TokenOps):
    def __init__(self, g, builder):
        from .normalize import _Graph

        self.g = g
        self.b = builder
        self.handled = set()
        self.alias = {}          # Q output name -> IR tensor it merely re-views
        self.views = {}          # Q output name -> (IR tensor, index array of the ONNX tensor, node)
        self.consts = _Graph(g.model, g.path)   # constants through Q/DQ (const_value)

    # ---- quantized values ------------------------------------------------

    def _dq_params(self, dq):
        """(source name, scale array, zero point array, axis) of a DequantizeLinear."""
        g = self.g
        if not g.is_const(dq.input[1]):
            raise FrontendError(g.where(dq), "scale is not a constant")
        scale = np.asarray(g.array(dq.input[1]), dtype=np.float64)
        zp = np.asarray(g.array(dq.input[2])) if len(dq.input) > 2 and dq.input[2] else np.zeros(1, np.int8)
        return dq.input[0], scale, zp, attrs(dq).get("axis", 1)

    def _q_params(self, q):
        g = self.g
        scale = _scalar(g.array(q.input[1]))
        zp_arr = g.array(q.input[2]) if len(q.input) > 2 and q.input[2] else np.zeros((), np.uint8)
        zp = _scalar(zp_arr)
        if scale is None or zp is None:
            raise FrontendError(g.where(q), "per-channel activation quantization is not supported",
                                "quantize activations per tensor")
        return float(scale), int(zp), str(np.asarray(zp_arr).dtype)

    def activation(self, name, node):
        """IR tensor feeding a float op input (through Flatten/Reshape views,
        which change nothing for an HWC tensor read by a linear layer)."""
        g = self.g
        while True:
            prod = g.producer.get(name)
            if prod is None:
                raise FrontendError(g.where(node), f"input {name!r} is not quantized",
                                    "quantize the model (QuantizeLinear before every op input)")
            if prod.op_type in VIEW_OPS:
                self.handled.add(id(prod))
                name = prod.input[0]
                continue
            if prod.op_type != "DequantizeLinear":
                raise FrontendError(g.where(node), f"input {name!r} comes from {prod.op_type} "
                                    "without a QuantizeLinear/DequantizeLinear pair between",
                                    "quantize the model with QDQ around every op")
            src = prod.input[0]
            self.handled.add(id(prod))
            if src in self.views and src not in self.alias:
                self.alias[src] = self.materialize(src, "chw")
            src = self.alias.get(src, src)
            if src not in self.b.tensors:
                raise FrontendError(g.where(node), f"input {name!r} dequantizes {src!r}, "
                                    "which is not an activation tensor tessera knows")
            return src

    def weights(self, name, node):
        """(int8 array, per-channel scales) of a DQ'd constant weight."""
        g = self.g
        dq = g.producer.get(name)
        if dq is None or dq.op_type != "DequantizeLinear" or not g.is_const(dq.input[0]):
            raise FrontendError(g.where(node), f"weights {name!r} are not a quantized constant",
                                "quantize weights to int8 (QDQ)")
        self.handled.add(id(dq))
        src, scale, zp, axis = self._dq_params(dq)
        w = np.asarray(g.array(src))
        if w.dtype not in (np.int8, np.uint8) or (zp.size > 1 and np.any(zp != zp.flat[0])):
            raise FrontendError(g.where(node), f"weights {src!r} are {w.dtype} with zero points "
                                f"{np.unique(zp)[:3].tolist()}", "use 8-bit weights with one zero point "
                                "(symmetric int8, weight_type=QInt8, runs fastest)")
        # less the zero point: up to 9 bits for asymmetric weights (the builder's weight offset)
        return w.astype(np.int64) - int(zp.flat[0]), scale, axis

    def bias(self, name, node, expected_scale):
        """int32 bias in units of s_x * s_w[c]."""
        g = self.g
        if not name:
            return None
        prod = g.producer.get(name)
        if prod is not None and prod.op_type == "DequantizeLinear" and g.is_const(prod.input[0]):
            self.handled.add(id(prod))
            src, scale, zp, _ = self._dq_params(prod)
            q = np.asarray(g.array(src)).astype(np.float64)
            real = (q - zp) * scale
        elif g.is_const(name):
            real = np.asarray(g.array(name), dtype=np.float64)
        else:
            raise FrontendError(g.where(node), f"bias {name!r} is not a constant")
        bias = np.rint(real / expected_scale)
        if np.any(np.abs(bias) >= 2 ** 62):
            raise FrontendError(g.where(node), "bias does not fit 62 bits at the accumulator scale",
                                "quantize the layer's input and weights with larger scales")
        # wider than 32 bits: the builder moves the excess into the requantization (wide_bias)
        return bias.astype(np.int64)

    def output(self, node, layout=None):
        """Follow a float op's output through Relu/Clip to its QuantizeLinear;
        register the IR tensor (held in `layout`; by default its first
        input's: elementwise ops keep it) and return (name, real clamp)."""
        g = self.g
        if layout is None:
            src = self._source_of(node.input[0]) if node.input else None
            src = self.alias.get(src, src)
            layout = (self.b.tensors[src].source_layout or "chw") if src in self.b.tensors else "chw"
        name = node.output[0]
        real_lo, real_hi = None, None
        self.leaky = None      # a LeakyRelu between the op and its Q (a Conv takes it: op_Conv)
        while True:
            users = g.consumers.get(name, [])
            if len(users) != 1:
                raise FrontendError(g.where(node), f"output {name!r} is not quantized by a single QuantizeLinear",
                                    "quantize the model with QDQ after every op")
            user = users[0]
            if user.op_type == "Relu":
                real_lo = 0.0 if real_lo is None else max(real_lo, 0.0)
            elif user.op_type == "Clip":
                lo, hi = self._clip_bounds(user)
                real_lo = lo if real_lo is None else max(real_lo, lo)
                real_hi = hi if real_hi is None else min(real_hi, hi)
            elif user.op_type == "LeakyRelu" and node.op_type == "Conv" and real_lo is None and real_hi is None:
                self.leaky = float(attrs(user).get("alpha", 0.01))
            elif user.op_type == "QuantizeLinear":
                self.handled.add(id(user))
                scale, zp, dtype = self._q_params(user)
                out = user.output[0]
                shape = hwc(g.shape(name), g.where(node)) if layout == "chw" else \
                    ir_shape(g.shape(name), layout, g.where(node))
                self.b.tensor(out, shape, dtype, scale, zp)
                if layout == "hwc":
                    self.b.tensors[out].source_layout = "hwc"
                clamp = None
                if real_lo is not None or real_hi is not None:
                    clamp = self.b.real_clamp(out, real_lo, real_hi)
                return out, clamp
            else:
                raise FrontendError(g.where(user), "unsupported op after a quantized layer",
                                    "only Relu/Clip may sit between an op and its QuantizeLinear")
            self.handled.add(id(user))
            name = user.output[0]

    def _clip_bounds(self, node):
        a = attrs(node)
        lo, hi = a.get("min"), a.get("max")
        if len(node.input) > 1 and node.input[1]:
            lo = float(_scalar(self.g.array(node.input[1])))
        if len(node.input) > 2 and node.input[2]:
            hi = float(_scalar(self.g.array(node.input[2])))
        return lo, hi

    # ---- ops -----------------------------------------------------------------

    def _unsupported(self, node):
        return FrontendError(self.g.where(node), "unsupported op",
                             f"tessera lowers {', '.join(COMPUTE_OPS + LUT_OPS)} (Relu/Clip folded "
                             "where they follow an op), and Flatten/Reshape views")

    def parse(self):
        g, b = self.g, self.b
        # an op tessera has no lowering for is named first, before the
        # layers behind it would report their input as unknown
        known = set(COMPUTE_OPS) | set(LUT_OPS) | set(CLAMP_OPS) | set(VIEW_OPS) | set(ISLAND_OPS) | {
            "QuantizeLinear", "DequantizeLinear", "Constant", "Transpose", "Split"}
        for node in g.graph.node:
            if node.op_type not in known:
                raise self._unsupported(node)
        for name in g.input_names:
            if self._quantized_input(name):
                continue
            qs, views = input_quantizers(g, name)
            self.handled.update(id(v) for v in views)
            tokens = len(g.shape(name)) == 3 and self.token_input(name)
            for q in qs:
                self.handled.add(id(q))
                scale, zp, dtype = self._q_params(q)
                if tokens:      # [1, T, F] read as tokens (a MatMul's rows): channel last
                    b.tensor(q.output[0], ir_shape(g.shape(q.input[0]), "hwc", g.path), dtype, scale, zp)
                    b.tensors[q.output[0]].source_layout = "hwc"
                else:
                    b.tensor(q.output[0], hwc(g.shape(q.input[0]), g.path), dtype, scale, zp)
                b.inputs.append(q.output[0])
        triggers = self.find_islands()
        for node in g.graph.node:
            if id(node) in triggers:
                self.emit_island(triggers[id(node)])
            elif node.op_type in COMPUTE_OPS:
                if id(node) in self.handled:
                    continue     # taken by the op before it (a Min after a Max: one table)
                self.handled.add(id(node))
                getattr(self, "op_" + node.op_type)(node)
            elif node.op_type in LUT_OPS and id(node) not in self.handled:
                self.handled.add(id(node))
                self.op_lut(node)
            elif node.op_type == "Split" and id(node) not in self.handled:
                self.op_split(node)
            elif node.op_type in VIEW_OPS + ("Transpose",) and id(node) not in self.handled:
                users = g.consumers.get(node.output[0], [])
                prod = g.producer.get(node.input[0])
                moving = node.op_type == "Transpose" or len(g.shape(node.output[0])) > 2 or (
                    prod is not None and prod.op_type == "DequantizeLinear" and prod.input[0] in self.views)
                if not moving:
                    # a flatten to [1, K]: the linear layer reading it permutes its weights
                    self._maybe_alias(node)
                elif (len(users) == 1 and users[0].op_type == "QuantizeLinear" and prod is not None
                        and prod.op_type == "DequantizeLinear" and node.output[0] not in g.output_names):
                    self.op_move(node, users[0])
        for node in g.graph.node:
            if id(node) not in self.handled and node.op_type not in ("Constant",):
                if node.op_type in ("QuantizeLinear", "DequantizeLinear"):
                    continue  # dangling Q/DQ (e.g. on constants) change nothing we run
                raise self._unsupported(node)
        for name in g.output_names:
            prod = g.producer.get(name)
            if prod is not None and prod.op_type == "QuantizeLinear" and name in b.tensors:
                b.outputs.append(self.alias.get(name, name))    # an int8 output (tf2onnx)
                continue
            if prod is None or prod.op_type != "DequantizeLinear":
                raise FrontendError(g.path, f"graph output {name!r} is not a dequantized activation",
                                    "end the graph with QuantizeLinear -> DequantizeLinear")
            src = prod.input[0]
            if src in self.views and src not in self.alias:
                self.alias[src] = self.materialize(src, self.free_layout(src))
            src = self.alias.get(src, src)
            b.outputs.append(src)
        return b.finish()

    def _quantized_input(self, name):
        """An int8/uint8 graph input read by DequantizeLinear nodes (tf2onnx
        from an int8 TFLite model): the input is the IR tensor itself."""
        g = self.g
        dtype = self.g.dtypes.get(name)
        if dtype not in ("int8", "uint8"):
            return False
        users = g.consumers.get(name, [])
        params = set()
        for u in users:
            if u.op_type != "DequantizeLinear":
                raise FrontendError(g.where(u), f"int8 graph input {name!r} is read without a DequantizeLinear",
                                    "dequantize the quantized input before any op")
            _, scale, zp, _ = self._dq_params(u)
            if scale.size != 1 or zp.size != 1:
                raise FrontendError(g.where(u), "per-channel activation quantization is not supported",
                                    "quantize activations per tensor")
            params.add((float(scale.reshape(())), int(zp.reshape(()))))
        if len(params) != 1:
            raise FrontendError(g.path, f"graph input {name!r} is dequantized with {len(params)} "
                                "different parameters", "dequantize it once")
        (scale, zp), = params
        self.b.tensor(name, hwc(g.shape(name), g.path), dtype, scale, zp)
        self.b.inputs.append(name)
        return True

    # ---- data movement ---------------------------------------------------------

    def onnx_view(self, name):
        """(IR tensor, index array) of the quantized ONNX tensor `name` (a Q
        output or an 8-bit input): a pending movement's, or the IR tensor's
        own in its layout."""
        if name in self.views and name not in self.alias:
            return self.views[name][:2]
        src = self.alias.get(name, name)
        t = self.b.tensors[src]
        shape = self.g.shape(name)
        idx = movement.onnx_index(t.shape, shape, t.source_layout or "chw")
        if idx is None or idx.size != t.size:
            raise FrontendError(self.g.path, f"tensor {name!r} of shape {shape} is held as {t.shape}")
        return src, idx

    def materialize(self, name, layout):
        """The IR tensor of a pending movement in `layout` ("chw": NCHW as
        [H, W, C]; "hwc": the ONNX order as it is)."""
        src, idx, node = self.views[name]
        order = movement.ir_order(idx, layout)
        shape = ir_shape(list(idx.shape), layout, self.g.where(node))
        if order is None:
            raise FrontendError(self.g.where(node), f"a rank-{idx.ndim} tensor read as {layout}")
        out = self.b.moved(src, order, name, shape, self.g.where(node), node.name or node.op_type.lower(),
                           sources=[node.name], layout="hwc" if layout == "hwc" else None)
        if out is None:
            raise FrontendError(self.g.where(node), "a data movement that is not one transpose, gather or "
                                f"reshape of {self.b.tensors[src].shape} (HWC)", "see docs/operators.md")
        return out

    def free_layout(self, name):
        """"hwc" when a pending movement's values are already in their ONNX
        order (a head's NHWC -> [1, N, k]) and channel first would move
        them, else "chw"."""
        if name not in self.views or name in self.alias:
            return self.b.tensors[self.alias.get(name, name)].source_layout or "chw"
        src, idx, _ = self.views[name]
        same = lambda layout: movement.classify(movement.ir_order(idx, layout), self.b.tensors[src].shape)  # noqa: E731
        return "hwc" if same("chw") != ("same",) and same("hwc") == ("same",) else "chw"

    def quantized_source(self, name, node):
        """The Q output (or 8-bit input) a DequantizeLinear output reads."""
        prod = self.g.producer.get(name)
        if prod is None or prod.op_type != "DequantizeLinear":
            raise FrontendError(self.g.where(node), f"input {name!r} is not dequantized")
        self.handled.add(id(prod))
        return prod.input[0]

    def op_move(self, node, q):
        """DQ -> Transpose / Reshape / Flatten / Squeeze / Unsqueeze -> Q of the
        same parameters: the movement, pending until a layer reads it."""
        g = self.g
        src_q = self.quantized_source(node.input[0], node)
        src, idx = self.onnx_view(src_q)
        scale, zp, _ = self._q_params(q)
        t = self.b.tensors[src]
        if (t.scale, t.zero_point) != (scale, zp):
            raise FrontendError(g.where(node), f"{node.op_type} changes the quantization parameters",
                                "keep its input's scale and zero point")
        if node.op_type == "Transpose":
            perm = attrs(node).get("perm", list(range(idx.ndim))[::-1])
            out = np.transpose(idx, perm)
        else:
            out = idx.reshape(g.shape(node.output[0]))
        self.views[q.output[0]] = (src, out, node)
        self.handled.update({id(node), id(q)})

    def op_split(self, node):
        """DQ -> Split -> Q of the same parameters on each piece: pieces of
        the input, pending like any movement."""
        g = self.g
        src_q = self.quantized_source(node.input[0], node)
        src, idx = self.onnx_view(src_q)
        a = attrs(node)
        axis = a.get("axis", 0) % idx.ndim
        if len(node.input) > 1 and node.input[1]:
            sizes = [int(v) for v in np.asarray(g.array(node.input[1])).reshape(-1)]
        elif "split" in a:
            sizes = list(a["split"])
        else:
            sizes = [idx.shape[axis] // len(node.output)] * len(node.output)
        t = self.b.tensors[src]
        for out, piece in zip(node.output, movement.split(idx, axis, sizes)):
            users = g.consumers.get(out, [])
            if len(users) != 1 or users[0].op_type != "QuantizeLinear":
                raise FrontendError(g.where(node), f"Split output {out!r} is not quantized by a single "
                                    "QuantizeLinear", "quantize the model with QDQ after every op")
            scale, zp, _ = self._q_params(users[0])
            if (t.scale, t.zero_point) != (scale, zp):
                raise FrontendError(g.where(node), "Split changes the quantization parameters",
                                    "keep its input's scale and zero point")
            self.views[users[0].output[0]] = (src, piece, node)
            self.handled.add(id(users[0]))
        self.handled.add(id(node))

    def _maybe_alias(self, node):
        """DQ -> Flatten -> Q with the same parameters: the Q output re-views
        the input tensor."""
        g = self.g
        users = g.consumers.get(node.output[0], [])
        if len(users) == 1 and users[0].op_type == "QuantizeLinear":
            src = self.activation(node.input[0], node)
            scale, zp, _ = self._q_params(users[0])
            t = self.b.tensors[src]
            if (t.scale, t.zero_point) != (scale, zp):
                raise FrontendError(g.where(node), "a view op changes the quantization parameters",
                                    "keep Flatten/Reshape's input and output parameters equal")
            self.alias[users[0].output[0]] = src
            self.handled.update({id(node), id(users[0])})

    def op_Conv(self, node):
        g, b = self.g, self.b
        x, layout, shape = self.act(node.input[0], node)
        w, w_scale, _ = self.weights(node.input[1], node)
        if layout == "hwc":
            return self.depthwise_scalar_tokens(node, x, shape, w, w_scale,
                                                node.input[2] if len(node.input) > 2 else "")
        if w.ndim == 3:   # 1D conv: [Co, Ci, k] -> [Co, Ci, 1, k]
            w = w[:, :, None, :]
        geo = conv_geometry(node, b.tensors[x].shape, list(w.shape), g.where(node))
        bias = self.bias(node.input[2] if len(node.input) > 2 else "", node,
                         b.tensors[x].scale * np.broadcast_to(w_scale, (w.shape[0],)))
        y, clamp = self.output(node)
        if out_hw(b.tensors[x].shape, geo) != b.tensors[y].shape[:2]:
            raise FrontendError(g.where(node), "output shape does not match the convolution geometry")
        b.conv(node.name or "conv", x, y, w, w_scale, bias, geo, g.where(node), clamp, [node.name],
               leaky=self.leaky)

    def _linear(self, node, w, w_scale, bias_name):
        g, b = self.g, self.b
        x = self.activation(node.input[0], node)
        bias = self.bias(bias_name, node, b.tensors[x].scale * np.broadcast_to(w_scale, (w.shape[0],)))
        y, clamp = self.output(node)
        b.linear(node.name or "linear", x, y, w, w_scale, bias, g.where(node),
                 clamp=clamp, sources=[node.name])

    def op_Gemm(self, node):
        a = attrs(node)
        if a.get("transA", 0) or a.get("alpha", 1.0) != 1.0 or a.get("beta", 1.0) != 1.0:
            raise FrontendError(self.g.where(node), "Gemm with transA or alpha/beta != 1 is not supported")
        w, w_scale, axis = self.weights(node.input[1], node)
        if not a.get("transB", 0):
            w = w.T                      # [K, N] -> [N, K]
        self._linear(node, w, w_scale, node.input[2] if len(node.input) > 2 else "")

    def _constant_input(self, name):
        """A constant, or a DequantizeLinear of one (weights, a bias)."""
        g = self.g
        prod = g.producer.get(name)
        return g.is_const(name) or (prod is not None and prod.op_type == "DequantizeLinear"
                                    and g.is_const(prod.input[0])) or self.consts.const_value(name) is not None

    def op_MatMul(self, node):
        if not self._constant_input(node.input[1]):
            return self.matmul_activations(node)
        w, w_scale, _ = self.weights(node.input[1], node)
        if w.ndim != 2:
            raise FrontendError(self.g.where(node), "MatMul with a non-2D constant is not supported")
        # rows of a [.., M, K] matrix are tokens: read channel last
        x, layout, shape = self.act(node.input[0], node, "hwc" if len(self.g.shape(node.input[0])) > 2 else None)
        if layout == "hwc" and int(np.prod(shape[:-1])) > 1:
            return self.matmul_tokens(node, x, w.T, w_scale)
        self._linear(node, w.T, w_scale, "")

    def op_Add(self, node):
        g, b = self.g, self.b
        consts = [self._constant_input(i) for i in node.input]
        if sum(consts) == 1:
            k = consts.index(False)
            x, layout, shape = self.act(node.input[k], node)
            return self.add_constant(node, x, layout, shape, node.input[1 - k])
        (xa, la, _), (xb, lb, _) = self.act(node.input[0], node), self.act(node.input[1], node)
        if la == "hwc" or lb == "hwc":
            if la != lb or b.tensors[xa].shape != b.tensors[xb].shape:
                raise FrontendError(g.where(node), "Add of channel-last tokens and another shape or layout",
                                    "add tokens of the same shape")
            y, clamp = self.token_output(node)
        else:
            y, clamp = self.output(node)
        b.add(node.name or "add", xa, xb, y, g.where(node), clamp, [node.name])

    def op_MaxPool(self, node):
        g, b = self.g, self.b
        x = self.activation(node.input[0], node)
        geo = pool_geometry(node, b.tensors[x].shape, g.where(node), allow_pad=True)
        y, clamp = self.output(node)
        if clamp is not None:
            raise FrontendError(g.where(node), "Relu/Clip after MaxPool is not supported")
        b.maxpool(node.name or "maxpool", x, y, geo["kernel"], geo["stride"], geo["pad"],
                  g.where(node), [node.name])

    def op_AveragePool(self, node):
        g, b = self.g, self.b
        if list(attrs(node).get("kernel_shape", [])) in ([1, 1], [1]) and not any(attrs(node).get("pads", [])):
            # a requantization (normalize.requant_chains): elementwise, so a tensor held as
            # it is (a head's [1, N, k]) stays so
            src = self.quantized_source(node.input[0], node)
            layout = self.free_layout(src)
            if src in self.views and src not in self.alias:
                self.alias[src] = self.materialize(src, layout)
            x = self.alias.get(src, src)
            y, clamp = self.output(node, layout)
            b.avgpool(node.name or "avgpool", x, y, [1, 1], [1, 1], g.where(node), [node.name], clamp=clamp)
            return
        x = self.activation(node.input[0], node)
        geo = pool_geometry(node, b.tensors[x].shape, g.where(node), allow_pad=False)
        y, clamp = self.output(node)
        b.avgpool(node.name or "avgpool", x, y, geo["kernel"], geo["stride"], g.where(node), [node.name],
                  clamp=clamp)

    def op_GlobalAveragePool(self, node):
        g, b = self.g, self.b
        x = self.activation(node.input[0], node)
        h, w, _ = b.tensors[x].shape
        y, clamp = self.output(node)
        b.avgpool(node.name or "gap", x, y, [h, w], [1, 1], g.where(node), [node.name], clamp=clamp)

    def op_Pad(self, node):
        """A zero Pad normalization could not fold into a convolution (before
        a pool, on the input): a padding layer."""
        g, b = self.g, self.b
        x = self.activation(node.input[0], node)
        a = attrs(node)
        mode = a.get("mode", b"constant")
        mode = mode.decode() if isinstance(mode, bytes) else mode
        if len(node.input) > 1 and node.input[1]:
            pads = [int(p) for p in np.asarray(g.array(node.input[1])).reshape(-1)]
            value = _scalar(g.array(node.input[2])) if len(node.input) > 2 and node.input[2] else 0.0
        else:
            pads = list(a.get("pads", []))
            value = a.get("value", 0.0)
        n = len(pads) // 2
        if mode != "constant" or value != 0 or n not in (3, 4) or any(pads[i] or pads[n + i] for i in range(2)) \
                or any(p < 0 for p in pads):
            raise FrontendError(g.where(node), f"Pad mode={mode} value={value} pads={pads} is not supported",
                                "tessera pads height and width with zeros (constant mode, value 0)")
        y, clamp = self.output(node)
        tx, ty = b.tensors[x], b.tensors[y]
        if (tx.scale, tx.zero_point, tx.shift) != (ty.scale, ty.zero_point, ty.shift):
            raise FrontendError(g.where(node), "Pad with different input and output quantization",
                                "give the Pad's QuantizeLinear its input's parameters")
        if n == 4:
            top, left, bottom, right = pads[2], pads[3], pads[6], pads[7]
        else:
            top, left, bottom, right = 0, pads[2], 0, pads[5]
        b.pad_int(node.name or "pad", x, y, [top, left, bottom, right], tx.zero_point, "half_up",
                  g.where(node), [node.name])

    # ---- the operators of real exports (issue 10) -------------------------

    def op_Mul(self, node):
        g, b = self.g, self.b
        xa = self.activation(node.input[0], node)
        xb = self.activation(node.input[1], node)
        y, clamp = self.output(node)
        b.mul(node.name or "mul", xa, xb, y, g.where(node), clamp, [node.name])

    def _hwc_axis(self, node, name):
        """The HWC axis of an ONNX axis attribute of tensor `name`."""
        rank = len(self.g.shape(name))
        axis = attrs(node).get("axis", 1)
        axis = axis + rank if axis < 0 else axis
        table = {4: {1: 2, 2: 0, 3: 1}, 3: {1: 2, 2: 1}, 2: {1: 2}}.get(rank, {})
        if axis not in table:
            raise FrontendError(self.g.where(node), f"axis {attrs(node).get('axis', 1)} of a rank-{rank} tensor",
                                "join or normalize along channels, height or width (not the batch)")
        return table[axis]

    def op_Concat(self, node):
        """Concat of tensors held channel first, or of pending movements whose
        ONNX order is already an HWC one (detection heads' [1, N, k] along N):
        then the inputs and output are held as they are (layout "hwc")."""
        g, b = self.g, self.b
        sources = [self.quantized_source(n, node) for n in node.input]
        layout = "hwc" if sources and all(self.free_layout(s) == "hwc" for s in sources) else "chw"
        xs = []
        for s in sources:
            if s in self.views and s not in self.alias:
                self.alias[s] = self.materialize(s, layout)
            xs.append(self.alias.get(s, s))
        if layout == "hwc":
            rank = len(g.shape(node.input[0]))
            axis = attrs(node).get("axis", 1)
            axis = (axis + rank if axis < 0 else axis) + 3 - rank
            if not 0 <= axis <= 2:
                raise FrontendError(g.where(node), f"axis {attrs(node).get('axis')} of a rank-{rank} tensor",
                                    "join along an axis other than the batch")
        else:
            axis = self._hwc_axis(node, node.input[0])
        y, clamp = self.output(node, layout)
        b.concat(node.name or "concat", xs, y, axis, g.where(node), [node.name], clamp=clamp)

    def op_Resize(self, node):
        from .tables import resize_table

        g, b = self.g, self.b
        x = self.activation(node.input[0], node)
        where = g.where(node)
        mode, coord, rule, scales = resize_geometry(g, node)
        y, clamp = self.output(node)
        tx, ty = b.tensors[x], b.tensors[y]
        if len(g.shape(node.input[0])) == 3:
            scales = [1.0] + scales
        table = resize_table(tx.shape[:2], ty.shape[:2], scales, mode, coord, rule)
        b.resize(node.name or "resize", x, y, table, "nearest" if mode == "nearest" else "bilinear", where,
                 [node.name], clamp=clamp)

    op_Upsample = op_Resize

    def op_lut(self, node):
        from .tables import lut_table

        g, b = self.g, self.b
        x = self.activation(node.input[0], node)
        a = attrs(node)
        if node.op_type == "Clip":
            lo, hi = self._clip_bounds(node)
            a = {"min": -np.inf if lo is None else lo, "max": np.inf if hi is None else hi}
        y, clamp = self.output(node)
        lo, hi = clamp if clamp is not None else b.clamp_range(y)
        table = lut_table(node.op_type, a, b.qparams(x), b.qparams(y), lo, hi)
        b.lut(node.name or node.op_type.lower(), x, y, table, [node.name])

    def op_Max(self, node):
        """Max/Min of an activation and a constant (a clip written as
        torch.maximum/minimum, a scalar or one per channel): a table of the
        float op as ONNX Runtime evaluates it."""
        from .tables import extremum_tables

        g, b = self.g, self.b
        consts = [self._constant(n) for n in node.input]
        if len(node.input) != 2 or (consts[0] is None) == (consts[1] is None):
            raise FrontendError(g.where(node), f"{node.op_type} of {len(node.input)} inputs, "
                                f"{sum(c is not None for c in consts)} of them constant",
                                f"tessera takes {node.op_type} of an activation and a constant")
        k = 0 if consts[0] is None else 1
        x = self.activation(node.input[k], node)
        channels = b.tensors[x].shape[2]
        # a clip written as Max then Min (no QuantizeLinear between): one table of both
        steps, last = [(node.op_type, consts[1 - k].reshape(-1))], node
        while True:
            users = g.consumers.get(last.output[0], [])
            if len(users) != 1 or users[0].op_type not in ("Max", "Min") or len(users[0].input) != 2:
                break
            nxt = users[0]
            other = [n for n in nxt.input if n != last.output[0]]
            c = self._constant(other[0]) if len(other) == 1 else None
            if c is None:
                break
            self.handled.add(id(nxt))
            steps.append((nxt.op_type, c.reshape(-1)))
            last = nxt
        for op, c in steps:
            if c.size not in (1, channels):
                raise FrontendError(g.where(node), f"a {op} constant of {c.size} values",
                                    "a scalar or one value per channel")
        y, clamp = self.output(last)
        lo, hi = clamp if clamp is not None else b.clamp_range(y)
        b.lut(node.name or node.op_type.lower(), x, y,
              extremum_tables(steps, b.qparams(x), b.qparams(y), lo, hi, channels), [node.name, last.name])

    op_Min = op_Max

    def _constant(self, name):
        """A constant's real values, also through DequantizeLinear; None for
        an activation."""
        g = self.g
        prod = g.producer.get(name)
        if prod is not None and prod.op_type == "DequantizeLinear" and g.is_const(prod.input[0]):
            self.handled.add(id(prod))
            src, scale, zp, _ = self._dq_params(prod)
            return (np.asarray(g.array(src)).astype(np.float64) - zp) * scale
        if g.is_const(name):
            return np.asarray(g.array(name), dtype=np.float64)
        return None

    def op_PRelu(self, node):
        from .tables import prelu_tables

        g, b = self.g, self.b
        x = self.activation(node.input[0], node)
        name = node.input[1]
        prod = g.producer.get(name)
        if prod is not None and prod.op_type == "DequantizeLinear" and g.is_const(prod.input[0]):
            self.handled.add(id(prod))
            src, scale, zp, _ = self._dq_params(prod)
            slope = (np.asarray(g.array(src)).astype(np.float64) - zp) * scale
        elif g.is_const(name):
            slope = np.asarray(g.array(name), dtype=np.float64)
        else:
            raise FrontendError(g.where(node), "PRelu slope is not a constant")
        c = b.tensors[x].shape[2]
        if slope.size not in (1, c):
            raise FrontendError(g.where(node), f"PRelu slope of shape {list(slope.shape)}",
                                "use one slope, or one per channel")
        y, clamp = self.output(node)
        lo, hi = clamp if clamp is not None else b.clamp_range(y)
        if slope.size == 1:
            from .tables import lut_table
            table = lut_table("LeakyRelu", {"alpha": float(slope.reshape(-1)[0])}, b.qparams(x), b.qparams(y), lo, hi)
        else:
            table = prelu_tables(slope.reshape(-1), b.qparams(x), b.qparams(y), lo, hi)
        b.lut(node.name or "prelu", x, y, table, [node.name])

    def op_Softmax(self, node):
        g, b = self.g, self.b
        x, layout, shape = self.act(node.input[0], node)
        h, w, c = b.tensors[x].shape
        rank = len(g.shape(node.input[0]))
        axis = attrs(node).get("axis", -1 if g.opsets.get("ai.onnx", 13) >= 13 else 1)
        axis = axis + rank if axis < 0 else axis
        layout = b.tensors[x].source_layout or "chw"
        if layout == "hwc" and axis == rank - 1:     # a head's [1, N, k] held as it is: k is C
            y, clamp = self.output(node, "hwc")
            b.softmax(node.name or "softmax", x, y, g.where(node), sources=[node.name])
            return
        if not (axis == 1 or (h * w == 1 and axis == rank - 1)):
            raise FrontendError(g.where(node), f"Softmax over axis {attrs(node).get('axis', -1)} of a "
                                f"rank-{rank} tensor", "apply softmax over the channels (axis 1 of NCHW)")
        if axis == 1 and rank > 2 and g.opsets.get("ai.onnx", 13) < 13 and h * w > 1:
            raise FrontendError(g.where(node), "Softmax before opset 13 normalizes over C*H*W",
                                "export with opset 13 or newer, or pool to [N, C] first")
        y, clamp = self.output(node)
        b.softmax(node.name or "softmax", x, y, g.where(node), sources=[node.name])

    def op_ReduceMean(self, node):
        g, b = self.g, self.b
        x, layout, shape = self.act(node.input[0], node)
        rank = len(g.shape(node.input[0]))
        axes = attrs(node).get("axes")
        if axes is None and len(node.input) > 1 and node.input[1]:
            axes = np.asarray(g.array(node.input[1])).tolist()
        axes = sorted(a + rank if a < 0 else a for a in (axes or range(rank)))
        if layout == "hwc":
            return self.mean_tokens(node, x, shape, axes)
        if axes != list(range(2, rank)):
            raise FrontendError(g.where(node), f"ReduceMean over axes {axes}",
                                "reduce over the spatial axes (as GlobalAveragePool)")
        h, w, _ = b.tensors[x].shape
        y, clamp = self.output(node)
        b.avgpool(node.name or "reducemean", x, y, [h, w], [1, 1], g.where(node), [node.name], clamp=clamp)

    def op_LSTM(self, node):
        from .onnx_rnn import import_node
        import_node(self, node)

    op_GRU = op_LSTM

    def op_GlobalMaxPool(self, node):
        g, b = self.g, self.b
        x = self.activation(node.input[0], node)
        h, w, _ = b.tensors[x].shape
        y, clamp = self.output(node)
        if clamp is not None:
            raise FrontendError(g.where(node), "Relu/Clip after GlobalMaxPool is not supported")
        b.maxpool(node.name or "gmp", x, y, [h, w], [1, 1], [0, 0, 0, 0], g.where(node), [node.name])


COORD_MODES = ("half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel", "tf_half_pixel_for_nearest")


def resize_geometry(g, node):
    """(mode "nearest" | "linear", coordinate transform, nearest rounding,
    per-spatial-axis scales) of a Resize or Upsample node; one line for
    what tessera does not do."""
    a = attrs(node)
    where = g.where(node)
    dec = lambda v, d: (v.decode() if isinstance(v, bytes) else v) if v is not None else d  # noqa: E731
    mode = dec(a.get("mode"), "nearest")
    if node.op_type == "Upsample":   # opset 7-9: asymmetric coordinates, floor
        coord, rule = "asymmetric", "floor"
    else:
        coord = dec(a.get("coordinate_transformation_mode"), "half_pixel")
        rule = dec(a.get("nearest_mode"), "round_prefer_floor")
        if coord == "tf_half_pixel_for_nn":      # tf2onnx's name for it (ONNX Runtime takes both)
            coord = "tf_half_pixel_for_nearest"
    if mode == "bilinear":
        mode = "linear"
    if mode not in ("nearest", "linear") or a.get("antialias", 0) or dec(a.get("keep_aspect_ratio_policy"),
                                                                        "stretch") != "stretch":
        raise FrontendError(where, f"Resize mode {mode!r} (antialias {a.get('antialias', 0)})",
                            "use mode nearest or linear, without antialiasing")
    if coord not in COORD_MODES:
        raise FrontendError(where, f"Resize coordinate_transformation_mode {coord!r}",
                            f"use one of {', '.join(COORD_MODES)}")
    in_shape, out_shape = g.shape(node.input[0]), g.shape(node.output[0])
    if len(in_shape) not in (3, 4) or list(out_shape[:2]) != list(in_shape[:2]):
        raise FrontendError(where, f"Resize of {in_shape} to {out_shape}",
                            "resize only the spatial axes of an NCHW or NCL tensor")
    scales = None
    if node.op_type == "Upsample":
        scales = g.array(node.input[1]) if len(node.input) > 1 and node.input[1] else a.get("scales")
    elif len(node.input) > 2 and node.input[2]:
        arr = np.asarray(g.array(node.input[2]))
        scales = arr if arr.size else None
    if scales is None:   # sizes given: the ratio of the sizes
        scales = [o / i for o, i in zip(out_shape[2:], in_shape[2:])]
    else:
        scales = [float(v) for v in np.asarray(scales, dtype=np.float32)[2:]]
    return mode, coord, rule, scales

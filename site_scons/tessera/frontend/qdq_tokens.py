"""Transformers in the QDQ dialect (issue 27): token-major tensors and the
ops of attention, as PyTorch exports them and ONNX Runtime quantizes them.

A QDQ tensor is held channel first ("chw": what convolutions read,
[N, C, H, W], [N, C, L]) or channel last ("hwc", source_layout: a
transformer's [1, T, D] tokens, its heads [1, h, T, d]), in ONNX element
order with the last ONNX axis as the IR's channels (layout.ir_shape).
Reshapes and Transposes on quantized values are qdq.py's pending data
movements (frontend/movement.py); a token op emits them channel last when
it reads them (a head split or merge is one transpose; ViT's patches read
as tokens a reshape).

- MatMul by a constant on tokens: a pointwise layer (the fast paths'),
  its bias a separate Add as PyTorch's exporter writes it.
- Add of a (quantized) constant: x + c in real values is a 1x1 depthwise
  of weight 64 at scale 1/64 with c as its bias (per channel, or per
  element: a positional embedding), in units of s_x / 64.
- MatMul of two activations: the IR's matmul, requantized with
  s_a * s_b / s_y.
- Softmax over the last axis, LayerNormalization over the last axis (the
  IR's layernorm "int", within one step of ONNX Runtime's float one),
  ReduceMean over the tokens (an average pool over the grid).
- A chain of float ops computing one value from one int8 tensor (GELU's
  Erf form, islands.py): one lookup table.
"""

import numpy as np

from ..errors import FrontendError
from . import islands
from .layout import broadcast_param, compress, ir_shape, to_hwc
from .onnxgraph import VIEW_OPS, attrs

ADD_CONST_WEIGHT = 64   # the depthwise weight of an Add of a constant (its scale 1/64: bias in s_x / 64)


class TokenOps:
    """Mixed into QdqParser (qdq.py): self.g, self.b, self.handled, self.alias,
    self.views (pending data movement), self.consts."""

    # ---- layouts ---------------------------------------------------------------

    def act(self, name, node, layout=None):
        """(IR tensor, layout, ONNX shape) of a float op input: a pending
        data movement (qdq.py's op_move: a head split or merge, ViT's
        patches as tokens) is emitted now, in `layout` (by default the one
        that moves least, free_layout); the layout is the IR tensor's
        source_layout ("hwc": channel-last tokens, else "chw")."""
        src = self._source_of(name)
        if src in self.views and src not in self.alias:
            self.alias[src] = self.materialize(src, layout or self.free_layout(src))
        x = self.activation(name, node)
        return x, self.b.tensors[x].source_layout or "chw", list(self.g.shape(name))

    def _source_of(self, name):
        """The quantized tensor (Q output) a DQ'd input reads, through views."""
        g = self.g
        while True:
            prod = g.producer.get(name)
            if prod is None:
                return name
            if prod.op_type in VIEW_OPS:
                name = prod.input[0]
                continue
            return prod.input[0] if prod.op_type == "DequantizeLinear" else name

    def token_input(self, name):
        """Whether a rank-3 graph input is read as tokens (a MatMul's data
        operand, a LayerNormalization) rather than as an NCL feature map."""
        g, seen, todo = self.g, set(), [name]
        while todo:
            t = todo.pop()
            for u in g.consumers.get(t, []):
                if (u.op_type in ("MatMul", "Gemm") and u.input[0] == t) or u.op_type == "LayerNormalization":
                    return True
                if u.op_type in ("QuantizeLinear", "DequantizeLinear") or u.op_type in VIEW_OPS:
                    for o in u.output:
                        if o not in seen:
                            seen.add(o)
                            todo.append(o)
        return False

    def token_output(self, node, layout="hwc"):
        """Register a layer's quantized output, channel last by default."""
        return self.output(node, layout=layout)

    # ---- ops on tokens -----------------------------------------------------------

    def matmul_tokens(self, node, x, w, w_scale):
        """MatMul of channel-last tokens by constant weights w [N, K]: a
        pointwise layer over the tokens."""
        b = self.b
        tx = b.tensors[x]
        if tx.shape[2] != w.shape[1]:
            raise FrontendError(self.g.where(node), f"MatMul of {tx.shape} tokens by [{w.shape[1]}, {w.shape[0]}] "
                                "weights")
        y, clamp = self.token_output(node)
        geo = {"kernel": [1, 1], "stride": [1, 1], "pad": [0, 0, 0, 0], "group": 1}
        b.conv(node.name or "matmul", x, y, w[:, :, None, None], w_scale, None, geo, self.g.where(node), clamp,
               [node.name])

    def matmul_activations(self, node):
        g, b = self.g, self.b
        (xa, la, sa), (xb, lb, sb) = self.act(node.input[0], node, "hwc"), self.act(node.input[1], node, "hwc")
        if la != "hwc" or lb != "hwc" or len(sa) < 2 or len(sb) < 2 or sa[-1] != sb[-2]:
            raise FrontendError(g.where(node), f"MatMul of {sa} ({la}) and {sb} ({lb})",
                                "multiply channel-last matrices (or batches of them)")
        for x, shape in ((xa, sa), (xb, sb)):
            if b.tensors[x].shape != ir_shape(shape, "hwc", g.where(node)):
                raise FrontendError(g.where(node), f"MatMul operand {x!r} of shape {shape} is stored as "
                                    f"{b.tensors[x].shape}", "reshape it to its batches of matrices first")
        if int(np.prod(sb[:-2] or [1])) not in (1, int(np.prod(sa[:-2] or [1]))):
            raise FrontendError(g.where(node), f"MatMul of {sa} x {sb}: the batches do not match")
        y, clamp = self.token_output(node)
        b.matmul(node.name or "matmul", xa, xb, y, g.where(node), clamp, [node.name])

    def add_constant(self, node, x, layout, shape, c_name):
        """x + c for a constant c (a bias after a MatMul, a positional
        embedding): a 1x1 depthwise of weight 64 at scale 1/64, c its bias
        in units of s_x / 64, per channel or per element."""
        g, b = self.g, self.b
        c = self._real_constant(c_name, node)
        tx = b.tensors[x]
        hwc = tx.shape
        try:
            full = broadcast_param(c, shape, g.where(node), "the added constant")
        except FrontendError:
            raise FrontendError(g.where(node), f"Add of a constant of shape {list(np.shape(c))} to {shape}",
                                "add a scalar, a per-channel or a same-shape constant") from None
        full = to_hwc(np.ascontiguousarray(full), layout, ir_shape(shape, layout, g.where(node))).reshape(hwc)
        values, pshape = compress(full)
        unit = tx.scale / ADD_CONST_WEIGHT
        bias = np.rint(np.asarray(values, np.float64) / unit)
        if pshape is not None:
            bias = np.broadcast_to(bias.reshape(pshape), hwc)
        else:
            bias = np.broadcast_to(bias.reshape(-1), (hwc[2],))
        if np.any(np.abs(bias) >= 2 ** 31):
            raise FrontendError(g.where(node), "the added constant does not fit 32 bits at the input's scale / 64")
        y, clamp = self.token_output(node, layout=layout)
        w = np.full((hwc[2], 1, 1, 1), ADD_CONST_WEIGHT, np.int64)
        geo = {"kernel": [1, 1], "stride": [1, 1], "pad": [0, 0, 0, 0], "group": hwc[2]}
        b.conv(node.name or "add", x, y, w, 1.0 / ADD_CONST_WEIGHT, np.ascontiguousarray(bias).astype(np.int64),
               geo, g.where(node), clamp, [node.name])

    def _real_constant(self, name, node):
        """A float constant, directly or through DequantizeLinear (of a
        constant, or of QuantizeLinear of one)."""
        g = self.g
        v = self.consts.const_value(name)
        if v is None:
            raise FrontendError(g.where(node), f"input {name!r} is not a constant")
        prod = g.producer.get(name)
        if prod is not None:
            self.handled.add(id(prod))
            q = g.producer.get(prod.input[0])
            if q is not None and q.op_type == "QuantizeLinear":
                self.handled.add(id(q))
        return np.asarray(v, np.float64)

    def depthwise_scalar_tokens(self, node, x, shape, w, w_scale, bias_name):
        """A 1x1 depthwise convolution (normalization's form of a Mul by a
        scalar) over channel-last tokens: every weight the same, so it is a
        depthwise over the IR's channels."""
        g, b = self.g, self.b
        w_scale = np.asarray(w_scale, np.float64).reshape(-1)
        if (list(w.shape[2:]) != [1] * (w.ndim - 2) or np.unique(w).size != 1 or np.unique(w_scale).size != 1
                or bias_name):
            raise FrontendError(g.where(node), "a convolution of channel-last tokens",
                                "convolve NCHW feature maps; scale tokens by one constant")
        c = b.tensors[x].shape[2]
        y, clamp = self.token_output(node)
        geo = {"kernel": [1, 1], "stride": [1, 1], "pad": [0, 0, 0, 0], "group": c}
        b.conv(node.name or "scale", x, y, np.full((c, 1, 1, 1), int(w.reshape(-1)[0]), np.int64),
               float(w_scale[0]), None, geo, g.where(node), clamp, [node.name])

    def softmax_tokens(self, node, x, shape):
        y, _ = self.token_output(node)
        self.b.softmax(node.name or "softmax", x, y, self.g.where(node), sources=[node.name])

    def op_LayerNormalization(self, node):
        from .tables import layernorm_params

        g, b = self.g, self.b
        x, layout, shape = self.act(node.input[0], node, "hwc" if len(g.shape(node.input[0])) > 2 else None)
        a = attrs(node)
        axis = a.get("axis", -1)
        if int(axis) % len(shape) != len(shape) - 1 or (layout != "hwc" and len(shape) > 2):
            raise FrontendError(g.where(node), f"LayerNormalization over axis {axis} of {shape} ({layout})",
                                "normalize over the last axis of channel-last tokens")
        c = shape[-1]
        gamma = np.broadcast_to(self._real_constant(node.input[1], node).reshape(-1), (c,))
        beta = (np.broadcast_to(self._real_constant(node.input[2], node).reshape(-1), (c,))
                if len(node.input) > 2 and node.input[2] else np.zeros(c))
        if len(node.output) > 1 and any(node.output[1:]):
            raise FrontendError(g.where(node), "LayerNormalization with mean/inv_std_var outputs")
        y, clamp = self.token_output(node, layout=layout)
        tx, ty = b.tensors[x], b.tensors[y]
        try:
            e, mul, add, shift = layernorm_params(gamma, beta, a.get("epsilon", 1e-5), tx.scale, ty.scale,
                                                  b.stored_zero_point(y), c)
        except ValueError as err:
            raise FrontendError(g.where(node), str(err)) from None
        b.layernorm(node.name or "layernorm", x, y, e, mul, add, shift, g.where(node), clamp, [node.name])

    def mean_tokens(self, node, x, shape, axes):
        """ReduceMean over the tokens of [1, T, D] (axis 1; the grid's
        H x W in the IR): an average pool."""
        g, b = self.g, self.b
        if axes != [len(shape) - 2] or len(shape) != 3:
            raise FrontendError(g.where(node), f"ReduceMean over axes {axes} of channel-last {shape}",
                                "average channel-last tokens over the tokens (axis 1 of [1, T, D])")
        h, w, _ = b.tensors[x].shape
        y, clamp = self.token_output(node)
        b.avgpool(node.name or "mean", x, y, [h, w], [1, 1], g.where(node), [node.name], clamp=clamp)

    def find_islands(self):
        """Every elementwise island (islands.py), by its trigger node; their
        nodes are handled (the island is one lookup table)."""
        found, members = {}, set()
        for node in self.g.graph.node:
            island = islands.find(self.consts, node) if id(node) not in members else None
            if island is not None:
                found[id(node)] = island
                members |= {id(n) for n in island.nodes}
        self.handled |= members
        return found

    def emit_island(self, island):
        """The island's lookup table, when its root is registered."""
        b = self.b
        x = self.alias.get(island.root, island.root)
        if x not in b.tensors:
            raise FrontendError(self.g.where(island.trigger), f"an elementwise chain reads {island.root!r}, "
                                "which is not an activation tensor tessera knows")
        q = self.g.producer[island.exit]
        scale, zp, dtype = self._q_params(q)
        layout = b.tensors[x].source_layout or "chw"
        shape = list(self.g.shape(q.input[0]))
        y = b.tensor(island.exit, b.tensors[x].shape if layout == "hwc" else ir_shape(shape, "chw", self.g.path),
                     dtype, scale, zp)
        if b.tensors[y].shape != b.tensors[x].shape:
            raise FrontendError(self.g.where(island.trigger), "an elementwise chain that changes the shape")
        if layout == "hwc":
            b.tensors[y].source_layout = "hwc"
        table = islands.table(self.consts, island, b.tensors[x].shift, b.tensors[y].shift)
        b.lut(island.trigger.name or "island", x, y, table,
              [n.name for n in island.nodes if n.op_type not in ("QuantizeLinear", "DequantizeLinear")])

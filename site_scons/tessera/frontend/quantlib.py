"""QuantLib/Deeploy integer ONNX dialect.

Integer-valued float tensors, plain ONNX Conv (1D/2D, depthwise, padded,
strided), Gemm, MatMul, Add, MaxPool, Pad, Flatten/Reshape, and the custom
op RequantShift (attributes div, n_levels or n_levels_out, signed; inputs
mul, add, scalar or per channel/row):

    y = clamp(floor((x * mul + add + div / 2) / div), lo, hi)
    [lo, hi] = [-n_levels / 2, n_levels / 2 - 1] if signed else [0, n_levels - 1]

div must be a power of two 2**s: the IR's Requant with rounding "half_up"
is exactly this ((x * mul + add + 2**(s-1)) >> s). A RequantShift right
after a Conv/Gemm/MatMul/Add becomes that layer's requantization (an Add of
a constant in between is the layer's bias); elsewhere (on a graph input, a
pool, ahead of an Add) it is a layer of its own: a 1x1 average pool, the
IR's elementwise requantization, reading 8-bit values or int32
accumulators (MaxPool and Add read those too). One that changes nothing (mul = div,
add = 0, over the input's whole range) is dropped. A layer without
RequantShift outputs its int32 accumulators.

MatMul/Gemm: the data operand is the activation, the other a constant. A
vector ([1, K], or a flattened feature map) makes a linear layer; a matrix
[M, K] or a batch of them [B, M, K] makes a pointwise layer over its M (or
B*M) rows, channel last. Gemm's alpha folds into the weights when they stay
8-bit, else into the requantization; its C operand is the bias, per column
or, for a full [M, N] matrix, per element; a RequantShift per row of the
output is a Requant with `shape`. A MatMul of two activations (the batched
[1, 2, 32, 48] x [1, 2, 48, 64] of Deeploy's MatMul/Regular_RQ) is the IR's
matmul, its RequantShift per batch a Requant with `shape`.

Input signedness is not in the graph: `input_types` gives it (from the
reference inputs); without it inputs are int8.
"""

import numpy as np
from onnx import numpy_helper

from ..errors import FrontendError
from .intbase import INT_RANGES, Acc, IntegerParser, dtype_for
from .layout import ir_shape
from .onnxgraph import attrs


def _attr_value(v):
    if hasattr(v, "dims"):                       # TensorProto attributes
        v = numpy_helper.to_array(v)
    try:
        arr = np.asarray(v, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):             # a string or a graph: not a number
        return None
    if arr.size != 1:
        return None
    return float(arr[0])


class QuantLibParser(IntegerParser):
    dialect = "quantlib"
    rounding = "half_up"
    default_input = "int8"
    supported = ("tessera lowers QuantLib/Deeploy graphs: Conv, Gemm, MatMul, Add, "
                 "MaxPool, Pad, Flatten/Reshape and RequantShift")

    def rq_params(self, node):
        """(mul, add, shift, lo, hi) of a RequantShift node (mul, add as
        integer arrays shaped as in the graph)."""
        a = attrs(node)
        where = self.where(node)
        div = _attr_value(a["div"]) if "div" in a else None
        levels = a.get("n_levels", a.get("n_levels_out"))
        levels = _attr_value(levels) if levels is not None else None
        signed = _attr_value(a.get("signed", 1))
        if div is None or levels is None or signed is None:
            raise FrontendError(where, "RequantShift needs scalar div, n_levels (or n_levels_out) and signed")
        # NaN or inf would reach int() below: the same one line as any bad value
        if not np.isfinite(div) or div != int(div) or int(div) < 1 or int(div) & (int(div) - 1):
            raise FrontendError(where, f"RequantShift div={div:g} is not a power of two",
                                "tessera requantizes with a shift: use div = 2**s")
        if not np.isfinite(levels) or levels != int(levels) or not 2 <= levels <= 1 << 32:
            raise FrontendError(where, f"RequantShift n_levels={levels:g}")
        shift = int(div).bit_length() - 1
        levels = int(levels)
        lo, hi = (-(levels // 2), levels // 2 - 1) if signed else (0, levels - 1)
        if len(node.input) < 2 or not node.input[1]:
            raise FrontendError(where, "RequantShift without mul")
        mul = self.int_const(node, node.input[1], "mul")
        add = self.int_const(node, node.input[2], "add") if len(node.input) > 2 and node.input[2] else np.zeros(1, np.int64)
        return mul, add, shift, lo, hi

    # ---- accumulators -------------------------------------------------------------

    def finish_acc(self, acc):
        b = self.b
        if acc.den != 1:
            # ONNX's AveragePool yields the mean, a fraction a RequantShift
            # after it would scale; the IR's pool sums, and the dialect does
            # not say how the mean rounds
            raise FrontendError(self.where(acc.node), f"average pooling over {acc.den} values in a QuantLib "
                                "graph is not supported (its mean is not an integer)",
                                "pool with MaxPool, or sum with a convolution and requantize with RequantShift")
        t, nodes = acc.out, []
        offset = acc.offset
        u = self.single_user(t)
        if u is not None and u.op_type == "Add" and acc.takes_bias:
            others = [i for i in u.input if i != t]
            if len(u.input) == 2 and len(others) == 1 and self.is_const(others[0]):
                c = self.int_const(u, others[0], "bias")
                offset = c if offset is None else offset + c
                nodes.append(u)
                t = u.output[0]
                u = self.single_user(t)
        rq_node = u if u is not None and u.op_type == "RequantShift" and u.input[0] == t else None
        if rq_node is not None:
            nodes.append(rq_node)
            t = rq_node.output[0]
        self.claim(*nodes)
        sources = acc.sources + [n.name for n in nodes]
        where = self.where(nodes[-1] if nodes else acc.node)
        bias = None
        if rq_node is None:
            if acc.alpha != 1:
                raise FrontendError(self.where(acc.node), f"Gemm alpha={acc.alpha} on an accumulator that "
                                    "is not requantized", "fold alpha into the weights")
            if offset is not None:
                bias = self.bias_array(acc, offset)
            y = self.new_act(t, acc.shape, "int32", acc.layout, where)
            acc.emit(y, None, bias, sources)
            return
        mul, add, shift, lo, hi = self.rq_params(rq_node)
        if offset is not None and acc.alpha == 1 and acc.takes_bias:
            bias = self.bias_array(acc, offset)
        elif offset is not None or acc.alpha != 1:
            # y = RQ(alpha * acc + offset): fold both into the requantization
            add = add + offset * mul if offset is not None else add
            mul = mul * acc.alpha
        (mul_l, add_l), shape = self.hwc_params(acc, [mul, add], "RequantShift parameters")
        y = self.new_act(t, acc.shape, dtype_for(lo, hi), acc.layout, where)
        rq = b.int_requant(y, mul_l, add_l, [shift], "half_up", lo, hi, shape)
        acc.emit(y, rq, bias, sources)

    # ---- ops ----------------------------------------------------------------------

    def op_Add(self, node):
        if any(self.is_const(i) for i in node.input):
            raise FrontendError(self.where(node), "Add of a constant that is not the bias of a "
                                "Conv/Gemm/MatMul", "add constants only right after those ops")
        xs = [self.act(node, i) for i in node.input]
        # 8-bit activations, or two int32 accumulators (layers without RequantShift)
        if self.b.tensors[xs[0]].dtype != self.b.tensors[xs[1]].dtype:
            raise FrontendError(self.where(node), f"Add of an 8-bit and a 32-bit tensor ({xs[0]!r}, {xs[1]!r})",
                                "requantize the accumulator to 8 bits first")
        if self.layout[xs[0]] != self.layout[xs[1]] and self.b.tensors[xs[0]].shape[:2] != [1, 1]:
            raise FrontendError(self.where(node), "Add of a feature map and a matrix")
        shape = list(self.b.tensors[xs[0]].source_shape)

        def emit(y, rq, bias, sources):
            self.b.add_int(node.name or "add", xs[0], xs[1], y, [1, 1], rq, self.where(node), sources)

        self.finish_acc(Acc(node, node.output[0], shape, self.layout[xs[0]], emit, takes_bias=False,
                            sources=[node.name]))

    def op_RequantShift(self, node):
        """A RequantShift not fused into the layer before it: an elementwise
        requantization layer (1x1 average pool), or nothing if it is the identity."""
        b = self.b
        x = self.act(node, node.input[0])   # 8-bit, or int32 accumulators
        tx = b.tensors[x]
        mul, add, shift, lo, hi = self.rq_params(node)
        in_lo, in_hi = INT_RANGES[tx.source_dtype]
        if np.all(mul == 1 << shift) and np.all(add == 0) and lo <= in_lo and in_hi <= hi:
            self.ir[node.output[0]] = x
            return
        shape = list(tx.source_shape)
        layout = self.layout[x]
        hwc = ir_shape(shape, layout, self.where(node))
        acc = Acc(node, node.output[0], shape, layout, None)
        (mul_l, add_l), pshape = self.hwc_params(acc, [mul, add], "RequantShift parameters")
        y = self.new_act(node.output[0], shape, dtype_for(lo, hi), layout, self.where(node))
        assert b.tensors[y].shape == hwc
        rq = b.int_requant(y, mul_l, add_l, [shift], "half_up", lo, hi, pshape)
        b.avgpool_int(node.name or "requant", x, y, [1, 1], [1, 1], rq, self.where(node), [node.name])

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

Transformers (Deeploy's integer attention, EEGFormer, CCT): a Transpose
of an activation is the IR's transpose (its permutation on the stored
array, views folded in: a head split of [T, h * d] is [T, h, d] ->
[h, T, d]; one that moves no data is a view), a Gather of one index on an
axis of size 1 is a view. iSoftmax, ITAMax and ITAPartialMax (over the
last axis) are the IR's softmax in Deeploy's modes, each checked to stay
in the unsigned 32-bit arithmetic its C kernel computes in; iLayerNorm
its layernorm "ilayernorm"; iGELU followed by its RequantShift an int8
lookup table computed from both (exact: an int8 -> int8 function);
IntegerMean over the tokens an average pool rounding as Deeploy's kernel
(half up for a power-of-two count, else half away from zero).

Input signedness is not in the graph: `input_types` gives it (from the
reference inputs); without it inputs are int8.
"""

import numpy as np
from onnx import numpy_helper

from ..errors import FrontendError
from .intbase import INT_RANGES, VIEW_OPS, Acc, IntegerParser, dtype_for
from .layout import ir_shape, onnx_transpose, three_axes
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
                 "MaxPool, Pad, Flatten/Reshape, Transpose, Gather, RequantShift, iSoftmax, ITAMax, "
                 "ITAPartialMax, iLayerNorm, iGELU and IntegerMean")

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

    # ---- transformers -------------------------------------------------------------

    def _viewed_shape(self, name):
        """The ONNX shape the readers of `name` see through a chain of views
        (a transpose's output is stored as they read it), else its own."""
        shape = list(self.shape(name))
        while True:
            users = self.consumers(name)
            if len(users) != 1 or name in self.g.output_names or users[0].op_type not in VIEW_OPS + ("Gather",):
                return shape
            u = users[0]
            if u.op_type == "Gather" and not self._gather_view(u):
                return shape
            try:
                shape = self._gather_shape(u) if u.op_type == "Gather" else list(self._view_shape(u, shape))
            except FrontendError:
                return shape
            name = u.output[0]

    def op_Transpose(self, node):
        b = self.b
        x = self.act(node, node.input[0])
        shape = list(self.shape(node.input[0]))
        perm = attrs(node).get("perm", list(range(len(shape)))[::-1])
        if sorted(int(p) for p in perm) != list(range(len(shape))):
            raise FrontendError(self.where(node), f"Transpose perm {list(perm)} of a rank-{len(shape)} tensor")
        out_shape = [shape[int(p)] for p in perm]
        moved = onnx_transpose(shape, self.layout[x], perm)
        self.oshape[node.output[0]] = out_shape
        if moved is None and self.layout[x] == "hwc":
            self.ir[node.output[0]] = x          # moves no data: a view
            return
        dims, sperm = three_axes(*(moved or ([b.tensors[x].size], [0]))) or (None, None)
        if dims is None:
            raise FrontendError(self.where(node), f"Transpose {list(perm)} of {shape} moves four or more axes",
                                "transpose at most three groups of axes at once")
        tx = b.tensors[x]
        y = self.new_act(node.output[0], self._viewed_shape(node.output[0]), tx.source_dtype, "hwc",
                         self.where(node))
        self.oshape[node.output[0]] = out_shape
        b.transpose(node.name or "transpose", x, y, dims, sperm, self.where(node), [node.name])

    def _gather_index(self, node):
        idx = self.const(node.input[1]) if len(node.input) > 1 else None
        if idx is None or idx.size != 1:
            return None
        return int(np.asarray(idx).reshape(-1)[0])

    def _gather_view(self, node):
        """A Gather that only drops an axis of size 1 (index 0)."""
        try:
            shape = list(self.shape(node.input[0]))
        except FrontendError:
            return False
        axis = int(attrs(node).get("axis", 0)) % len(shape)
        return self._gather_index(node) in (0, -1) and shape[axis] == 1 and np.ndim(self.const(node.input[1])) == 0

    def _gather_shape(self, node):
        shape = list(self.shape(node.input[0]))
        axis = int(attrs(node).get("axis", 0)) % len(shape)
        return shape[:axis] + shape[axis + 1:]

    def op_Gather(self, node):
        if not self._gather_view(node):
            raise FrontendError(self.where(node), "Gather of anything but a scalar index 0 on an axis of size 1 "
                                "is not supported", "select along an axis of size 1 (a squeeze)")
        self.ir[node.output[0]] = self.act(node, node.input[0])
        self.oshape[node.output[0]] = self._gather_shape(node)

    def _last_axis_input(self, node):
        """An 8-bit activation whose last ONNX axis is its stored channels."""
        x = self.act(node, node.input[0])
        self.eight_bit(node, x)
        shape = list(self.shape(node.input[0]))
        axis = attrs(node).get("axis", -1)
        if int(axis) % len(shape) != len(shape) - 1:
            raise FrontendError(self.where(node), f"{node.op_type} over axis {axis}", "normalize over the last axis")
        if self.layout[x] != "hwc" and len(shape) > 2:
            raise FrontendError(self.where(node), f"{node.op_type} over the last axis of a feature map "
                                f"({shape}, channels first)", "transpose it to channels last first")
        return x, shape

    def _levels(self, node, key="n_levels"):
        v = _attr_value(attrs(node).get(key))
        if v is None or v != int(v) or not 2 <= v <= 256:
            raise FrontendError(self.where(node), f"{node.op_type} {key}={v}", "8-bit outputs: n_levels 256 or less")
        return int(v)

    def _softmax(self, node, mode, params):
        x, shape = self._last_axis_input(node)
        from .tables import check_deeploy_softmax
        err = check_deeploy_softmax(mode, params, shape[-1])
        if err:
            raise FrontendError(self.where(node), err, "tessera computes Deeploy's kernel arithmetic exactly "
                                "and refuses parameters that leave its 32-bit range")
        y = self.new_act(node.output[0], shape, "uint8", self.layout[x], self.where(node))
        self.b.softmax_int(node.name or mode, x, y, mode, params, self.where(node), [node.name])

    def op_iSoftmax(self, node):
        a = attrs(node)
        params = [_attr_value(a.get(k)) for k in ("coeffA", "coeffB", "coeffC", "log2")]
        if any(v is None or v != int(v) for v in params):
            raise FrontendError(self.where(node), "iSoftmax needs integer coeffA, coeffB, coeffC and log2")
        self._softmax(node, "isoftmax", [int(v) for v in params] + [self._levels(node)])

    def op_ITAMax(self, node):
        self._softmax(node, "itamax", [self._levels(node)])

    def op_ITAPartialMax(self, node):
        group = _attr_value(attrs(node).get("group_width"))
        if group is None or group != int(group) or group < 1:
            raise FrontendError(self.where(node), f"ITAPartialMax group_width={group}")
        self._softmax(node, "itapartialmax", [int(group), self._levels(node)])

    def op_iLayerNorm(self, node):
        x, shape = self._last_axis_input(node)
        if len(node.input) != 3:
            raise FrontendError(self.where(node), "iLayerNorm needs data, weight and bias")
        weight = self.int_const(node, node.input[1], "weight")
        bias = self.int_const(node, node.input[2], "bias")
        d = _attr_value(attrs(node).get("D"))
        if d is None or d != int(d) or d < 1 or int(d) & (int(d) - 1):
            raise FrontendError(self.where(node), f"iLayerNorm D={d} is not a power of two")
        levels = self._levels(node)
        lo, hi = -(levels // 2), levels // 2 - 1
        y = self.new_act(node.output[0], shape, "int8", self.layout[x], self.where(node))
        self.b.ilayernorm(node.name or "layernorm", x, y, weight, bias, int(d).bit_length() - 1, lo, hi,
                          self.where(node), [node.name])

    def op_iGELU(self, node):
        """iGELU (I-BERT's polynomial, int32 out) and the RequantShift after
        it: one int8 -> int8 function, a lookup table."""
        b = self.b
        x = self.act(node, node.input[0])
        self.eight_bit(node, x)
        a = attrs(node)
        bb, one = _attr_value(a.get("b")), _attr_value(a.get("one"))
        if bb is None or one is None or not (abs(bb) < 1 << 15 and 0 <= one < 1 << 22):
            raise FrontendError(self.where(node), f"iGELU b={bb}, one={one}",
                                "its int32 arithmetic needs |b| < 2**15 and 0 <= one < 2**22")
        rq_node = self.single_user(node.output[0])
        if rq_node is None or rq_node.op_type != "RequantShift" or rq_node.input[0] != node.output[0]:
            raise FrontendError(self.where(node), "iGELU whose int32 output is not requantized by one RequantShift",
                                "requantize iGELU's output (Deeploy merges the pair)")
        self.claim(rq_node)
        mul, add, shift, lo, hi = self.rq_params(rq_node)
        if mul.size != 1 or add.size != 1:
            raise FrontendError(self.where(rq_node), "RequantShift after iGELU with parameters per channel")
        tx = b.tensors[x]
        v = np.arange(-128, 128, dtype=np.int64) + tx.shift       # every source input value
        sign = np.sign(v)
        q = np.minimum(np.abs(v), -int(bb))
        poly = sign * (-(q + int(bb)) ** 2 + int(one))
        g = v * ((int(one) + poly) >> 1)
        mul, add = int(mul.reshape(-1)[0]), int(add.reshape(-1)[0])
        out = np.clip((g * mul + add + ((1 << shift) >> 1)) >> shift, lo, hi)
        shape = list(self.shape(node.input[0]))
        y = self.new_act(rq_node.output[0], shape, dtype_for(lo, hi), self.layout[x], self.where(rq_node))
        if b.tensors[y].dtype != "int8":
            raise FrontendError(self.where(rq_node), "RequantShift after iGELU to more than 8 bits")
        b.lut(node.name or "gelu", x, y, out - b.tensors[y].shift, sources=[node.name, rq_node.name])

    def op_IntegerMean(self, node):
        """The mean over the tokens of [.., T, C] (Deeploy's ReduceMean
        kernel: (sum + 2**(s-1)) >> s for T = 2**s, else the sum divided by
        T rounding half away from zero)."""
        b = self.b
        x = self.act(node, node.input[0])
        self.eight_bit(node, x)
        shape = list(self.shape(node.input[0]))
        a = attrs(node)
        axes = [int(v) % len(shape) for v in a.get("axes", [])]
        tx = b.tensors[x]
        if self.layout[x] != "hwc" or axes != [len(shape) - 2] or tx.shape[0] != 1:
            raise FrontendError(self.where(node), f"IntegerMean over axes {a.get('axes')} of {shape}",
                                "average over the tokens (the second to last axis) of a [1, T, C] tensor")
        t = tx.shape[1]
        keep = a.get("keepdims", 1)
        out_shape = shape[:-2] + ([1] if keep else []) + shape[-1:]
        y = self.new_act(node.output[0], out_shape, tx.source_dtype, "hwc", self.where(node))
        lo, hi = INT_RANGES[tx.source_dtype]
        if t & (t - 1) == 0:
            rq = b.int_requant(y, [1], [0], [t.bit_length() - 1], "half_up", lo, hi)
        else:
            rq = b.int_requant(y, [t], [0], [0], "tflite_div", lo, hi)
        b.avgpool_int(node.name or "mean", x, y, [1, t], [1, 1], rq, self.where(node), [node.name])

"""What the two integer ONNX dialects (NEMO/DORY, QuantLib/Deeploy) share.

Both store integers in float (or int) tensors and compute with plain ONNX
ops; they differ in how an accumulator becomes the next 8-bit activation
(NEMO: chains of Mul/Add/Div/Floor/Clip; QuantLib: RequantShift). This base
class lowers the ops that produce accumulators (Conv, Gemm, MatMul, pools,
Pad, views) and leaves `requantize` (what follows an accumulator) and the
residual Add to the dialect.

Every node must be claimed by some pattern; whatever is left is a
FrontendError naming the node, so nothing is silently skipped.
"""

from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from ..errors import FrontendError
from . import layout as L
from .geometry import conv_geometry, out_hw, pool_geometry
from .onnxgraph import attrs

VIEW_OPS = ("Flatten", "Reshape", "Squeeze", "Unsqueeze", "Identity")
# ops over the last axis of a matrix (QuantLib's transformer ops): a graph
# input reaching one is channel last
LAST_AXIS_OPS = ("iSoftmax", "ITAMax", "ITAPartialMax", "iLayerNorm", "IntegerMean")
INT_RANGES = {"int8": (-128, 127), "uint8": (0, 255), "int32": (-(1 << 31), (1 << 31) - 1)}


def dtype_for(lo, hi):
    """Narrowest activation dtype holding [lo, hi] (uint8 for non-negative
    8-bit ranges, as NEMO/DORY and unsigned RequantShift produce)."""
    if lo >= 0 and hi <= 255:
        return "uint8"
    if lo >= -128 and hi <= 127:
        return "int8"
    return "int32"


@dataclass
class Acc:
    """An accumulator just produced by a main op, before requantization.

    value = alpha * (what the IR layer computes) + offset, where offset is
    an ONNX-shaped integer array (a Gemm's beta*C) or None. `emit(y,
    requant, bias, sources)` appends the IR layer once the dialect knows
    the requantization. den > 1: the ONNX value is that sum divided by den
    (AveragePool)."""
    node: object
    out: str                      # ONNX name of the accumulator
    shape: list                   # its ONNX shape
    layout: str
    emit: Callable
    takes_bias: bool = True
    alpha: int = 1
    offset: Optional[np.ndarray] = None
    den: int = 1
    acc_range: tuple = (None, None)  # bounds of the summed values (pools)
    sources: list = field(default_factory=list)


class IntegerParser:
    dialect = ""
    rounding = ""
    default_input = "int8"
    supported = ""   # for error messages

    def __init__(self, g, builder, input_types=None):
        self.g = g
        self.b = builder
        self.input_types = dict(input_types or {})
        self.ir = {}            # ONNX tensor -> IR tensor (views and identities alias)
        self.layout = {}        # IR tensor -> "chw" | "hwc"
        self.oshape = {}        # ONNX tensor -> shape, where tessera computed it
        self.claimed = set()
        self.pending_pad = {}   # Pad output -> (IR input, pad, node), folded into the next Conv

    # ---- lookups -------------------------------------------------------------

    def where(self, node):
        return self.g.where(node)

    def shape(self, name):
        if name in self.oshape:
            return self.oshape[name]
        return self.g.shape(name)

    def is_const(self, name):
        return bool(name) and self.g.is_const(name)

    def const(self, name):
        return np.asarray(self.g.array(name)) if self.is_const(name) else None

    def int_const(self, node, name, what):
        """An integer-valued constant as int64 (the dialects store integers in floats)."""
        arr = self.const(name)
        if arr is None:
            raise FrontendError(self.where(node), f"{what} {name!r} is not a constant")
        if arr.dtype.kind == "f":
            if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
                raise FrontendError(self.where(node), f"{what} {name!r} holds non-integer values",
                                    f"the {self.dialect} dialect carries integers in its tensors")
            if np.any(np.abs(arr) >= 2.0 ** 62):
                raise FrontendError(self.where(node), f"{what} {name!r} is too large")
        elif arr.dtype.kind not in "iub":
            raise FrontendError(self.where(node), f"{what} {name!r} has dtype {arr.dtype}")
        return arr.astype(np.int64)

    def consumers(self, name):
        return self.g.consumers.get(name, [])

    def single_user(self, name):
        """The only node reading `name`, if it is not also a graph output."""
        users = self.consumers(name)
        if len(users) == 1 and name not in self.g.output_names:
            return users[0]
        return None

    def act(self, node, name):
        """The IR tensor behind an activation input."""
        if name in self.pending_pad:
            raise FrontendError(self.where(node), f"input {name!r} comes from a Pad that only a "
                                "convolution can absorb here")
        if name not in self.ir:
            if self.is_const(name):
                raise FrontendError(self.where(node), f"input {name!r} is a constant where an "
                                    "activation was expected")
            raise FrontendError(self.where(node), f"input {name!r} is not an activation tessera lowered",
                                f"it comes from {self._producer_text(name)}")
        return self.ir[name]

    def _producer_text(self, name):
        p = self.g.producer.get(name)
        return f"node {p.name!r} ({p.op_type})" if p is not None else "outside the graph"

    def eight_bit(self, node, x):
        t = self.b.tensors[x]
        if t.dtype != "int8":
            raise FrontendError(self.where(node), f"input {x!r} holds 32-bit values ({t.source_dtype})",
                                "tessera's kernels read 8-bit activations: requantize it first")

    def new_act(self, onnx_name, onnx_shape, source_dtype, layout, where):
        hwc = L.ir_shape(onnx_shape, layout, where)
        self.oshape[onnx_name] = list(onnx_shape)
        name = self.b.int_tensor(onnx_name, hwc, source_dtype, layout, onnx_shape)
        self.ir[onnx_name] = name
        self.layout[name] = layout
        return name

    def claim(self, *nodes):
        for n in nodes:
            self.claimed.add(id(n))

    # ---- the walk ----------------------------------------------------------------

    def parse(self):
        self._inputs()
        for node in self.g.graph.node:
            if id(node) in self.claimed or node.op_type == "Constant":
                continue
            handler = self.handler(node)
            if handler is not None:
                self.claim(node)
                handler(node)
        missing = self.finish_outputs()
        # an op tessera cannot lower is the better message than its consequence
        for node in self.g.graph.node:
            if id(node) not in self.claimed and node.op_type != "Constant":
                self.unclaimed(node)
        if missing:
            name = missing[0]
            raise FrontendError(self.g.path, f"graph output {name!r} is not produced by a layer tessera "
                                f"lowered (it comes from {self._producer_text(name)})")
        return self.b.finish()

    def handler(self, node):
        """The method lowering a main op, or None for ops that only appear
        inside a pattern (claimed by it, or reported at the end)."""
        if node.op_type in VIEW_OPS:
            return self.op_view
        return getattr(self, "op_" + node.op_type, None)

    def unclaimed(self, node):
        raise FrontendError(self.where(node), f"{node.op_type} is outside the {self.dialect} dialect "
                            "or not in a pattern tessera lowers", self.supported)

    # ---- graph inputs and outputs -------------------------------------------------

    def _inputs(self):
        g = self.g
        for name in g.input_names:
            shape = g.shape(name)
            layout = self.input_layout(name, shape)
            dtype = self.input_types.get(name, self.default_input)
            if dtype not in INT_RANGES:
                raise FrontendError(g.path, f"graph input {name!r}: dtype {dtype!r}",
                                    "inputs are int8, uint8 or int32")
            self.new_act(name, shape, dtype, layout, f"{g.path}: graph input {name!r}")
            self.b.inputs.append(name)

    def input_layout(self, name, shape):
        """Channel last when the input is a matrix (rank 2), has a batch
        axis, or reaches a MatMul/Gemm as its data operand (either MatMul
        operand); else channel first."""
        if len(shape) <= 2 or shape[0] != 1:
            return "hwc"
        seen, todo = set(), [name]
        while todo:
            t = todo.pop()
            for u in self.consumers(t):
                if (u.op_type == "Gemm" and u.input[0] == t or u.op_type == "MatMul" and t in u.input[:2]
                        or u.op_type in LAST_AXIS_OPS):
                    return "hwc"
                if u.op_type in ("Conv", "MaxPool", "AveragePool", "GlobalAveragePool", "Pad"):
                    continue
                for o in u.output:
                    if o not in seen and len(self.g.shapes.get(o, [])) == len(shape):
                        seen.add(o)
                        todo.append(o)
        return "chw"

    def finish_outputs(self):
        """Register the graph outputs; returns those no layer produced."""
        missing = []
        for name in self.output_sources():
            x = self.ir.get(name)
            if x is None:
                missing.append(name)
                continue
            t = self.b.tensors[x]
            if name in self.g.output_names:
                try:
                    t.source_shape = list(self.shape(name))
                except FrontendError:
                    pass
            if x not in self.b.outputs:
                self.b.outputs.append(x)
        return missing

    def output_sources(self):
        return list(self.g.output_names)

    # ---- views -----------------------------------------------------------------

    def op_view(self, node):
        src = node.input[0]
        x = self.act(node, src)
        self.ir[node.output[0]] = x
        shape = self._view_shape(node, self.shape(src))
        if int(np.prod(shape)) != int(np.prod(self.shape(src))):
            raise FrontendError(self.where(node), f"view from {self.shape(src)} to {shape} changes the size")
        self.oshape[node.output[0]] = shape

    def _view_shape(self, node, in_shape):
        name = node.output[0]
        if name in self.g.shapes and all(d is not None for d in self.g.shapes[name]):
            return list(self.g.shapes[name])
        a = attrs(node)
        op = node.op_type
        if op == "Flatten":
            axis = a.get("axis", 1)
            axis = axis + len(in_shape) if axis < 0 else axis
            return [int(np.prod(in_shape[:axis])), int(np.prod(in_shape[axis:]))]
        if op == "Reshape":
            target = [int(d) for d in self.int_const(node, node.input[1], "shape")]
            out = [in_shape[i] if d == 0 else d for i, d in enumerate(target)]
            if -1 in out:
                known = int(np.prod([d for d in out if d != -1]))
                out[out.index(-1)] = int(np.prod(in_shape)) // known
            return out
        if op == "Identity":
            return list(in_shape)
        axes = a.get("axes")
        if axes is None and len(node.input) > 1 and node.input[1]:
            axes = [int(v) for v in self.int_const(node, node.input[1], "axes")]
        if op == "Squeeze":
            if axes is None:
                return [d for d in in_shape if d != 1]
            axes = [x % len(in_shape) for x in axes]
            return [d for i, d in enumerate(in_shape) if i not in axes]
        out = list(in_shape)       # Unsqueeze
        for ax in sorted(x % (len(in_shape) + len(axes)) for x in axes):
            out.insert(ax, 1)
        return out

    # ---- main ops: accumulators ----------------------------------------------------

    def chw_input(self, node, x):
        if self.layout[x] != "chw":
            raise FrontendError(self.where(node), f"input {x!r} is a matrix (rows of a MatMul/Gemm), "
                                "not a feature map", "feed convolutions and pools NCHW/NCL tensors")

    def op_Conv(self, node):
        b = self.b
        name = node.input[0]
        extra_pad, pad_nodes = [0, 0, 0, 0], []
        if name in self.pending_pad:
            x, extra_pad, pad_node = self.pending_pad.pop(name)
            pad_nodes = [pad_node]
        else:
            x = self.act(node, name)
        self.chw_input(node, x)
        self.eight_bit(node, x)
        w = self.int_const(node, node.input[1], "weights")
        conv1d = w.ndim == 3
        if conv1d:                 # 1D conv: [Co, Ci, k] -> [Co, Ci, 1, k]
            w = w[:, :, None, :]
        tx = b.tensors[x]
        geo = conv_geometry(node, tx.shape, list(w.shape), self.where(node))
        geo["pad"] = [p + q for p, q in zip(geo["pad"], extra_pad)]
        kh, kw = geo["kernel"]
        over = [max(0, p - (k - 1)) for p, k in zip(geo["pad"], [kh, kw, kh, kw])]
        if any(over):
            # the tiler and kernels take pads below the kernel: the rest is a
            # zero Pad layer of its own (DORY's numbering then has one less)
            x = self._zero_pad_layer(node, x, over, pad_nodes)
            tx = b.tensors[x]
            geo["pad"] = [p - o for p, o in zip(geo["pad"], over)]
        bias = None
        if len(node.input) > 2 and node.input[2]:
            bias = self.int_const(node, node.input[2], "bias")
        oh, ow = out_hw(tx.shape, geo)
        co = w.shape[0]
        shape = [1, co, ow] if conv1d else [1, co, oh, ow]
        srcs = [n.name for n in pad_nodes] + [node.name]

        def emit(y, rq, extra_bias, sources):
            bb = self._sum_bias(bias, extra_bias, co)
            b.conv_int(node.name or "conv", x, y, w, bb, geo, rq, self.where(node), sources)

        self.finish_acc(Acc(node, node.output[0], shape, "chw", emit, sources=srcs))

    def _zero_pad_layer(self, node, x, pad, pad_nodes):
        tx = self.b.tensors[x]
        h, w, c = tx.shape
        top, left, bottom, right = pad
        onnx_shape = [1, c, h + top + bottom, w + left + right] if h > 1 or top or bottom else \
            [1, c, w + left + right]
        name = (node.input[0] or node.name) + "_pad"
        y = self.new_act(name, onnx_shape, tx.source_dtype, "chw", self.where(node))
        self.b.pad_int((node.name or "conv") + "_pad", x, y, pad, 0, self.rounding, self.where(node),
                       [n.name for n in pad_nodes])
        self.b.layers[-1].added = "padding beyond the convolution's kernel"
        return y

    def _sum_bias(self, bias, extra, co):
        """A Conv's own bias [Co] plus a folded Add's (per channel or [H, W, C])."""
        if bias is None:
            return extra
        bias = np.asarray(bias).reshape(-1)
        if bias.size != co:
            raise FrontendError(self.g.path, f"bias has {bias.size} values for {co} output channels")
        return bias if extra is None else extra + bias

    def _matrix_acc(self, node, a_name, w, alpha, offset, transpose_a=False):
        """A MatMul/Gemm whose data operand is an activation and whose weights
        w [N, K] are constant: a linear layer (vector input) or a pointwise
        layer over the rows of a matrix."""
        b = self.b
        x = self.act(node, a_name)
        self.eight_bit(node, x)
        a_shape = list(self.shape(a_name))
        n, k = w.shape
        if transpose_a:
            if len(a_shape) != 2 or 1 not in a_shape:
                raise FrontendError(self.where(node), f"Gemm with transA on a {a_shape} matrix is not supported",
                                    "transpose the data operand only when it is a vector")
            a_shape = a_shape[::-1]
        if a_shape[-1] != k:
            raise FrontendError(self.where(node), f"the data operand has {a_shape[-1]} columns, "
                                f"the weights {k} rows")
        out_shape = a_shape[:-1] + [n]
        tx = b.tensors[x]
        rows = int(np.prod(a_shape[:-1]))
        if rows == 1:
            # a vector (maybe a flattened feature map): fully connected
            def emit(y, rq, bias, sources):
                b.linear_int(node.name or "linear", x, y, w, bias, rq, self.where(node), sources)
        else:
            if self.layout[x] != "hwc" or tx.shape[2] != k:
                raise FrontendError(self.where(node), f"MatMul/Gemm over the rows of {a_shape} reads a "
                                    "reshaped feature map", "multiply matrices whose last axis is the "
                                    "contracted one")

            def emit(y, rq, bias, sources):
                b.pointwise_int(node.name or "matmul", x, y, w, bias, rq, self.where(node), sources)
        self.finish_acc(Acc(node, node.output[0], out_shape, "hwc", emit, alpha=alpha, offset=offset,
                            sources=[node.name]))

    def op_MatMul(self, node):
        a_name, b_name = node.input[0], node.input[1]
        if not self.is_const(b_name):
            if not self.is_const(a_name):
                return self._activation_matmul(node, a_name, b_name)
            shapes = []
            for t in (a_name, b_name):
                try:
                    shapes.append(self.shape(t))
                except FrontendError:
                    shapes.append("?")
            raise FrontendError(self.where(node), f"MatMul of a constant and an activation ({shapes[0]} x "
                                f"{shapes[1]}) is not supported: tessera's linear and pointwise layers "
                                "multiply the activation by constant weights",
                                "make the constant the second MatMul operand")
        w = self.int_const(node, b_name, "weights")
        if w.ndim != 2:
            raise FrontendError(self.where(node), f"MatMul with {w.ndim}D constant weights is not supported",
                                "use a 2D [K, N] weight matrix")
        self._matrix_acc(node, a_name, w.T, 1, None)

    def _activation_matmul(self, node, a_name, b_name):
        """A MatMul of two activations, a [..., M, K] x b [..., K, N]: the
        IR's matmul over the batches (b may be one matrix for all of them)."""
        b = self.b
        xa, xb = self.act(node, a_name), self.act(node, b_name)
        for x in (xa, xb):
            self.eight_bit(node, x)
            if self.layout[x] != "hwc":
                raise FrontendError(self.where(node), f"MatMul operand {x!r} is a feature map, not a matrix",
                                    "multiply matrices (or batches of them) whose last two axes are rows and columns")
        a_shape, b_shape = list(self.shape(a_name)), list(self.shape(b_name))
        if len(a_shape) < 2 or len(b_shape) < 2 or a_shape[-1] != b_shape[-2]:
            raise FrontendError(self.where(node), f"MatMul of {a_shape} x {b_shape}: the inner dimensions differ")
        a_lead, b_lead = a_shape[:-2], b_shape[:-2]
        try:
            lead = [int(d) for d in np.broadcast_shapes(tuple(a_lead), tuple(b_lead))]
        except ValueError:
            lead = None
        # the IR's matmul runs over a's batches, b has them all or is one matrix
        if lead is None or int(np.prod(lead)) != int(np.prod(a_lead)) or int(np.prod(b_lead)) not in (1, int(np.prod(lead))):
            raise FrontendError(self.where(node), f"MatMul of {a_shape} x {b_shape}: the batch axes do not "
                                "broadcast the second operand over the first", "give both operands the same "
                                "batches, or make the second one matrix")
        out_shape = lead + [a_shape[-2], b_shape[-1]]

        def emit(y, rq, bias, sources):
            b.matmul_int(node.name or "matmul", xa, xb, y, rq, self.where(node), sources)

        self.finish_acc(Acc(node, node.output[0], out_shape, "hwc", emit, takes_bias=False, sources=[node.name]))

    def op_Gemm(self, node):
        a = attrs(node)
        if not self.is_const(node.input[1]):
            raise FrontendError(self.where(node), "Gemm with a non-constant B operand is not supported",
                                "keep the weights an initializer")
        w = self.int_const(node, node.input[1], "weights")
        if w.ndim != 2:
            raise FrontendError(self.where(node), f"Gemm's B operand {node.input[1]!r} has shape {list(w.shape)}",
                                "ONNX's Gemm takes a 2-D B: re-export the model")
        if not a.get("transB", 0):
            w = w.T                          # [K, N] -> [N, K]
        alpha, beta = a.get("alpha", 1.0), a.get("beta", 1.0)
        if not (np.isfinite(alpha) and np.isfinite(beta)) or alpha != int(alpha) or beta != int(beta):
            raise FrontendError(self.where(node), f"Gemm with alpha={alpha}, beta={beta}",
                                "integer graphs need integer alpha and beta")
        alpha, beta = int(alpha), int(beta)
        offset = None
        if len(node.input) > 2 and node.input[2]:
            offset = beta * self.int_const(node, node.input[2], "C")
        if alpha != 1 and np.abs(w).max(initial=0) * abs(alpha) <= 127:
            w, alpha = w * alpha, 1        # fold alpha into the int8 weights when it fits
        self._matrix_acc(node, node.input[0], w, alpha, offset, transpose_a=bool(a.get("transA", 0)))

    def op_MaxPool(self, node):
        b = self.b
        extra_pad = [0, 0, 0, 0]
        if node.input[0] in self.pending_pad:
            x, extra_pad, _ = self.pending_pad.pop(node.input[0])
        else:
            x = self.act(node, node.input[0])
        self.chw_input(node, x)   # 8-bit or int32: the max needs no requantization
        tx = b.tensors[x]
        top, left, bottom, right = extra_pad
        padded = [tx.shape[0] + top + bottom, tx.shape[1] + left + right, tx.shape[2]]
        geo = pool_geometry(node, padded, self.where(node), allow_pad=True)
        geo["pad"] = [p + q for p, q in zip(geo["pad"], extra_pad)]
        if any(p >= k for p, k in zip(geo["pad"], geo["kernel"] * 2)):
            raise FrontendError(self.where(node), f"max pooling padded by {geo['pad']} (with the Pad before "
                                f"it) is not smaller than its {geo['kernel']} window", "pad less")
        oh, ow = out_hw(tx.shape, geo)
        shape = self._pool_shape(node, tx, oh, ow)
        y = self.new_act(node.output[0], shape, tx.source_dtype, "chw", self.where(node))
        b.maxpool(node.name or "maxpool", x, y, geo["kernel"], geo["stride"], geo["pad"],
                  self.where(node), [node.name])

    def _pool_shape(self, node, tx, oh, ow):
        rank = len(self.shape(node.input[0]))
        return [1, tx.shape[2], oh, ow] if rank == 4 else [1, tx.shape[2], ow]

    def _avg_acc(self, node, kernel, stride, pad):
        b = self.b
        x = self.act(node, node.input[0])
        self.chw_input(node, x)
        self.eight_bit(node, x)
        tx = b.tensors[x]
        if any(pad):
            raise FrontendError(self.where(node), f"average pooling with padding {pad} is not supported",
                                "pool without padding")
        geo = {"kernel": kernel, "stride": stride, "pad": [0, 0, 0, 0]}
        oh, ow = out_hw(tx.shape, geo)
        n = kernel[0] * kernel[1]
        lo, hi = INT_RANGES[tx.source_dtype]

        def emit(y, rq, bias, sources):
            b.avgpool_int(node.name or "avgpool", x, y, kernel, stride, rq, self.where(node), sources)

        self.finish_acc(Acc(node, node.output[0], self._pool_shape(node, tx, oh, ow), "chw", emit,
                            takes_bias=False, den=n, acc_range=(lo * n, hi * n), sources=[node.name]))

    def op_AveragePool(self, node):
        x = self.act(node, node.input[0])
        geo = pool_geometry(node, self.b.tensors[x].shape, self.where(node), allow_pad=True)
        if attrs(node).get("count_include_pad", 0) and any(geo["pad"]):
            raise FrontendError(self.where(node), "average pooling with padding is not supported")
        self._avg_acc(node, geo["kernel"], geo["stride"], geo["pad"])

    def op_GlobalAveragePool(self, node):
        x = self.act(node, node.input[0])
        h, w, _ = self.b.tensors[x].shape
        self._avg_acc(node, [h, w], [1, 1], [0, 0, 0, 0])

    def pad_params(self, node, rank):
        """(IR pad [top, left, bottom, right], constant value) of a Pad node."""
        a = attrs(node)
        mode = a.get("mode", b"constant")
        mode = mode.decode() if isinstance(mode, bytes) else mode
        if mode != "constant":
            raise FrontendError(self.where(node), f"Pad mode {mode!r} is not supported", "pad with a constant")
        if "pads" in a:
            pads = [int(p) for p in a["pads"]]
        elif len(node.input) > 1 and node.input[1]:
            pads = [int(p) for p in self.int_const(node, node.input[1], "pads")]
        else:
            raise FrontendError(self.where(node), "Pad without pads")
        if len(node.input) > 3 and node.input[3]:
            raise FrontendError(self.where(node), "Pad with axes is not supported")
        value = a.get("value", 0.0)
        if len(node.input) > 2 and node.input[2]:
            value = self.int_const(node, node.input[2], "pad value").reshape(())
        if value != int(value):
            raise FrontendError(self.where(node), f"pad value {value} is not an integer")
        if len(pads) != 2 * rank or any(p < 0 for p in pads):
            raise FrontendError(self.where(node), f"pads {pads} for a rank-{rank} tensor")
        begin, end = pads[:rank], pads[rank:]
        if any(begin[:2]) or any(end[:2]):
            raise FrontendError(self.where(node), f"Pad along batch or channels ({pads}) is not supported",
                                "pad only the spatial axes")
        if rank == 4:
            return [begin[2], begin[3], end[2], end[3]], int(value)
        if rank == 3:
            return [0, begin[2], 0, end[2]], int(value)
        raise FrontendError(self.where(node), f"Pad of a rank-{rank} tensor is not supported")

    def op_Pad(self, node):
        b = self.b
        name = node.input[0]
        in_shape = self.shape(name)
        pad, value = self.pad_params(node, len(in_shape))
        if name in self.pending_pad and value == 0:
            # Pad -> Pad: one padding (both zero), so the layers stay DORY's
            x, first, first_node = self.pending_pad.pop(name)
            pad = [p + q for p, q in zip(first, pad)]
            in_shape = self.shape(first_node.input[0])
        else:
            x = self.act(node, name)
        self.chw_input(node, x)
        user = self.single_user(node.output[0])
        source_zero = 0  # what the IR's padded positions stand for in a Conv
        if user is not None and user.input[0] == node.output[0] and (
                user.op_type == "Conv" and value == source_zero
                or user.op_type == "Pad" and value == 0
                or user.op_type == "MaxPool" and value <= INT_RANGES[b.tensors[x].source_dtype][0]):
            # folded into the next layer's padding (a max pool ignores padded
            # positions, which a value no activation undercuts never wins)
            self.pending_pad[node.output[0]] = (x, pad, node)
            return
        self.eight_bit(node, x)
        tx = b.tensors[x]
        shape = list(in_shape)
        shape[-1] += pad[1] + pad[3]
        if len(shape) == 4:
            shape[-2] += pad[0] + pad[2]
        y = self.new_act(node.output[0], shape, tx.source_dtype, "chw", self.where(node))
        b.pad_int(node.name or "pad", x, y, pad, value, self.rounding, self.where(node), [node.name])
        if value == 0:
            # DORY folds a zero Pad into the next layer (an average pool
            # too, whose window then counts the zeros): not a layer it counts
            b.layers[-1].added = "a zero Pad the next layer cannot take"

    # ---- requantization ----------------------------------------------------------

    def finish_acc(self, acc):
        """Follow the accumulator through the dialect's requantization,
        register the output tensor and emit the layer."""
        raise NotImplementedError

    def hwc_params(self, acc, arrays, what):
        hwc = L.ir_shape(acc.shape, acc.layout, self.where(acc.node))
        return L.params_hwc(arrays, acc.shape, acc.layout, hwc, self.where(acc.node), what)

    def bias_array(self, acc, offset, what="bias"):
        """An ONNX-shaped additive term as an IR bias: [C] per channel, else
        [H, W, C] per element."""
        hwc = L.ir_shape(acc.shape, acc.layout, self.where(acc.node))
        full = L.to_hwc(L.broadcast_param(offset, acc.shape, self.where(acc.node), what), acc.layout, hwc)
        values, shape = L.compress(full)
        if shape is None:
            return np.broadcast_to(values, (hwc[2],)).astype(np.int64)
        return np.ascontiguousarray(full).astype(np.int64)


"""Builds the IR graph that every dialect parser produces.

Dialect parsers find the patterns in their ONNX graphs; they call these
methods with integer weights and either real scales (QDQ, QOperator: the
requantization is derived here) or ready integer requantization (NEMO,
QuantLib). Names, storage shifts and weight layouts are decided here once.
"""

import hashlib

import numpy as np

from ..util.cname import c_name
from ..errors import FrontendError
from ..ir import RESIZE_FRAC, Graph, Layer, Requant, Tensor
from .fixedpoint import common_shift_multipliers, quantize_multiplier

STORAGE_SHIFT = {"int8": 0, "uint8": 128, "int32": 0}
MAX_CONCAT = 8   # TSR_MAX_CONCAT in kernels.h
MAX_NAME = 64    # characters of a layer name (a file name and a C symbol's tail)


def _dilation(geometry):
    """The IR's dilation of a conv geometry: None when every tap is adjacent
    (a 1-wide kernel axis is never dilated)."""
    dil = [int(d) if k > 1 else 1 for d, k in zip(geometry.get("dilation", [1, 1]), geometry["kernel"])]
    return None if dil == [1, 1] else dil


def int8_weights(w, where):
    """(int8 array, weight offset) holding integer weights w: w itself when
    it fits int8, else w - offset with the offset that centres it (asymmetric
    or uint8 weights span up to 9 bits; ir.Layer.weight_offset)."""
    w = np.asarray(w, dtype=np.int64)
    if not w.size or (w.min() >= -128 and w.max() <= 127):
        return w.astype(np.int8), 0
    lo, hi = int(w.min()), int(w.max())
    if hi - lo > 255:
        raise FrontendError(where, f"weights span [{lo}, {hi}], more than 8 bits", "quantize weights to 8 bits")
    offset = lo + 128
    return (w - offset).astype(np.int8), offset


def wide_bias(bias, rq):
    """A bias wider than 32 bits at the accumulator scale (a float bias far
    larger than s_x * s_w, as a vendor's segmentation export has): such a
    channel's bias, times the multiplier, becomes the requantization's
    additive term instead:
    ((acc + b) * mul) >> s = (acc * mul + (b - b32) * mul) >> s
    (the 64-bit term is kept in 32 bits in units of 2^add_shift: far below
    one output step, so within ONNX Runtime's float rounding)."""
    if bias is None:
        return None, rq
    bias = np.asarray(bias, dtype=np.int64)
    if not np.any(np.abs(bias) >= 2 ** 31) or rq is None or rq.rounding not in ("half_up", "floor"):
        return (None if bias is None else bias.astype(np.int32)), rq
    if rq.neg_mul:
        raise ValueError("a bias wider than 32 bits beside a LeakyRelu folded into the requantization")
    # a channel whose bias does not fit keeps none of it: the int32 accumulator
    # the kernels sum it into has no room left beside it
    b32 = np.where(np.abs(bias) >= 2 ** 31, 0, bias)
    excess = bias - b32
    n = len(bias)
    mul = [int(m) for m in np.broadcast_to(rq.mul, (n,))]
    shift = [int(s) for s in np.broadcast_to(rq.shift, (n,))]
    for c in range(n):
        # the 64-bit sum acc * mul + term: the multiplier gives up low bits (a
        # 2^-21 part of itself at most) where the term would pass 62 bits
        while abs(int(excess[c]) * mul[c]) >= 2 ** 62 and mul[c] >= 1 << 21:
            mul[c], shift[c] = (mul[c] + 1) >> 1, shift[c] - 1
    terms = [int(a) + int(e) * m for a, e, m in zip(np.broadcast_to(rq.add, (n,)), excess, mul)]
    # the kernels hold add in 32 bits, counting units of 2^add_shift: the term
    # rounds to that unit, a 2^(add_shift - shift) fraction of an output step
    widest = max(abs(t) for t in terms)
    add_shift = max(0, widest.bit_length() - 31)
    if add_shift and add_shift > min(shift) - 8:
        raise ValueError("a bias too wide for the requantization")
    half = (1 << add_shift) >> 1
    rq.mul, rq.shift = mul, shift
    rq.add = [(t + half) >> add_shift for t in terms]
    rq.add_shift = add_shift or None
    return b32.astype(np.int32), rq


class Builder:
    def __init__(self, name, dialect, path):
        self.name = name
        self.dialect = dialect
        self.path = path
        self.tensors = {}
        self.layers = []
        self.weights = {}
        self.inputs = []
        self.outputs = []
        self._layer_names = set()

    # ---- tensors -------------------------------------------------------

    def tensor(self, name, shape, source_dtype="int8", scale=None, zero_point=None):
        """Register an activation tensor (shape [H, W, C]) and return its name."""
        if name in self.tensors:
            return name
        if source_dtype not in STORAGE_SHIFT:
            raise FrontendError(self.path, f"tensor {name!r} has dtype {source_dtype}",
                                "activations must be int8, uint8 or int32")
        if not shape or any(int(d) < 1 for d in shape):
            # a zero or negative dimension (a graph input's, or a window larger
            # than its input) makes an empty or negative-sized tensor
            raise FrontendError(self.path, f"tensor {name!r} has shape {[int(d) for d in shape]}",
                                "every dimension must be 1 or more: check the input shape and the layers' "
                                "kernels, strides and pads")
        dtype = "int32" if source_dtype == "int32" else "int8"
        self.tensors[name] = Tensor(
            name=name, shape=[int(d) for d in shape], dtype=dtype,
            shift=STORAGE_SHIFT[source_dtype], source_dtype=source_dtype,
            scale=None if scale is None else float(scale),
            zero_point=None if zero_point is None else int(zero_point))
        return name

    def stored_zero_point(self, name):
        t = self.tensors[name]
        return (t.zero_point or 0) - t.shift

    def clamp_range(self, name):
        """(lo, hi) of a tensor's stored values."""
        t = self.tensors[name]
        if t.dtype == "int32":
            return -(1 << 31), (1 << 31) - 1
        return -128, 127

    # ---- layers ----------------------------------------------------------

    def layer_name(self, hint):
        """A unique C-identifier name for a layer from a node's name. Names
        become file names (src/<name>.c, tiling/<name>.json): a converter's
        fused node names run to hundreds of characters, so a long one keeps
        its readable end and a digest of the whole (the same name on every
        build)."""
        base = c_name(hint)
        if len(base) > MAX_NAME:
            digest = hashlib.sha256(base.encode()).hexdigest()[:8]
            base = c_name(base[-(MAX_NAME - 9):]) + "_" + digest
        name, i = base, 1
        while name in self._layer_names:
            i += 1
            name = f"{base}_{i}"
        self._layer_names.add(name)
        return name

    def add_layer(self, layer, arrays):
        """Append a layer; `arrays` maps 'weights'/'bias' to NumPy arrays."""
        self._attach(layer, arrays)
        self.layers.append(layer)
        return layer

    def _attach(self, layer, arrays):
        """Store a layer's arrays under its name and digest them."""
        digest = hashlib.sha256()
        for role in ("weights", "bias"):
            if arrays.get(role) is not None:
                key = f"{layer.name}.{role}"
                arr = np.ascontiguousarray(arrays[role])
                self.weights[key] = arr
                setattr(layer, role, key)
                if role == "bias" and arr.ndim == 3:
                    layer.bias_shape = [int(d) for d in arr.shape]
                digest.update(role.encode() + str(arr.dtype).encode() + str(arr.shape).encode())
                digest.update(arr.tobytes())
        layer.digest = digest.hexdigest()[:16]

    def recurrent(self, layer, arrays):
        """Append a recurrent layer (op lstm): its arrays packed into one
        int8 weight array (golden.recurrent.pack), their places in
        layer.rnn["layout"]."""
        from ..golden.recurrent import pack
        blob, layout = pack(arrays, layer.rnn["n_output"])
        layer.rnn = dict(layer.rnn, layout=layout, bytes=int(blob.size))
        return self.add_layer(layer, {"weights": blob})

    def finish(self):
        if not self.layers:
            raise FrontendError(self.path, "no layers found", "is this a quantized network?")
        for layer in self.layers:
            if layer.op == "lut" and layer.table is not None and len(layer.table) > 256:
                # a table per channel: the layer's weights, in the weight level (ir.Layer)
                table = np.asarray(layer.table, dtype=np.int8).reshape(-1, 256)
                layer.table = None
                self._attach(layer, {"weights": table})
        graph = Graph(self.name, self.dialect, self.tensors, self.layers, self.inputs, self.outputs)
        return graph, self.weights

    def check_order(self):
        """Every layer reads graph inputs or tensors an earlier layer made
        (a TFLite operator may name a tensor made after it, and its
        interpreter runs that on whatever the tensor holds; an ONNX graph's
        order is the checker's). Not for the scratch builders that fold
        constants, whose inputs come from the values they are given."""
        made = set(self.inputs)
        for layer in self.layers:
            early = next((t for t in layer.inputs if t not in made), None)
            if early is not None:
                raise FrontendError(self.path, f"layer {layer.name!r} ({layer.op}) reads tensor {early!r} before any "
                                    "layer makes it", "operators must come in an order that computes each input "
                                    "first; re-convert the model")
            made.add(layer.output)

    # ---- real-scale lowering (QDQ, QOperator) ---------------------------

    def _requant_real(self, x, y, ratios, where, clamp=None):
        """Requant for acc scaled by ratios[c] = s_x * s_w[c] / s_y."""
        muls, shifts = [], []
        for r in np.atleast_1d(ratios):
            try:
                m, s = quantize_multiplier(float(r))
            except ValueError as err:
                raise FrontendError(where, f"requantization scale: {err}") from None
            muls.append(m)
            shifts.append(s)
        lo, hi = self.clamp_range(y)
        if clamp is not None:
            lo, hi = max(lo, clamp[0]), min(hi, clamp[1])
        return Requant(mul=muls, add=[0], shift=shifts, rounding="half_up",
                       zero_point=self.stored_zero_point(y), lo=lo, hi=hi)

    def real_clamp(self, y, real_lo, real_hi):
        """Stored-domain clamp for a real-valued activation range (ReLU, Clip)."""
        t = self.tensors[y]
        lo, hi = self.clamp_range(y)
        zp = self.stored_zero_point(y)
        if real_lo is not None:
            lo = max(lo, int(np.rint(real_lo / t.scale)) + zp)
        if real_hi is not None:
            hi = min(hi, int(np.rint(real_hi / t.scale)) + zp)
        return lo, hi

    @staticmethod
    def _wide_bias(bias, rq, where):
        """wide_bias, its refusals one line naming the layer."""
        try:
            return wide_bias(bias, rq)
        except ValueError as err:
            raise FrontendError(where, f"{err}: the bias does not fit the int32 accumulator",
                                "re-quantize the model (its bias and scales are out of proportion)") from None

    def conv(self, hint, x, y, w, w_scale, bias, geometry, where, clamp=None, sources=(), leaky=None):
        """A Conv (weights [Co, Ci/g, kh, kw] as in ONNX, integers less their
        zero point: int8, or 9-bit for asymmetric weights) from real scales.

        geometry: dict kernel, stride, pad (top, left, bottom, right), group.
        """
        tx, ty = self.tensors[x], self.tensors[y]
        ci = tx.shape[2]
        co = w.shape[0]
        group = geometry["group"]
        kernel, stride, pad = geometry["kernel"], geometry["stride"], geometry["pad"]
        # the weights' shape against the input's channels and the window: a
        # graph whose declared shapes disagree is one line, not a reshape error
        if w.ndim != 4 or group < 1 or w.shape[1] * group != ci or list(w.shape[2:]) != list(kernel):
            raise FrontendError(where, f"weights of shape {list(w.shape)} (group {group}, kernel {list(kernel)}) "
                                f"for a {ci}-channel input", "the weights must be [Co, Ci/group, kh, kw]")
        if group == 1:
            if list(kernel) == [1, 1] and list(stride) == [1, 1] and not any(pad):
                op, wl = "pointwise", w.reshape(co, ci)
            else:
                op, wl = "conv2d", w.transpose(0, 2, 3, 1)
        elif group == ci and co == ci:
            op, wl = "depthwise", w.reshape(co, kernel[0], kernel[1]).transpose(1, 2, 0)
        else:
            raise FrontendError(where, f"grouped convolution (group={group}, {ci} in, {co} out) is not supported",
                                "use group=1 or depthwise (group = input channels = output channels)")
        w_scale = np.broadcast_to(np.asarray(w_scale, dtype=np.float64), (co,))
        ratios = tx.scale * w_scale / ty.scale
        rq = self._requant_real(x, y, ratios, where, clamp)
        if leaky is not None:
            # Conv -> LeakyRelu -> Q: a negative accumulator is scaled by alpha too
            if np.any(ratios != ratios[0]):
                raise FrontendError(where, "a LeakyRelu after a convolution with per-channel weight scales "
                                    "and no QuantizeLinear between", "quantize the Conv's output before the LeakyRelu")
            neg = self._requant_real(x, y, [abs(leaky) * ratios[0]], where)
            if leaky < 0 or neg.mul[0] == 0:
                raise FrontendError(where, f"LeakyRelu alpha {leaky} after a convolution",
                                    "a slope above 0, or quantize the Conv's output before the LeakyRelu")
            rq.neg_mul, rq.neg_shift = neg.mul, neg.shift
        dil = _dilation(geometry)
        wl, offset = int8_weights(wl, where)
        bias, rq = self._wide_bias(bias, rq, where)
        layer = Layer(name=self.layer_name(hint), op=op, inputs=[x], output=y,
                      kernel=list(kernel), stride=list(stride), pad=list(pad),
                      input_offset=-self.stored_zero_point(x), requant=rq, source=list(sources),
                      dilation=dil, weight_offset=offset or None)
        return self.add_layer(layer, {"weights": wl, "bias": bias})

    def linear(self, hint, x, y, w, w_scale, bias, where, clamp=None, sources=()):
        """A Gemm/MatMul with weights [Co, K], K in ONNX's flatten order of
        the NCHW input (c*H*W + h*W + w)."""
        tx, ty = self.tensors[x], self.tensors[y]
        h, wd, c = tx.shape
        co, k = w.shape
        if k != h * wd * c:
            raise FrontendError(where, f"weights have {k} inputs but the input tensor has {h * wd * c} values")
        if h * wd > 1:
            # ONNX flattened NCHW (index c*H*W + h*W + w); tessera's tensor is HWC.
            w = w.reshape(co, c, h, wd).transpose(0, 2, 3, 1).reshape(co, k)
        w_scale = np.broadcast_to(np.asarray(w_scale, dtype=np.float64), (co,))
        rq = self._requant_real(x, y, tx.scale * w_scale / ty.scale, where, clamp)
        w, offset = int8_weights(w, where)
        bias, rq = self._wide_bias(bias, rq, where)
        layer = Layer(name=self.layer_name(hint), op="linear", inputs=[x], output=y,
                      input_offset=-self.stored_zero_point(x), requant=rq, source=list(sources),
                      weight_offset=offset or None)
        return self.add_layer(layer, {"weights": w, "bias": bias})

    def _broadcast(self, what, a, b, y, where):
        ta, tb, ty = self.tensors[a], self.tensors[b], self.tensors[y]
        try:
            shape = list(np.broadcast_shapes(tuple(ta.shape), tuple(tb.shape)))
        except ValueError:
            shape = None
        if shape != ty.shape:
            raise FrontendError(where, f"{what} of shapes {ta.shape} and {tb.shape} (HWC) into {ty.shape}",
                                "broadcast only along axes of size 1 (e.g. [H, W, C] with [1, 1, C])")

    def _full_first(self, a, b, y):
        """Operands of a commutative op with the full-shape one first (the
        tiled form reads the other as a per-channel vector)."""
        if self.tensors[a].shape != self.tensors[y].shape and self.tensors[b].shape == self.tensors[y].shape:
            return b, a
        return a, b

    def add(self, hint, a, b, y, where, clamp=None, sources=()):
        self._broadcast("add", a, b, y, where)
        a, b = self._full_first(a, b, y)
        ta, tb, ty = self.tensors[a], self.tensors[b], self.tensors[y]
        muls, shift = common_shift_multipliers([ta.scale / ty.scale, tb.scale / ty.scale])
        lo, hi = self.clamp_range(y)
        if clamp is not None:
            lo, hi = max(lo, clamp[0]), min(hi, clamp[1])
        rq = Requant(mul=[1], add=[0], shift=[shift], rounding="half_up",
                     zero_point=self.stored_zero_point(y), lo=lo, hi=hi)
        layer = Layer(name=self.layer_name(hint), op="add", inputs=[a, b], output=y,
                      in_mul=muls, in_offset=[-self.stored_zero_point(a), -self.stored_zero_point(b)],
                      requant=rq, source=list(sources))
        return self.add_layer(layer, {})

    def avgpool(self, hint, x, y, kernel, stride, where, sources=(), clamp=None):
        tx, ty = self.tensors[x], self.tensors[y]
        n = kernel[0] * kernel[1]
        rq = self._requant_real(x, y, [tx.scale / (ty.scale * n)], where, clamp)
        layer = Layer(name=self.layer_name(hint), op="avgpool", inputs=[x], output=y,
                      kernel=list(kernel), stride=list(stride),
                      input_offset=-self.stored_zero_point(x), requant=rq, source=list(sources))
        return self.add_layer(layer, {})

    def matmul(self, hint, a, b, y, where, clamp=None, sources=()):
        """y [Bt, M, N] = a [Bt, M, K] x b [Bb, K, N] (Bb = Bt, or 1) of two
        activations, from real scales (attention's Q.K^T and P.V)."""
        ta, tb, ty = self.tensors[a], self.tensors[b], self.tensors[y]
        if ta.shape[2] != tb.shape[1] or tb.shape[0] not in (1, ta.shape[0]) \
                or ty.shape != [ta.shape[0], ta.shape[1], tb.shape[2]]:
            raise FrontendError(where, f"matmul of {ta.shape} and {tb.shape} into {ty.shape}")
        rq = self._requant_real(a, y, [ta.scale * tb.scale / ty.scale], where, clamp)
        layer = Layer(name=self.layer_name(hint), op="matmul", inputs=[a, b], output=y,
                      in_offset=[-self.stored_zero_point(a), -self.stored_zero_point(b)],
                      requant=rq, source=list(sources))
        return self.add_layer(layer, {})

    def layernorm(self, hint, x, y, eps_term, mul, add, shift, where, clamp=None, sources=()):
        """The IR's layernorm "int" (frontend.tables.layernorm_params): the
        exact Q16 normalization, requantized per channel."""
        lo, hi = self.clamp_range(y)
        if clamp is not None:
            lo, hi = max(lo, clamp[0]), min(hi, clamp[1])
        rq = Requant(mul=[int(m) for m in mul], add=[int(a) for a in add], shift=[int(s) for s in shift],
                     rounding="half_up", zero_point=self.stored_zero_point(y), lo=lo, hi=hi)
        layer = Layer(name=self.layer_name(hint), op="layernorm", inputs=[x], output=y, mode="int",
                      input_offset=-self.stored_zero_point(x), requant=rq, table=[int(eps_term)],
                      source=list(sources))
        return self.add_layer(layer, {})

    def mul(self, hint, a, b, y, where, clamp=None, sources=()):
        """Elementwise product of two activations (broadcast along size-1 axes)."""
        self._broadcast("mul", a, b, y, where)
        a, b = self._full_first(a, b, y)
        ta, tb, ty = self.tensors[a], self.tensors[b], self.tensors[y]
        rq = self._requant_real(a, y, [ta.scale * tb.scale / ty.scale], where, clamp)
        layer = Layer(name=self.layer_name(hint), op="mul", inputs=[a, b], output=y,
                      in_offset=[-self.stored_zero_point(a), -self.stored_zero_point(b)],
                      requant=rq, source=list(sources))
        return self.add_layer(layer, {})

    def concat(self, hint, xs, y, axis, where, sources=(), clamp=None):
        """Inputs joined along HWC `axis`, each rescaled to y's parameters."""
        ty = self.tensors[y]
        if len(xs) > MAX_CONCAT:
            raise FrontendError(where, f"concatenation of {len(xs)} tensors",
                                f"concatenate at most {MAX_CONCAT} tensors per node (nest Concat nodes)")
        shapes = [self.tensors[x].shape for x in xs]
        want = list(shapes[0])
        want[axis] = sum(s[axis] for s in shapes)
        if any(s[:axis] + s[axis + 1:] != shapes[0][:axis] + shapes[0][axis + 1:] for s in shapes) \
                or want != ty.shape:
            raise FrontendError(where, f"concatenation of {shapes} along HWC axis {axis} into {ty.shape}")
        same = all((self.tensors[x].scale, self.stored_zero_point(x)) == (ty.scale, self.stored_zero_point(y))
                   for x in xs)
        if same:   # a plain copy: no rescaling at all
            muls, shift = [1] * len(xs), 0
        else:
            muls, shift = common_shift_multipliers([self.tensors[x].scale / ty.scale for x in xs])
        lo, hi = self.clamp_range(y) if clamp is None else clamp
        rq = Requant(mul=[1], add=[0], shift=[shift], rounding="half_up",
                     zero_point=self.stored_zero_point(y), lo=lo, hi=hi)
        layer = Layer(name=self.layer_name(hint), op="concat", inputs=list(xs), output=y,
                      in_mul=muls, in_offset=[-self.stored_zero_point(x) for x in xs], axis=int(axis),
                      requant=rq, source=list(sources))
        return self.add_layer(layer, {})

    def resize(self, hint, x, y, table, mode, where, sources=(), clamp=None):
        """Nearest or bilinear resize from a resize table (frontend.tables)."""
        tx, ty = self.tensors[x], self.tensors[y]
        ratio = tx.scale / (ty.scale * float(1 << (2 * RESIZE_FRAC)))
        rq = self._requant_real(x, y, [ratio], where, clamp)
        layer = Layer(name=self.layer_name(hint), op="resize", inputs=[x], output=y,
                      input_offset=-self.stored_zero_point(x), requant=rq, mode=mode,
                      table=[int(v) for v in table], source=list(sources))
        return self.add_layer(layer, {})

    def lut(self, hint, x, y, table, sources=()):
        """An int8 -> int8 table (256 values, or 256 per channel)."""
        layer = Layer(name=self.layer_name(hint), op="lut", inputs=[x], output=y,
                      table=[int(v) for v in np.asarray(table).reshape(-1)], source=list(sources))
        return self.add_layer(layer, {})

    def qparams(self, name):
        """(storage shift, scale, zero point) of a tensor, for frontend.tables."""
        t = self.tensors[name]
        return t.shift, t.scale, t.zero_point or 0

    def softmax(self, hint, x, y, where, beta=1.0, sources=()):
        from .tables import softmax_params

        tx, ty = self.tensors[x], self.tensors[y]
        try:
            table, mul, shift = softmax_params(tx.scale, ty.scale, beta, channels=tx.shape[2])
        except ValueError as err:
            raise FrontendError(where, str(err)) from None
        lo, hi = self.clamp_range(y)
        rq = Requant(mul=[mul], add=[0], shift=[shift], rounding="half_up",
                     zero_point=self.stored_zero_point(y), lo=lo, hi=hi)
        layer = Layer(name=self.layer_name(hint), op="softmax", inputs=[x], output=y,
                      requant=rq, table=table, source=list(sources))
        return self.add_layer(layer, {})

    def maxpool(self, hint, x, y, kernel, stride, pad, where, sources=()):
        tx, ty = self.tensors[x], self.tensors[y]
        if (tx.scale, tx.zero_point, tx.shift) != (ty.scale, ty.zero_point, ty.shift):
            if tx.dtype != "int8" or tx.scale is None or ty.scale is None:
                raise FrontendError(where, "max pooling with different input and output quantization",
                                    "quantize MaxPool with shared input/output parameters (ONNX Runtime does)")
            # requantization is monotonic: pool in x's parameters, then
            # rescale with a table (max and requantize commute)
            from .tables import lut_table
            pooled = self.tensor(y + "_pooled", ty.shape, tx.source_dtype, tx.scale, tx.zero_point)
            self.maxpool(hint, x, pooled, kernel, stride, pad, where, sources)
            return self.lut(hint + "_rescale", pooled, y, lut_table("Identity", {}, self.qparams(pooled),
                                                                    self.qparams(y)), sources)
        layer = Layer(name=self.layer_name(hint), op="maxpool", inputs=[x], output=y,
                      kernel=list(kernel), stride=list(stride), pad=list(pad), source=list(sources))
        return self.add_layer(layer, {})

    def moved(self, src, flat, name, shape, where, hint, sources=(), layout=None):
        """The IR tensor `name` of `shape` holding src's values in the order
        `flat` (an index array into src, frontend.movement): src itself when
        the order and shape are its own, else a reshape, a transpose or a
        gather of src (and a reshape after it when its shape is not the one
        wanted), or a transpose of src viewed as other axes (layout.
        strided_transpose: a head split or merge). None when no single
        layer moves src into that order."""
        from .layout import strided_transpose
        from .movement import classify
        x = self.tensors[src]
        kind = classify(flat, x.shape)
        # one transpose of src viewed as other axes rather than a gather, or
        # a transpose and a reshape after it
        if kind is None or kind[0] == "gather" or (kind[0] == "transpose" and list(kind[-1]) != list(shape)):
            moved = strided_transpose(flat)
            if moved is not None:
                y = self.tensor(name, shape, x.source_dtype, x.scale, x.zero_point)
                if layout is not None:
                    self.tensors[y].source_layout = layout
                self.transpose(f"transpose_{hint}", src, y, *moved, where, sources=sources)
                return y
        if kind is None:
            return None
        if kind[0] == "same" and list(shape) == x.shape:
            return src
        y = self.tensor(name, shape, x.source_dtype, x.scale, x.zero_point)
        if layout is not None:
            self.tensors[y].source_layout = layout
        if kind[0] == "same":
            self.movement("reshape", f"reshape_{hint}", src, y, where, sources=sources)
            return y
        out = y
        if list(kind[-1]) != list(shape):
            out = self.tensor(f"{name}_{kind[0]}", kind[-1], x.source_dtype, x.scale, x.zero_point)
        if kind[0] == "transpose":
            self.movement("transpose", f"transpose_{hint}", src, out, where, perm=kind[1], sources=sources)
        elif kind[0] == "rows_cols":
            # rows and columns picked: a nearest resize's table (a copy of values, no arithmetic)
            table = [v for r in kind[1] for v in (r, r, 0)] + [v for q in kind[2] for v in (q, q, 0)]
            self.resize(f"resize_{hint}", src, out, table, "nearest", where, sources=sources)
        else:
            self.movement("gather", f"gather_{hint}", src, out, where, axis=kind[1], table=kind[2], sources=sources)
        if out != y:
            self.movement("reshape", f"reshape_{hint}", out, y, where, sources=sources)
        return y

    def movement(self, op, hint, x, y, where, perm=None, axis=None, table=None, fill=None, sources=()):
        """A transpose, reshape or gather (ir.MOVEMENT_OPS): values moved, x's
        quantization kept."""
        tx, ty = self.tensors[x], self.tensors[y]
        if (tx.scale, tx.zero_point, tx.shift, tx.dtype) != (ty.scale, ty.zero_point, ty.shift, ty.dtype):
            raise FrontendError(where, f"{op} of a tensor into one of other quantization or type")
        want = None
        if op == "transpose":
            want = [tx.shape[p] for p in perm]
        elif op == "gather":
            want = list(tx.shape)
            want[axis] = len(table)
        if (want is not None and want != ty.shape) or tx.size != ty.size and op != "gather":
            raise FrontendError(where, f"{op} of {tx.shape} into {ty.shape}")
        layer = Layer(name=self.layer_name(hint), op=op, inputs=[x], output=y, source=list(sources),
                      perm=None if perm is None else [int(p) for p in perm], axis=None if axis is None else int(axis),
                      table=None if table is None else [int(v) for v in table],
                      fill=None if fill is None else int(fill))
        return self.add_layer(layer, {})

    # ---- integer lowering (NEMO, QuantLib) ---------------------------------
    # These dialects carry integers in the graph itself: the parsers hand over
    # exact integer requantization in the source domain (zero point 0) and
    # the builder only moves it to the stored domain (uint8 stored shifted).

    def int_tensor(self, name, shape, source_dtype, layout=None, source_shape=None):
        """Register an activation of an integer dialect; layout/source_shape
        are recorded for graph inputs and outputs."""
        self.tensor(name, shape, source_dtype)
        t = self.tensors[name]
        if layout is not None:
            t.source_layout = layout
        if source_shape is not None:
            t.source_shape = [int(d) for d in source_shape]
        return name

    def int_requant(self, y, mul, add, shift, rounding, lo=None, hi=None, shape=None):
        """Requant writing y from source-domain parameters:
        y_source = clamp((acc * mul + add + R) >> shift, lo, hi), lo/hi in
        y's source dtype (None: its full range)."""
        t = self.tensors[y]
        s_lo, s_hi = self.clamp_range(y)
        lo = s_lo if lo is None else max(s_lo, int(lo) - t.shift)
        hi = s_hi if hi is None else min(s_hi, int(hi) - t.shift)
        as_list = lambda v: [int(x) for x in np.atleast_1d(np.asarray(v, dtype=np.int64)).reshape(-1)]
        return Requant(mul=as_list(mul), add=as_list(add), shift=as_list(shift), rounding=rounding,
                       zero_point=-t.shift, lo=lo, hi=hi,
                       shape=None if shape is None else [int(d) for d in shape])

    def _conv_layout(self, x, w, geometry, where):
        """(IR op, weights in its layout) for ONNX conv weights [Co, Ci/g, kh, kw]."""
        ci = self.tensors[x].shape[2]
        co = w.shape[0]
        group = geometry["group"]
        kernel, stride, pad = geometry["kernel"], geometry["stride"], geometry["pad"]
        # the weights' shape against the input's channels and the window: a
        # graph whose declared shapes disagree is one line, not a reshape error
        if w.ndim != 4 or group < 1 or w.shape[1] * group != ci or list(w.shape[2:]) != list(kernel):
            raise FrontendError(where, f"weights of shape {list(w.shape)} (group {group}, kernel {list(kernel)}) "
                                f"for a {ci}-channel input", "the weights must be [Co, Ci/group, kh, kw]")
        if group == 1:
            if list(kernel) == [1, 1] and list(stride) == [1, 1] and not any(pad):
                return "pointwise", w.reshape(co, ci)
            return "conv2d", w.transpose(0, 2, 3, 1)
        if group == ci and co == ci:
            return "depthwise", w.reshape(co, kernel[0], kernel[1]).transpose(1, 2, 0)
        raise FrontendError(where, f"grouped convolution (group={group}, {ci} in, {co} out) is not supported",
                            "use group=1 or depthwise (group = input channels = output channels)")

    def _int_arrays(self, w, bias, where):
        w = np.asarray(w)
        if w.size and (w.min() < -128 or w.max() > 127):
            raise FrontendError(where, f"weights span [{int(w.min())}, {int(w.max())}], outside int8",
                                "quantize weights to 8 bits")
        if bias is not None:
            bias = np.asarray(bias)
            if np.any(np.abs(bias) >= 2 ** 31):
                raise FrontendError(where, "bias does not fit 32 bits")
            bias = bias.astype(np.int32)
        return w.astype(np.int8), bias

    def conv_int(self, hint, x, y, w, bias, geometry, requant, where, sources=()):
        """A Conv with integer weights [Co, Ci/g, kh, kw] and a ready Requant
        (None: y holds the int32 accumulators)."""
        op, wl = self._conv_layout(x, w, geometry, where)
        wl, bias = self._int_arrays(wl, bias, where)
        layer = Layer(name=self.layer_name(hint), op=op, inputs=[x], output=y,
                      kernel=list(geometry["kernel"]), stride=list(geometry["stride"]),
                      pad=list(geometry["pad"]), input_offset=-self.stored_zero_point(x),
                      requant=requant, source=list(sources), dilation=_dilation(geometry))
        return self.add_layer(layer, {"weights": wl, "bias": bias})

    def pointwise_int(self, hint, x, y, w, bias, requant, where, sources=()):
        """y[h, w, :] = W x[h, w, :] for every row of a MatMul/Gemm operand;
        w is [Co, K]."""
        geo = {"kernel": [1, 1], "stride": [1, 1], "pad": [0, 0, 0, 0], "group": 1}
        return self.conv_int(hint, x, y, np.asarray(w)[:, :, None, None], bias, geo, requant, where, sources)

    def linear_int(self, hint, x, y, w, bias, requant, where, sources=()):
        """A fully connected layer, w [Co, K] with K in ONNX's flatten order
        of x (channel first when x is [H, W, C] with H*W > 1)."""
        tx = self.tensors[x]
        h, wd, c = tx.shape
        co, k = w.shape
        if k != h * wd * c:
            raise FrontendError(where, f"weights have {k} inputs but the input tensor has {h * wd * c} values")
        if h * wd > 1 and tx.source_layout != "hwc":
            w = w.reshape(co, c, h, wd).transpose(0, 2, 3, 1).reshape(co, k)
        wl, bias = self._int_arrays(w, bias, where)
        layer = Layer(name=self.layer_name(hint), op="linear", inputs=[x], output=y,
                      input_offset=-self.stored_zero_point(x), requant=requant, source=list(sources))
        return self.add_layer(layer, {"weights": wl, "bias": bias})

    def add_int(self, hint, a, b, y, in_mul, requant, where, sources=()):
        ta, tb, ty = self.tensors[a], self.tensors[b], self.tensors[y]
        if ta.shape != tb.shape or ta.shape != ty.shape:
            raise FrontendError(where, f"add of shapes {ta.shape} and {tb.shape} needs broadcasting",
                                "only same-shape adds are supported")
        if ta.dtype != tb.dtype:
            raise FrontendError(where, f"add of {ta.dtype} and {tb.dtype} tensors", "add tensors of one width")
        layer = Layer(name=self.layer_name(hint), op="add", inputs=[a, b], output=y,
                      in_mul=[int(m) for m in in_mul],
                      in_offset=[-self.stored_zero_point(a), -self.stored_zero_point(b)],
                      requant=requant, source=list(sources))
        return self.add_layer(layer, {})

    def matmul_int(self, hint, a, b, y, requant, where, sources=()):
        """y [Bt, M, N] = a [Bt, M, K] x b [Bb, K, N] (Bb = Bt, or 1), two activations."""
        ta, tb = self.tensors[a], self.tensors[b]
        if ta.dtype != tb.dtype or ta.shape[2] != tb.shape[1] or tb.shape[0] not in (1, ta.shape[0]):
            raise FrontendError(where, f"matmul of {ta.shape} ({ta.dtype}) and {tb.shape} ({tb.dtype})")
        layer = Layer(name=self.layer_name(hint), op="matmul", inputs=[a, b], output=y,
                      in_offset=[-self.stored_zero_point(a), -self.stored_zero_point(b)],
                      requant=requant, source=list(sources))
        return self.add_layer(layer, {})

    def transpose(self, hint, x, y, dims, perm, where, sources=()):
        """y = x viewed as dims (three axes), axes permuted (ir.Layer transpose)."""
        tx, ty = self.tensors[x], self.tensors[y]
        if (len(dims) != 3 or int(np.prod(dims)) != tx.size or tx.size != ty.size
                or sorted(perm) != list(range(3))):
            raise FrontendError(where, f"transpose of {tx.shape} as {list(dims)} by {list(perm)} into {ty.shape}")
        layer = Layer(name=self.layer_name(hint), op="transpose", inputs=[x], output=y,
                      dims=[int(d) for d in dims], perm=[int(p) for p in perm], source=list(sources))
        return self.add_layer(layer, {})

    def reshape(self, hint, x, y, where, sources=()):
        """y = x's values in their stored order, y's [H, W, C] (ir.Layer reshape)."""
        tx, ty = self.tensors[x], self.tensors[y]
        if tx.size != ty.size or tx.dtype != ty.dtype:
            raise FrontendError(where, f"reshape of {tx.shape} into {ty.shape}")
        layer = Layer(name=self.layer_name(hint), op="reshape", inputs=[x], output=y, source=list(sources))
        return self.add_layer(layer, {})

    def softmax_int(self, hint, x, y, mode, params, where, sources=()):
        """One of Deeploy's integer softmaxes over the channels (ir.SOFTMAX_MODES):
        y is uint8, stored shifted."""
        if self.tensors[y].source_dtype != "uint8":
            raise FrontendError(where, f"{mode} writes uint8 probabilities, not {self.tensors[y].source_dtype}")
        layer = Layer(name=self.layer_name(hint), op="softmax", inputs=[x], output=y, mode=mode,
                      table=[int(v) for v in params], source=list(sources))
        return self.add_layer(layer, {})

    def ilayernorm(self, hint, x, y, weight, bias, log2d, lo, hi, where, sources=()):
        """Deeploy's iLayerNorm over the channels (ir.Layer layernorm
        "ilayernorm"); lo/hi in y's source dtype."""
        c = self.tensors[x].shape[2]
        w = np.asarray(weight, dtype=np.int64).reshape(-1)
        bb = np.asarray(bias, dtype=np.int64).reshape(-1)
        if w.size != c or bb.size != c:
            raise FrontendError(where, f"iLayerNorm weight/bias of {w.size}/{bb.size} values for {c} channels")
        if np.any(np.abs(w) >= 1 << 31) or np.any(np.abs(bb) >= 1 << 31):
            raise FrontendError(where, "iLayerNorm weight or bias beyond 32 bits")
        rq = self.int_requant(y, [1], [0], [log2d], "floor", lo, hi)
        layer = Layer(name=self.layer_name(hint), op="layernorm", inputs=[x], output=y, mode="ilayernorm",
                      input_offset=-self.stored_zero_point(x), requant=rq,
                      table=[int(v) for v in np.concatenate([w, bb])], source=list(sources))
        return self.add_layer(layer, {})

    def avgpool_int(self, hint, x, y, kernel, stride, requant, where, sources=()):
        """Window sums, requantized; a 1x1 window is an elementwise requant."""
        layer = Layer(name=self.layer_name(hint), op="avgpool", inputs=[x], output=y,
                      kernel=list(kernel), stride=list(stride),
                      input_offset=-self.stored_zero_point(x), requant=requant, source=list(sources))
        return self.add_layer(layer, {})

    def pad_int(self, hint, x, y, pad, value, rounding, where, sources=()):
        """A standalone constant Pad as a depthwise identity: the IR's padded
        positions contribute 0 to the accumulator, so shift the input by the
        pad value and add it back in the requantization. The kernel is
        (top + bottom + 1) x (left + right + 1), padded by top + bottom and
        left + right on both sides, with a single 1 at (bottom, right):
        out[i, j] = x[i - top, j - left], and every pad stays smaller than
        the kernel, as the tiler and kernels assume."""
        tx = self.tensors[x]
        if tx.dtype != "int8":
            raise FrontendError(where, "padding a 32-bit tensor is not supported",
                                "pad 8-bit activations")
        c_stored = int(value) - tx.shift
        if not -128 <= c_stored <= 127:
            raise FrontendError(where, f"pad value {value} is outside the tensor's {tx.source_dtype} range")
        top, left, bottom, right = pad
        kh, kw = top + bottom + 1, left + right + 1
        w = np.zeros((kh, kw, tx.shape[2]), np.int8)
        w[bottom, right, :] = 1
        rq = Requant(mul=[1], add=[c_stored], shift=[0], rounding=rounding, zero_point=0, lo=-128, hi=127)
        layer = Layer(name=self.layer_name(hint), op="depthwise", inputs=[x], output=y,
                      kernel=[kh, kw], pad=[kh - 1, kw - 1, kh - 1, kw - 1], input_offset=-c_stored,
                      requant=rq, source=list(sources))
        return self.add_layer(layer, {"weights": w})

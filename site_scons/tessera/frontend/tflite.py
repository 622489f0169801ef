"""int8 TFLite flatbuffers to IR, with TFLite's own integer arithmetic.

The flatbuffer is read with the `tflite` package (classes generated from
TFLite's schema.fbs); no TensorFlow. TFLite's activations are NHWC with
batch 1, i.e. tessera's HWC already, and its weights are laid out as
tessera's: CONV_2D [Co, kh, kw, Ci], FULLY_CONNECTED [Co, K] with K in the
HWC order of its input.

Every layer keeps TFLite's arithmetic (ir.Requant rounding "tflite":
doubling high multiply then rounding shift, as MultiplyByQuantizedMultiplier;
"tflite_div" for average pooling's rounded division; ADD's per-input
rescale after a left shift of 20), with the multipliers computed from the
float32 scales exactly as TFLite's Prepare steps compute them (the float
and double operations in the same order), so the golden model equals the
TFLite interpreter on every tensor (tessera.golden.tflitecheck checks it).

IR tensor names are `t<index>`, the TFLite tensor index, so every tensor can
be compared with the interpreter's. RESHAPE is an alias (TFLite's NHWC
flatten order is tessera's HWC order); PAD folds into the convolution that
reads it, or becomes a depthwise identity; QUANTIZE at a float input and
DEQUANTIZE at a float output are the network's edges.
"""

import math
from dataclasses import fields

import numpy as np

from .. import ir
from ..errors import FrontendError
from ..ir import Layer, Requant
from ..golden import ops as golden_ops
from . import movement
from .builder import Builder
from .tflite_math import quantize_multiplier, tfl_round
from .tflite_schema import (ACT_NONE, ACT_RELU, ACT_RELU6, ACT_RELU_N1_TO_1, FLOAT32, INT8, INT16, INT32,  # noqa: F401
                            SAME, TYPE_NAMES, UINT8, VALID)

ZERO_POINT_RANGE = {INT8: (-128, 127), UINT8: (0, 255), INT16: (-32768, 32767)}
ADD_LEFT_SHIFT = 20   # TFLite's ADD shifts int8 inputs left by 20 before rescaling
INT8_FIX = ("tessera imports int8 models: convert with full int8 quantization: "
            "converter.optimizations = [tf.lite.Optimize.DEFAULT], a representative_dataset, "
            "target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]")
RECURRENT = ("tessera lowers UNIDIRECTIONAL_SEQUENCE_LSTM and LSTMs unrolled into plain operators: convert "
             "with a unidirectional LSTM, or unroll it (Keras: unroll=True)")
HINTS = {
    "BIDIRECTIONAL_SEQUENCE_LSTM": RECURRENT, "LSTM": RECURRENT,
    "UNIDIRECTIONAL_SEQUENCE_RNN": RECURRENT, "SVDF": "SVDF (TFLite Micro's keyword models, int8 with an int16 "
    "state) is not lowered: replace it with its convolutions, or a model without SVDF",
}


def _tflite():
    try:
        import tflite
    except ImportError:
        raise FrontendError(None, "the `tflite` package is missing",
                            "run ./scons (it installs requirements.txt)") from None
    return tflite


def _f32(x):
    return np.float32(x)


# ---- reading the flatbuffer -----------------------------------------------

class _Model:
    def __init__(self, path):
        tfl = _tflite()
        self.tfl = tfl
        self.path = path
        try:
            with open(path, "rb") as f:
                self.buf = f.read()
        except OSError as err:
            raise FrontendError(path, f"cannot read ({err.strerror})") from None
        if len(self.buf) < 8 or self.buf[4:8] != b"TFL3":
            raise FrontendError(path, "not a TFLite flatbuffer (no TFL3 identifier)",
                                "give a .tflite file written by TensorFlow's converter")
        self.model = tfl.Model.GetRootAsModel(self.buf, 0)
        if self.model.SubgraphsLength() != 1:
            raise FrontendError(path, f"{self.model.SubgraphsLength()} subgraphs",
                                "tessera imports single-subgraph models (no control flow)")
        self.sg = self.model.Subgraphs(0)
        self.op_names = {v: k for k, v in vars(tfl.BuiltinOperator).items() if not k.startswith("_")}

    def opcode(self, op):
        oc = self.model.OperatorCodes(op.OpcodeIndex())
        code = max(oc.BuiltinCode(), oc.DeprecatedBuiltinCode())
        if code == self.tfl.BuiltinOperator.CUSTOM:
            return "CUSTOM:" + (oc.CustomCode() or b"").decode()
        return self.op_names.get(code, str(code))

    def tensor(self, i):
        return self.sg.Tensors(i)

    def shape(self, i):
        return [int(d) for d in self.tensor(i).ShapeAsNumpy()] if self.tensor(i).ShapeLength() else []

    def type(self, i):
        return self.tensor(i).Type()

    def name(self, i):
        return (self.tensor(i).Name() or b"").decode(errors="replace")

    def data(self, i):
        """The constant's array, or None for an activation."""
        t = self.tensor(i)
        b = self.model.Buffers(t.Buffer())
        if b is None or b.DataLength() == 0:
            return None
        dtype = {INT8: np.int8, INT32: np.int32, FLOAT32: np.float32, UINT8: np.uint8,
                 INT16: np.int16, 4: np.int64}.get(t.Type())
        if dtype is None:
            raise FrontendError(self.path, f"tensor {i} ({self.name(i)!r}): a constant of type "
                                f"{TYPE_NAMES.get(t.Type(), t.Type())}", INT8_FIX)
        raw = b.DataAsNumpy().tobytes()
        shape = self.shape(i)
        want = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        if len(raw) != want:
            raise FrontendError(self.path, f"tensor {i} ({self.name(i)!r}): its buffer holds {len(raw)} bytes, "
                                f"its shape {shape} of {np.dtype(dtype).name} needs {want}",
                                "a damaged model: re-convert it")
        return np.frombuffer(raw, dtype=dtype).reshape(shape)

    def quant(self, i):
        """(scales float32 array, zero points int array, quantized dimension) or None."""
        q = self.tensor(i).Quantization()
        if q is None or q.ScaleLength() == 0:
            return None
        zps = q.ZeroPointAsNumpy() if q.ZeroPointLength() else np.zeros(q.ScaleLength(), np.int64)
        scales, zps = np.asarray(q.ScaleAsNumpy(), np.float32), np.asarray(zps, np.int64)
        where = f"tensor {i} ({self.name(i)!r})"
        if zps.size != scales.size:
            raise FrontendError(self.path, f"{where}: {scales.size} scales but {zps.size} zero points",
                                "a damaged model: re-convert it")
        bad = ~np.isfinite(scales) | (scales <= 0)
        if bad.any():
            raise FrontendError(self.path, f"{where}: quantization scale {scales[np.argmax(bad)]}",
                                "a quantization scale must be a finite number above 0; re-convert the model")
        lo, hi = ZERO_POINT_RANGE.get(self.tensor(i).Type(), (-(1 << 31), (1 << 31) - 1))
        if zps.min() < lo or zps.max() > hi:
            z = zps[np.argmax((zps < lo) | (zps > hi))]
            raise FrontendError(self.path, f"{where}: zero point {z} outside its "
                                f"{TYPE_NAMES.get(self.tensor(i).Type(), 'type')} range [{lo}, {hi}]",
                                "a damaged model: re-convert it")
        return scales, zps, q.QuantizedDimension()

    def options(self, op, cls):
        o = getattr(self.tfl, cls)()
        table = op.BuiltinOptions()
        if table is None:
            return None
        o.Init(table.Bytes, table.Pos)
        return o


def hwc(shape):
    """TFLite activation shape (batch 1) -> [H, W, C], or None."""
    if len(shape) == 1:
        return [1, 1, shape[0]]     # a vector (a RESHAPE to [N])
    if not shape or shape[0] != 1:
        return None
    rest = shape[1:]
    if len(rest) == 3:
        return list(rest)
    if len(rest) == 2:
        return [1, rest[0], rest[1]]
    if len(rest) == 1:
        return [1, 1, rest[0]]
    if not rest:
        return [1, 1, 1]
    return None


def same_padding(size, kernel, stride):
    """TFLite's SAME padding (before, after) for one axis."""
    out = (size + stride - 1) // stride
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


class TfliteParser:
    def __init__(self, path, name, drop_final_softmax=False):
        self.drop_final_softmax = drop_final_softmax
        self.m = _Model(path)
        self.path = path
        self.b = Builder(name, "tflite", path)
        self.alias = {}          # TFLite tensor index -> IR tensor name
        self.pad_of = {}         # TFLite tensor index -> (IR tensor, [t, l, b, r]) for a folded PAD
        self.consumers = {}
        # data movement not yet emitted (frontend.movement): TFLite tensor ->
        # (source IR tensor, index array shaped like the TFLite tensor, the
        # operator that made it); and constants computed at import (shapes)
        self.views = {}
        self.consts = {}

    # ---- errors and small helpers ------------------------------------------

    def fail(self, i, opname, what, fix=None):
        where = f"operator {i} ({opname})" if i >= 0 else f"graph {opname}"   # i < 0: not an operator's
        raise FrontendError(self.path, f"{where}: {what}", fix)

    def scale_zp(self, t, i, opname):
        q = self.m.quant(t)
        if q is None:
            self.fail(i, opname, f"tensor {t} ({self.m.name(t)!r}) has no quantization parameters",
                      "convert with full int8 quantization (representative dataset)")
        scales, zps, _ = q
        return scales[0], int(zps[0])

    def stored_zp(self, t, i, opname):
        """Tensor t's zero point as tessera stores the values (uint8 shifted by 128)."""
        return self.scale_zp(t, i, opname)[1] - (128 if self.m.type(t) == UINT8 else 0)

    def act_tensor(self, t, i, opname):
        """The IR name of activation tensor t (int8 or uint8), registering
        it; a tensor that data movement made is emitted here (materialize)."""
        if t in self.alias:
            return self.alias[t]
        if t in self.views:
            return self.materialize(t, i, opname)
        if getattr(self, "folding", None) is not None and self.const(t) is not None:
            # an operator of constants lowered on its own (fold): the constant as an input
            shape = hwc(self.m.shape(t))
            scale, zp = self.scale_zp(t, i, opname)
            shift = 128 if self.m.type(t) == UINT8 else 0
            name = self.b.tensor(f"t{t}", shape, "uint8" if shift else "int8", scale, zp)
            self.folding[name] = (np.asarray(self.const(t)).astype(np.int64) - shift).reshape(shape)
            self.alias[t] = name
            return name
        typ = self.m.type(t)
        if typ not in (INT8, UINT8):
            what = {INT16: "int16 activations", FLOAT32: "a float tensor"}.get(
                typ, f"a {TYPE_NAMES.get(typ, typ)} tensor")
            self.fail(i, opname, f"{what} ({self.m.name(t)!r})", INT8_FIX)
        shape = hwc(self.m.shape(t))
        if shape is None:
            self.fail(i, opname, f"tensor shape {self.m.shape(t)} is not batch-1 NHWC")
        scale, zp = self.scale_zp(t, i, opname)
        name = self.b.tensor(f"t{t}", shape, "uint8" if typ == UINT8 else "int8", scale, zp)
        self.alias[t] = name
        return name

    def spatial_input(self, t, i, opname):
        """An input read as [H, W, C]: a RESHAPE alias must keep that shape."""
        name = self.act_tensor(t, i, opname)
        want = hwc(self.m.shape(t))
        if self.b.tensors[name].shape != want:
            self.fail(i, opname, f"reads a RESHAPE to {self.m.shape(t)} of a {self.b.tensors[name].shape} tensor",
                      "tessera keeps tensors HWC: only reshapes into FULLY_CONNECTED or of equal HWC shape are supported")
        return name

    def clamp(self, y_t, act, i, opname):
        """TFLite's CalculateActivationRangeQuantized for a fused activation
        (in the stored domain)."""
        scale, _ = self.scale_zp(y_t, i, opname)
        zp = self.stored_zp(y_t, i, opname)
        quantize = lambda f: zp + int(tfl_round(float(_f32(f) / _f32(scale))))  # noqa: E731
        lo, hi = -128, 127
        if act == ACT_RELU:
            lo = max(lo, quantize(0.0))
        elif act == ACT_RELU6:
            lo, hi = max(lo, quantize(0.0)), min(hi, quantize(6.0))
        elif act == ACT_RELU_N1_TO_1:
            lo, hi = max(lo, quantize(-1.0)), min(hi, quantize(1.0))
        elif act != ACT_NONE:
            names = {4: "TANH", 5: "SIGN_BIT"}
            self.fail(i, opname, f"fused activation {names.get(act, act)} is not supported",
                      "use NONE, RELU, RELU6 or RELU_N1_TO_1")
        return lo, hi

    def weights(self, t, i, opname, channel_dim, channels):
        w = self.m.data(t)
        if w is None:
            self.fail(i, opname, "weights are not a constant tensor", "freeze the weights into the model")
        typ = self.m.type(t)
        if typ not in (INT8, UINT8):
            self.fail(i, opname, f"{TYPE_NAMES.get(typ)} weights",
                      "tessera imports int8 weights (full int8 quantization) and TF1-style uint8 weights")
        q = self.m.quant(t)
        if q is None:
            self.fail(i, opname, "weights have no quantization parameters")
        scales, zps, dim = q
        offset = 0
        if typ == UINT8:
            # TF1-style asymmetric uint8 weights: w_u8 - zp spans 9 bits, stored as
            # w_u8 - 128 with the layer's weight offset 128 - zp (ir.Layer)
            if zps.size != 1:
                self.fail(i, opname, "uint8 weights with a zero point per channel", "per-tensor uint8 weights")
            w = (w.astype(np.int16) - 128).astype(np.int8)
            offset = 128 - int(zps[0])
        elif np.any(zps != 0):
            self.fail(i, opname, "asymmetric weights (zero point not 0)", "quantize weights symmetrically (TFLite does)")
        if scales.size not in (1, channels) or (scales.size > 1 and dim != channel_dim):
            self.fail(i, opname, f"weight scales along dimension {dim} ({scales.size} of them)",
                      "per-tensor or per-output-channel weight scales")
        return w, np.broadcast_to(scales, (channels,)), offset

    def bias(self, t, i, opname, channels):
        if t < 0:
            return None
        b = self.m.data(t)
        if b is None or self.m.type(t) != INT32 or b.size != channels:
            self.fail(i, opname, "bias is not a constant int32 vector per output channel")
        q = self.m.quant(t)
        if q is not None and np.any(q[1] != 0):
            # TFLite's int8 quantization spec; XNNPACK, the default delegate, refuses it
            self.fail(i, opname, f"bias zero point {int(q[1][np.argmax(q[1] != 0)])}",
                      "an int32 bias has zero point 0 (TFLite's quantization spec): re-convert the model")
        return b.reshape(-1).astype(np.int32)

    def delegate_range(self, ratios, i, opname):
        """A convolution's or fully connected layer's requantization scale
        (input scale x weight scale / output scale) below 256: the TFLite
        interpreter's default delegate (XNNPACK) refuses the model otherwise,
        though its reference kernels would run it. (Its low end is no
        bound: MLPerf Tiny's vww_96_int8 has a channel at 2.3e-10.)"""
        for c, r in enumerate(ratios):
            if not r < 256.0:
                self.fail(i, opname, f"requantization scale {r:.6g} (channel {c}) at or above 256, which the "
                          "TFLite interpreter's default delegate refuses", "re-convert the model")

    def requant(self, ratios, y, lo, hi, i, opname, rounding="tflite"):
        muls, shifts = [], []
        for r in ratios:
            m, s = quantize_multiplier(float(r))
            muls.append(m)
            shifts.append(s)
        return Requant(mul=muls, add=[0], shift=shifts, rounding=rounding,
                       zero_point=0 if y is None else self.b.stored_zero_point(y), lo=lo, hi=hi)

    # ---- operators ------------------------------------------------------------

    def parse(self):
        m = self.m
        sg = m.sg
        for i in range(sg.OperatorsLength()):
            for t in sg.Operators(i).InputsAsNumpy():
                self.consumers.setdefault(int(t), []).append(i)
        graph_outputs = {int(t) for t in sg.OutputsAsNumpy()}
        self.graph_outputs = graph_outputs
        self.tail = self.post_processing()
        self.handlers = handlers = self._handlers()
        self.unsupported_first()
        inputs = []
        for t in sg.InputsAsNumpy():
            t = int(t)
            cast = [c for c in self.consumers.get(t, []) if m.opcode(sg.Operators(c)) == "CAST"]
            if m.type(t) == UINT8 and m.quant(t) is None and cast:
                inputs.append(self.cast_input(t, cast))
                continue
            if m.type(t) == FLOAT32:
                # a float input quantized by the model's first QUANTIZE: the network starts after it
                ops = self.consumers.get(t, [])
                float_ops = [c for c in ops if m.opcode(sg.Operators(c)) != "QUANTIZE"]
                if float_ops:
                    c = float_ops[0]
                    self.fail(c, m.opcode(sg.Operators(c)), f"a float layer (input {m.name(t)!r} is float32): "
                              "the model is not quantized", INT8_FIX)
                if len(ops) != 1:
                    raise FrontendError(self.path, f"input {t} ({m.name(t)!r}) is float and not only quantized",
                                        "give an int8 model, or one whose float input goes into a single QUANTIZE")
                q_out = int(sg.Operators(ops[0]).OutputsAsNumpy()[0])
                inputs.append(self.act_tensor(q_out, ops[0], "QUANTIZE"))
                continue
            from .tflite_rnn import time_major_input   # imports this module
            inputs.append(time_major_input(self, t) or self.act_tensor(t, -1, "input"))
        self.b.inputs = inputs
        from .tflite_unrolled import emit_layer, recognise   # imports this module
        loops = recognise(self)
        consumed = {o: loop for loop in loops for o in loop["consumed"]}
        for i in range(sg.OperatorsLength()):
            op = sg.Operators(i)
            name = m.opcode(op)
            if i in consumed:
                # an unrolled recurrence: one layer, at its first operator
                if i == consumed[i]["first"]:
                    emit_layer(self, consumed[i])
                continue
            if i in self.tail or i in self.skip:
                continue
            handler = handlers.get(name)
            if name == "SOFTMAX" and self.drop_final_softmax:
                handler = self.final_softmax
            if handler is None:
                hint = HINTS.get(name, "supported: " + ", ".join(sorted(handlers)) + "; see docs/tflite.md")
                self.fail(i, name, "not supported by tessera's TFLite import", hint)
            ins, outs = [int(t) for t in op.InputsAsNumpy()], [int(t) for t in op.OutputsAsNumpy()]
            if handler.__func__ not in (TfliteParser.movement, TfliteParser.shape_of, TfliteParser.fill) \
                    and all(t < 0 or self.const(t) is not None for t in ins):
                self.fold(i, name, op, ins, outs, handler)
                continue
            handler(i, name, op, ins, outs)
        if self.drop_final_softmax and not getattr(self, "dropped_softmax", False):
            # asked for, but nothing to drop: say so rather than build the model unchanged
            raise FrontendError(self.path, "drop_final_softmax: the model has no SOFTMAX",
                                "drop the key from the model YAML")
        outputs = []
        ends = [int(t) for t in sg.OutputsAsNumpy() if self.producer_of(int(t)) not in self.tail]
        for i in sorted(self.tail):      # what the post-processing reads of the integer network
            for t in sg.Operators(i).InputsAsNumpy():
                t = int(t)
                if t >= 0 and self.producer_of(t) not in self.tail and self.const(t) is None \
                        and (t in self.alias or t in self.views) and t not in ends:
                    ends.append(t)
        notes = None
        if self.tail:
            notes = {"tflite_tail": [f"{i}:{m.opcode(sg.Operators(i))}" for i in sorted(self.tail)]}
        for t in ends:
            if t in self.views and t not in self.alias:
                mi, mop = self.views[t][2]
                self.act_tensor(t, mi, mop)     # an output made by data movement: emitted in TFLite's order
            if t not in self.alias:
                raise FrontendError(self.path, f"output {t} ({m.name(t)!r}) is not computed by an int8 layer")
            outputs.append(self.alias[t])
        self.b.outputs = outputs
        for name in inputs:
            if name in outputs:
                raise FrontendError(self.path, f"input {name} is also an output", "the model computes nothing")
        # the model's own shapes of its inputs and outputs (TFLite orders values as tessera's HWC)
        for t in [int(t) for t in sg.InputsAsNumpy()] + [int(t) for t in sg.OutputsAsNumpy()]:
            name = self.alias.get(t)
            if name is None and t in self.consumers:      # a float input quantized by the first QUANTIZE
                q = [c for c in self.consumers[t] if m.opcode(sg.Operators(c)) == "QUANTIZE"]
                name = self.alias.get(int(sg.Operators(q[0]).OutputsAsNumpy()[0])) if q else None
            if name is not None and self.b.tensors[name].source_shape is None:
                self.b.tensors[name].source_layout = "hwc"
                self.b.tensors[name].source_shape = [int(d) for d in m.shape(t)]
        self.b.check_order()
        graph, weights = self.b.finish()
        graph.notes = notes
        return graph, weights

    def _geometry(self, i, opname, o, x_shape, kh, kw, pad_in):
        """Kernel, stride, padding (TFLite's SAME on the dilated extent) and
        dilation (None when every tap is adjacent, as ir.Layer wants it)."""
        dil = [1, 1]
        if hasattr(o, "DilationHFactor"):
            dil = [o.DilationHFactor() if kh > 1 else 1, o.DilationWFactor() if kw > 1 else 1]
            if dil != [1, 1] and "dilation" not in {f.name for f in fields(Layer)}:
                self.fail(i, opname, f"dilation {dil[0]}x{dil[1]}",
                          "tessera's kernels have no dilated convolution: use dilation 1")
        eh, ew = dil[0] * (kh - 1) + 1, dil[1] * (kw - 1) + 1
        sh, sw = o.StrideH(), o.StrideW()
        if sh < 1 or sw < 1:
            self.fail(i, opname, f"stride {sh}x{sw}", "strides are 1 or more; re-convert the model")
        if o.Padding() == SAME:
            (t, bt), (l, r) = same_padding(x_shape[0], eh, sh), same_padding(x_shape[1], ew, sw)
        else:
            t = l = bt = r = 0
        if pad_in is not None:
            t, l, bt, r = t + pad_in[0], l + pad_in[1], bt + pad_in[2], r + pad_in[3]
        if max(t, bt) >= eh or max(l, r) >= ew:
            self.fail(i, opname, f"padding {[t, l, bt, r]} as large as the {eh}x{ew} window",
                      "tessera's kernels need padding smaller than the window")
        return {"kernel": [kh, kw], "stride": [sh, sw], "pad": [t, l, bt, r],
                "dilation": None if dil == [1, 1] else dil}

    def _conv_input(self, t, i, opname):
        if t in self.pad_of:
            x, pad = self.pad_of[t]
            return x, pad
        return self.spatial_input(t, i, opname), None

    def conv(self, i, opname, op, ins, outs):
        o = self.m.options(op, "Conv2DOptions")
        x, pad_in = self._conv_input(ins[0], i, opname)
        y = self.act_tensor(outs[0], i, opname)
        co, kh, kw, ci = self.m.shape(ins[1])
        if ci != self.b.tensors[x].shape[2]:
            self.fail(i, opname, f"{ci} weight input channels for a {self.b.tensors[x].shape[2]}-channel input",
                      "grouped CONV_2D is not supported")
        w, w_scales, w_off = self.weights(ins[1], i, opname, 0, co)
        geo = self._geometry(i, opname, o, self.b.tensors[x].shape, kh, kw, pad_in)
        self._conv_layer(i, opname, x, y, w, w_scales, ins, outs, geo, o.FusedActivationFunction(), co, w_off)

    def _conv_layer(self, i, opname, x, y, w, w_scales, ins, outs, geo, act, co, w_off=0):
        """w [Co, kh, kw, Ci]; TFLite's per-channel multipliers in double."""
        s_in, _ = self.scale_zp(ins[0], i, opname)
        s_out, _ = self.scale_zp(outs[0], i, opname)
        ratios = [float(s_in) * float(ws) / float(s_out) for ws in w_scales]
        lo, hi = self.clamp(outs[0], act, i, opname)
        self.delegate_range(ratios, i, opname)
        rq = self.requant(ratios, y, lo, hi, i, opname)
        kh, kw = geo["kernel"]
        if [kh, kw] == [1, 1] and geo["stride"] == [1, 1] and not any(geo["pad"]):
            op, wl = "pointwise", w.reshape(co, -1)
        else:
            op, wl = "conv2d", w
        self._check_shape(i, opname, x, y, geo, co)
        layer = Layer(name=self.b.layer_name(f"{opname.lower()}_{i}"), op=op, inputs=[x], output=y,
                      kernel=list(geo["kernel"]), stride=list(geo["stride"]), pad=list(geo["pad"]),
                      input_offset=-self.b.stored_zero_point(x), requant=rq, source=[f"{i}:{opname}"])
        if geo.get("dilation"):
            layer.dilation = geo["dilation"]
        layer.weight_offset = w_off or None
        self.b.add_layer(layer, {"weights": np.ascontiguousarray(wl, dtype=np.int8),
                                 "bias": self.bias(ins[2] if len(ins) > 2 else -1, i, opname, co)})

    def _check_shape(self, i, opname, x, y, geo, co):
        h, w, _ = self.b.tensors[x].shape
        dh, dw = geo.get("dilation") or [1, 1]
        kh, kw = dh * (geo["kernel"][0] - 1) + 1, dw * (geo["kernel"][1] - 1) + 1
        t, l, b, r = geo["pad"]
        sh, sw = geo["stride"]
        want = [(h + t + b - kh) // sh + 1, (w + l + r - kw) // sw + 1, co]
        if self.b.tensors[y].shape != want:
            self.fail(i, opname, f"output shape {self.b.tensors[y].shape}, the geometry gives {want}")

    def depthwise(self, i, opname, op, ins, outs):
        o = self.m.options(op, "DepthwiseConv2DOptions")
        x, pad_in = self._conv_input(ins[0], i, opname)
        y = self.act_tensor(outs[0], i, opname)
        _, kh, kw, co = self.m.shape(ins[1])
        ci = self.b.tensors[x].shape[2]
        if co % ci:
            self.fail(i, opname, f"{co} output channels for {ci} input channels")
        mult = co // ci
        w, w_scales, w_off = self.weights(ins[1], i, opname, 3, co)
        geo = self._geometry(i, opname, o, self.b.tensors[x].shape, kh, kw, pad_in)
        if mult > 1:
            # a depth multiplier m is a grouped convolution (output o reads input
            # o // m): a conv2d whose weights are zero off the group's channel
            # computes exactly that on the existing kernels
            # (with a weight offset, the weights that must count as zero hold -offset)
            wc = np.full((co, kh, kw, ci), -w_off, np.int8)
            for oc in range(co):
                wc[oc, :, :, oc // mult] = w[0, :, :, oc]
            self._conv_layer(i, opname, x, y, wc, w_scales, ins, outs, geo, o.FusedActivationFunction(), co, w_off)
            return
        s_in, _ = self.scale_zp(ins[0], i, opname)
        s_out, _ = self.scale_zp(outs[0], i, opname)
        ratios = [float(s_in) * float(ws) / float(s_out) for ws in w_scales]
        lo, hi = self.clamp(outs[0], o.FusedActivationFunction(), i, opname)
        self.delegate_range(ratios, i, opname)
        rq = self.requant(ratios, y, lo, hi, i, opname)
        self._check_shape(i, opname, x, y, geo, co)
        layer = Layer(name=self.b.layer_name(f"{opname.lower()}_{i}"), op="depthwise", inputs=[x], output=y,
                      kernel=[kh, kw], stride=list(geo["stride"]), pad=list(geo["pad"]),
                      input_offset=-self.b.stored_zero_point(x), requant=rq, source=[f"{i}:{opname}"])
        if geo.get("dilation"):
            layer.dilation = geo["dilation"]
        layer.weight_offset = w_off or None
        self.b.add_layer(layer, {"weights": np.ascontiguousarray(w[0], dtype=np.int8),
                                 "bias": self.bias(ins[2] if len(ins) > 2 else -1, i, opname, co)})

    def fully_connected(self, i, opname, op, ins, outs):
        o = self.m.options(op, "FullyConnectedOptions")
        if o is not None and o.WeightsFormat() != 0:
            self.fail(i, opname, "shuffled weights format", "use the DEFAULT weights format")
        x, order = self.flat_input(ins[0], i, opname)
        y = self.act_tensor(outs[0], i, opname)
        co, k = self.m.shape(ins[1])
        if k != self.b.tensors[x].size or self.b.tensors[y].size != co:
            self.fail(i, opname, f"weights [{co}, {k}] for an input of {self.b.tensors[x].size} values "
                      f"and an output of {self.b.tensors[y].size}", "batch 1 only")
        w, w_scales, w_off = self.weights(ins[1], i, opname, 0, co)
        if order is not None:
            # the input is a permutation of x's values: weight k moves to the value it reads
            permuted = np.empty_like(w)
            permuted[:, order] = w
            w = permuted
        s_in, _ = self.scale_zp(ins[0], i, opname)
        s_out, _ = self.scale_zp(outs[0], i, opname)
        q = self.m.quant(ins[1])
        if q[0].size == 1:
            # GetQuantizedConvolutionMultipler: the float32 product, then double
            ratios = [float(_f32(s_in) * _f32(q[0][0])) / float(s_out)]
        else:
            ratios = [float(s_in) * float(ws) / float(s_out) for ws in w_scales]
        lo, hi = self.clamp(outs[0], o.FusedActivationFunction() if o else ACT_NONE, i, opname)
        # the interpreter's reference FULLY_CONNECTED rounds once (half up on
        # acc * mul / 2^shift), unlike its convolutions: measured on the
        # MLPerf Tiny autoencoder, checked on every model by tflitecheck
        self.delegate_range(ratios, i, opname)
        rq = self.requant(ratios, y, lo, hi, i, opname, rounding="half_up")
        layer = Layer(name=self.b.layer_name(f"{opname.lower()}_{i}"), op="linear", inputs=[x], output=y,
                      input_offset=-self.b.stored_zero_point(x), requant=rq, source=[f"{i}:{opname}"],
                      weight_offset=w_off or None)
        self.b.add_layer(layer, {"weights": np.ascontiguousarray(w, dtype=np.int8),
                                 "bias": self.bias(ins[2] if len(ins) > 2 else -1, i, opname, co)})

    def _pool_geometry(self, i, opname, o, x):
        kh, kw = o.FilterHeight(), o.FilterWidth()
        geo = self._geometry(i, opname, o, self.b.tensors[x].shape, kh, kw, None)
        return geo

    def _same_quant(self, i, opname, a, b):
        sa, za = self.scale_zp(a, i, opname)
        sb, zb = self.scale_zp(b, i, opname)
        if za != zb or abs(float(sa) - float(sb)) > 1e-6:
            self.fail(i, opname, "input and output quantization differ", "TFLite requires them equal here")

    def avgpool(self, i, opname, op, ins, outs):
        o = self.m.options(op, "Pool2DOptions")
        x = self.spatial_input(ins[0], i, opname)
        y = self.act_tensor(outs[0], i, opname)
        self._same_quant(i, opname, ins[0], outs[0])
        geo = self._pool_geometry(i, opname, o, x)
        if any(geo["pad"]):
            self.fail(i, opname, f"SAME padding {geo['pad']} (TFLite divides border windows by fewer values)",
                      "use VALID padding or a size the stride divides")
        self._check_shape(i, opname, x, y, geo, self.b.tensors[x].shape[2])
        lo, hi = self.clamp(outs[0], o.FusedActivationFunction(), i, opname)
        n = geo["kernel"][0] * geo["kernel"][1]
        # TFLite divides the window's sum of raw values: uint8 values are stored less 128
        shift = self.b.tensors[x].shift
        rq = Requant(mul=[n], add=[0], shift=[0], rounding="tflite_div", zero_point=-shift, lo=lo, hi=hi)
        layer = Layer(name=self.b.layer_name(f"{opname.lower()}_{i}"), op="avgpool", inputs=[x], output=y,
                      kernel=list(geo["kernel"]), stride=list(geo["stride"]), input_offset=shift,
                      requant=rq, source=[f"{i}:{opname}"])
        self.b.add_layer(layer, {})

    def relu(self, i, opname, op, ins, outs):
        """A RELU that could not be fused: TFLite's ReluX rescales
        (x - zp_in) by s_in / s_out (two roundings) and clamps: a 1x1
        average pool, rounding "tflite"."""
        x = self.act_tensor(ins[0], i, opname)
        y = self.act_tensor(outs[0], i, opname)
        act = {"RELU": ACT_RELU, "RELU6": ACT_RELU6, "RELU_N1_TO_1": ACT_RELU_N1_TO_1}[opname]
        lo, hi = self.clamp(outs[0], act, i, opname)
        s_in, _ = self.scale_zp(ins[0], i, opname)
        s_out, _ = self.scale_zp(outs[0], i, opname)
        rq = self.requant([float(s_in) / float(s_out)], y, lo, hi, i, opname)
        layer = Layer(name=self.b.layer_name(f"{opname.lower()}_{i}"), op="avgpool", inputs=[x], output=y,
                      input_offset=-self.b.stored_zero_point(x), requant=rq, source=[f"{i}:{opname}"])
        self.b.add_layer(layer, {})

    def maxpool(self, i, opname, op, ins, outs):
        o = self.m.options(op, "Pool2DOptions")
        x = self.spatial_input(ins[0], i, opname)
        y = self.act_tensor(outs[0], i, opname)
        self._same_quant(i, opname, ins[0], outs[0])
        if self.clamp(outs[0], o.FusedActivationFunction(), i, opname) != (-128, 127):
            self.fail(i, opname, "a fused activation that clamps", "put the activation before the pooling")
        geo = self._pool_geometry(i, opname, o, x)
        self._check_shape(i, opname, x, y, geo, self.b.tensors[x].shape[2])
        self.b.tensors[y].scale = self.b.tensors[x].scale
        self.b.maxpool(f"{opname.lower()}_{i}", x, y, geo["kernel"], geo["stride"], geo["pad"],
                       f"{self.path}: operator {i} ({opname})", sources=[f"{i}:{opname}"])

    def _add_params(self, i, opname, op, ins, outs, options):
        """ADD's and SUB's arithmetic (add.cc / sub.cc Prepare: the float max
        doubled, the ratios in double): the inputs' stored zero points, their
        multipliers and shifts, and the output's requantization."""
        o = self.m.options(op, options)
        (s1, _), z1 = self.scale_zp(ins[0], i, opname), self.stored_zp(ins[0], i, opname)
        (s2, _), z2 = self.scale_zp(ins[1], i, opname), self.stored_zp(ins[1], i, opname)
        so, _ = self.scale_zp(outs[0], i, opname)
        twice_max = float(_f32(2) * max(_f32(s1), _f32(s2)))
        m1, sh1 = quantize_multiplier(float(s1) / twice_max)
        m2, sh2 = quantize_multiplier(float(s2) / twice_max)
        mo, sho = quantize_multiplier(twice_max / float(_f32(1 << ADD_LEFT_SHIFT) * _f32(so)))
        if min(sh1, sh2, sho) < 31:
            self.fail(i, opname, "a rescale factor of 1 or more", f"TFLite's {opname} needs multipliers below 1")
        lo, hi = self.clamp(outs[0], o.FusedActivationFunction() if o else ACT_NONE, i, opname)
        rq = Requant(mul=[mo], add=[0], shift=[sho], rounding="tflite",
                     zero_point=self.stored_zp(outs[0], i, opname), lo=lo, hi=hi)
        return (z1, z2), (m1, m2), (sh1, sh2), rq

    def add(self, i, opname, op, ins, outs):
        (z1, z2), (m1, m2), (sh1, sh2), rq = self._add_params(i, opname, op, ins, outs, "AddOptions")
        if self._constant_operand(ins) is not None:
            return self._binary_table(i, opname, ins, outs,
                                      lambda a, b: golden_ops.requantize(golden_ops.add(
                                          a, b, [m1, m2], [-z1, -z2], [sh1, sh2]), rq))
        a = self.spatial_input(ins[0], i, opname)
        b = self.spatial_input(ins[1], i, opname)
        y = self.act_tensor(outs[0], i, opname)
        if not (self.b.tensors[a].shape == self.b.tensors[b].shape == self.b.tensors[y].shape):
            self.fail(i, opname, f"broadcasting add of {self.m.shape(ins[0])} and {self.m.shape(ins[1])}",
                      "only same-shape adds (and adds of a constant) are supported")
        layer = Layer(name=self.b.layer_name(f"{opname.lower()}_{i}"), op="add", inputs=[a, b], output=y,
                      in_mul=[m1, m2], in_shift=[sh1, sh2], in_offset=[-z1, -z2], requant=rq,
                      source=[f"{i}:{opname}"])
        self.b.add_layer(layer, {})

    # ---- elementwise functions of one tensor as tables (the IR's lut) ---------

    def _constant_operand(self, ins):
        """The position of the constant among two operands, when one is."""
        c = [self.const(t) for t in ins[:2]]
        if (c[0] is None) == (c[1] is None):
            return None
        return 0 if c[0] is not None else 1

    def _stored_const(self, t):
        """A constant operand's stored values (uint8 less 128)."""
        v = np.asarray(self.const(t)).astype(np.int64)
        return v - (128 if self.m.type(t) == UINT8 else 0)

    def _varies_in_space(self, ins, k, i, opname):
        """A constant operand that is neither a scalar nor one value per channel."""
        const = self._stored_const(ins[k])
        c = self.b.tensors[self.spatial_input(ins[1 - k], i, opname)].shape[2]
        return not (const.size == 1 or (const.size == c and const.shape[-1] == c))

    def _mul_by_constant_tensor(self, i, opname, ins, outs, k, z_const, rq):
        """MUL of an activation by a constant that varies over the image
        (MoveNet's centre weighting, [48, 48, 1]): the activation viewed as
        one pixel of H*W*C channels times a 1x1 depthwise convolution whose
        weights are the constant broadcast to the activation's shape, held
        as stored with the weight offset -zp (acc = (a - zp_a) * (c - zp_c),
        the product TFLite's MUL requantizes, by the same multiplier)."""
        x_t = ins[1 - k]
        x = self.spatial_input(x_t, i, opname)
        full = list(self.m.shape(x_t))
        if list(self.m.shape(outs[0])) != full:
            self.fail(i, opname, f"a constant of shape {self.m.shape(ins[k])} that broadcasts a "
                      f"{full} activation to {self.m.shape(outs[0])}",
                      "tessera takes a constant operand that broadcasts to the activation's own shape")
        try:
            const = np.broadcast_to(self._stored_const(ins[k]), full).reshape(-1)
        except ValueError:
            self.fail(i, opname, f"a constant of shape {self.m.shape(ins[k])} against a {full} tensor")
        y = self.act_tensor(outs[0], i, opname)
        tx, ty = self.b.tensors[x], self.b.tensors[y]
        n = tx.size
        where = f"{self.path}: operator {i} ({opname})"
        # named after the output (one producer each): the input's own view may serve another operator
        flat = self.b.moved(x, np.arange(n), f"{y}_input_as_pixel", [1, 1, n], where, f"{opname.lower()}_{i}_in",
                            sources=[f"{i}:{opname}"])
        out = self.b.tensor(f"{y}_as_pixel", [1, 1, n], ty.source_dtype, ty.scale, ty.zero_point)
        offset = -int(z_const)
        layer = Layer(name=self.b.layer_name(f"{opname.lower()}_{i}"), op="depthwise", inputs=[flat], output=out,
                      kernel=[1, 1], stride=[1, 1], pad=[0, 0, 0, 0], input_offset=-self.b.stored_zero_point(x),
                      requant=rq, source=[f"{i}:{opname}"], weight_offset=offset or None)
        self.b.add_layer(layer, {"weights": np.ascontiguousarray(const.reshape(1, 1, n), dtype=np.int8),
                                 "bias": np.zeros(n, np.int32)})
        self.b.movement("reshape", f"reshape_{opname.lower()}_{i}_out", out, y, where, sources=[f"{i}:{opname}"])

    def _binary_table(self, i, opname, ins, outs, f):
        """An elementwise op of an activation and a constant (a scalar or one
        value per channel): a table of the activation, each of its 256 stored
        values run through f(a, b), the op's own arithmetic (the golden model's
        functions), per channel where the constant varies along channels."""
        k = self._constant_operand(ins)
        x_t = ins[1 - k]
        x = self.spatial_input(x_t, i, opname)
        c = self.b.tensors[x].shape[2]
        const = self._stored_const(ins[k])
        if const.size not in (1, c) or (const.size == c and const.shape[-1] != c):
            self.fail(i, opname, f"a constant of shape {list(const.shape)} against a {self.m.shape(x_t)} tensor",
                      "tessera takes a constant operand that is a scalar or one value per channel")
        grid = np.broadcast_to(np.arange(-128, 128, dtype=np.int64).reshape(1, 256, 1), (1, 256, c))
        cst = np.broadcast_to(const.reshape(1, 1, -1), (1, 1, c))
        out = f(grid, cst) if k == 1 else f(cst, grid)
        table = np.asarray(out).reshape(256, c).T
        self.emit_table(i, opname, x, outs[0], table if const.size > 1 else table[:1])

    def emit_table(self, i, opname, x, y_t, table):
        """A lut layer (table [1 or C, 256] of stored outputs); a table
        whose input is another table's output, read by nothing else, is
        composed into it (one pass instead of two, the same values)."""
        table = np.asarray(table, dtype=np.int64)
        if table.min() < -128 or table.max() > 127:
            self.fail(i, opname, "a table value outside int8 (a bug)")
        y = self.act_tensor(y_t, i, opname)
        producer = next((layer for layer in self.b.layers if layer.output == x), None)
        readers = [t for t, ir_name in self.alias.items() if ir_name == x]
        if (producer is not None and producer.op == "lut" and x not in self.b.outputs
                and all(len(self.consumers.get(t, [])) == 1 for t in readers)
                and not any(int(t) in self.graph_outputs for t in readers)):
            first = np.asarray(producer.table, dtype=np.int64).reshape(-1, 256)
            rows = max(len(first), len(table))
            first = np.broadcast_to(first, (rows, 256))
            table = np.broadcast_to(table, (rows, 256))
            composed = np.stack([table[r][first[r] + 128] for r in range(rows)])
            producer.table = [int(v) for v in composed.reshape(-1)]
            del self.b.tensors[producer.output]
            producer.output = y
            producer.source.append(f"{i}:{opname}")
            return
        self.b.lut(f"{opname.lower()}_{i}", x, y, table, sources=[f"{i}:{opname}"])

    def sub(self, i, opname, op, ins, outs):
        """SUB of a constant (MoveNet's input normalization): TFLite's SUB is
        ADD's arithmetic with the second input's rescaled value negated, as a
        table (sub.cc's PrepareGeneralSubOp: the same multipliers)."""
        if self._constant_operand(ins) is None:
            self.fail(i, opname, "a subtraction of two activations", "tessera takes SUB of a constant")
        (z1, z2), (m1, m2), (sh1, sh2), rq = self._add_params(i, opname, op, ins, outs, "SubOptions")

        def f(a, b):
            sa = golden_ops.tflite_multiply((a + (-z1)) << ADD_LEFT_SHIFT, m1, sh1)
            sb = golden_ops.tflite_multiply((b + (-z2)) << ADD_LEFT_SHIFT, m2, sh2)
            return golden_ops.requantize(sa - sb, rq)
        self._binary_table(i, opname, ins, outs, f)

    def arg_max(self, i, opname, op, ins, outs):
        """ARG_MAX over the channels (a segmentation map's classes) at the
        network's output: the IR argmax, the first largest value's index as
        int32 (the model's int64 or int32 output: the same values)."""
        axis = self.const(ins[1])
        if axis is None:
            self.fail(i, opname, "the axis is not a constant")
        src, idx = self.view(ins[0], i, opname)
        rank = idx.ndim
        a = int(np.asarray(axis).reshape(-1)[0]) % rank
        x = self.b.tensors[src]
        # the axis must be the source's channels, with H and W in their order
        moved = np.moveaxis(idx, a, -1)
        if list(moved.shape[-1:]) != [x.shape[2]] or not np.array_equal(moved.reshape(-1), np.arange(idx.size)):
            self.fail(i, opname, f"arg max over axis {a} of a {self.m.shape(ins[0])} tensor",
                      "tessera takes ARG_MAX over the channels")
        y = self.b.tensor(f"t{outs[0]}", x.shape[:2] + [1], "int32")
        self.alias[outs[0]] = y
        self.b.add_layer(Layer(name=self.b.layer_name(f"arg_max_{i}"), op="argmax", inputs=[src], output=y,
                               source=[f"{i}:{opname}"]), {})

    def resize_bilinear(self, i, opname, op, ins, outs):
        """RESIZE_BILINEAR (int8): reference_ops::ResizeBilinearInteger, raw
        values weighted in 10-bit fractions (scale rounded to 10 bits, half
        pixel centres or aligned corners), the sum rounded half away from
        zero at 2^20: the IR resize with the fractions doubled (11 bits) and
        TFLite's rounded division by 2^22."""
        o = self.m.options(op, "ResizeBilinearOptions")
        align, half = (bool(o.AlignCorners()), bool(o.HalfPixelCenters())) if o else (False, False)
        if self.m.type(ins[0]) != INT8:
            self.fail(i, opname, f"a {TYPE_NAMES.get(self.m.type(ins[0]))} bilinear resize (TFLite computes it in "
                      "float)", "convert the model with full int8 quantization: int8 RESIZE_BILINEAR is integer "
                      "arithmetic, which tessera takes")
        x = self.spatial_input(ins[0], i, opname)
        y = self.act_tensor(outs[0], i, opname)
        self._same_quant(i, opname, ins[0], outs[0])
        (h, w, _), (ho, wo, _) = self.b.tensors[x].shape, self.b.tensors[y].shape

        def axis(n_in, n_out):
            scale = ((1 << 10) * n_in + n_out // 2) // n_out
            if align and n_out > 1:
                scale = ((1 << 10) * (n_in - 1) + (n_out - 1) // 2) // (n_out - 1)
            out = []
            for v in range(n_out):
                s = v * scale + scale // 2 - (1 << 9) if half else v * scale
                lo = max(int(s / (1 << 10)), 0)            # C division, toward zero
                hi = min(int((s + (1 << 10) - 1) / (1 << 10)), n_in - 1)
                out += [lo, hi, 2 * (s - (1 << 10) * lo)]
            return out
        table = axis(h, ho) + axis(w, wo)
        rq = Requant(mul=[1 << 22], add=[0], shift=[0], rounding="tflite_div", zero_point=0, lo=-128, hi=127)
        layer = Layer(name=self.b.layer_name(f"resize_bilinear_{i}"), op="resize", inputs=[x], output=y,
                      input_offset=0, requant=rq, mode="bilinear", table=table, source=[f"{i}:{opname}"])
        self.b.add_layer(layer, {})

    def leaky_relu(self, i, opname, op, ins, outs):
        """LEAKY_RELU: reference_ops::QuantizeLeakyRelu, x - zp_in rescaled by
        s_in / s_out (x >= 0) or s_in * alpha / s_out (both in float32, then
        QuantizeMultiplier), as a table."""
        alpha = self.m.options(op, "LeakyReluOptions").Alpha()
        s_in, _ = self.scale_zp(ins[0], i, opname)
        s_out, _ = self.scale_zp(outs[0], i, opname)
        z_in, z_out = self.stored_zp(ins[0], i, opname), self.stored_zp(outs[0], i, opname)
        m_a, sh_a = quantize_multiplier(abs(float(_f32(s_in) * _f32(alpha) / _f32(s_out))))
        m_i, sh_i = quantize_multiplier(float(_f32(s_in) / _f32(s_out)))
        v = np.arange(-128, 128, dtype=np.int64) - z_in
        pos = golden_ops.tflite_multiply(v, m_i, sh_i)
        neg = golden_ops.tflite_multiply(v, m_a, sh_a) * (-1 if alpha < 0 else 1)
        table = np.clip(np.where(v >= 0, pos, neg) + z_out, -128, 127)
        self.emit_table(i, opname, self.act_tensor(ins[0], i, opname), outs[0], table.reshape(1, 256))

    def extremum(self, i, opname, op, ins, outs):
        """MAXIMUM and MINIMUM compare raw values (TFLite does not rescale):
        of an activation and a constant (a clip), a table; of a table's
        input and output (MUL by a slope, then MAXIMUM: a PReLU), the
        table itself takes the extremum."""
        f = np.maximum if opname == "MAXIMUM" else np.minimum
        shift = lambda t: 128 if self.m.type(t) == UINT8 else 0  # noqa: E731
        if self._constant_operand(ins) is not None:
            # raw values compared (a and b are the stored operands, in order)
            return self._binary_table(i, opname, ins, outs,
                                      lambda a, b: f(a + shift(ins[0]), b + shift(ins[1])) - shift(outs[0]))
        a, b = (self.act_tensor(t, i, opname) for t in ins[:2])
        for (p_t, p), (q_t, q) in (((ins[0], a), (ins[1], b)), ((ins[1], b), (ins[0], a))):
            producer = next((layer for layer in self.b.layers if layer.output == p), None)
            if producer is None or producer.op != "lut" or producer.inputs[0] != q \
                    or len(self.consumers.get(p_t, [])) != 1 or p_t in self.graph_outputs:
                continue
            table = np.asarray(producer.table, dtype=np.int64).reshape(-1, 256)
            mine = f(table + shift(p_t), np.arange(-128, 128) + shift(q_t)) - shift(outs[0])
            y = self.act_tensor(outs[0], i, opname)
            producer.table = [int(v) for v in mine.reshape(-1)]
            del self.b.tensors[producer.output]
            producer.output = y
            producer.source.append(f"{i}:{opname}")
            return
        self.fail(i, opname, f"{opname.lower()} of two independent tensors",
                  "tessera takes a MAXIMUM/MINIMUM with a constant, or of a tensor and a table of it (PReLU)")

    def resize_nearest(self, i, opname, op, ins, outs):
        """RESIZE_NEAREST_NEIGHBOR: reference_ops's GetNearestNeighbor per
        output row and column (float32 scale, floor or, with align_corners,
        round half away), the IR resize with a nearest table: a copy of
        values (input and output share their quantization)."""
        o = self.m.options(op, "ResizeNearestNeighborOptions")
        align, half = (bool(o.AlignCorners()), bool(o.HalfPixelCenters())) if o else (False, False)
        x = self.spatial_input(ins[0], i, opname)
        y = self.act_tensor(outs[0], i, opname)
        self._same_quant(i, opname, ins[0], outs[0])
        (h, w, _), (ho, wo, _) = self.b.tensors[x].shape, self.b.tensors[y].shape

        def nearest(n_in, n_out):
            scale = (_f32(n_in - 1) / _f32(n_out - 1)) if (align and n_out > 1) else _f32(n_in) / _f32(n_out)
            offset = _f32(0.5) if half else _f32(0.0)
            out = []
            for v in range(n_out):
                f = _f32(_f32(v) + offset) * scale
                k = int(tfl_round(float(f))) if align else int(math.floor(float(f)))
                k = min(k, n_in - 1)
                out.append(max(0, k) if half else k)
            return out
        table = [v for r in nearest(h, ho) for v in (r, r, 0)] + [v for c in nearest(w, wo) for v in (c, c, 0)]
        self.b.resize(f"resize_nearest_{i}", x, y, table, "nearest", f"{self.path}: operator {i} ({opname})",
                      sources=[f"{i}:{opname}"])

    def pad(self, i, opname, op, ins, outs):
        x = self.spatial_input(ins[0], i, opname)
        p = self.const(ins[1])
        if p is None or list(p.shape) != [4, 2] or np.any(p[0]) or (np.any(p[3]) and np.any(p[1:3])):
            self.fail(i, opname, "padding other than constant padding of H and W, or of channels, of a 4-D tensor")
        self._same_quant(i, opname, ins[0], outs[0])
        _, zp = self.scale_zp(outs[0], i, opname)
        value = zp
        if len(ins) > 2 and ins[2] >= 0:
            value = int(self.m.data(ins[2]).reshape(-1)[0])
        if np.any(p[3]):
            # channels padded (MediaPipe's residual adds of more channels): a gather
            # whose indices -1 give the pad value
            c = self.b.tensors[x].shape[2]
            table = [-1] * int(p[3][0]) + list(range(c)) + [-1] * int(p[3][1])
            y = self.act_tensor(outs[0], i, opname)
            self.b.movement("gather", f"pad_{i}", x, y, f"{self.path}: operator {i} ({opname})", axis=2,
                            table=table, fill=value - self.b.tensors[x].shift, sources=[f"{i}:{opname}"])
            return
        pad = [int(p[1][0]), int(p[2][0]), int(p[1][1]), int(p[2][1])]
        users = [self.m.opcode(self.m.sg.Operators(c)) for c in self.consumers.get(outs[0], [])]
        if (value == zp and users and outs[0] not in self.graph_outputs
                and all(u in ("CONV_2D", "DEPTHWISE_CONV_2D") for u in users)):
            # padding with the zero point is what a convolution's own padding
            # adds (0 to the offset input): fold it into the readers
            self.pad_of[outs[0]] = (x, pad)
            return
        y = self.act_tensor(outs[0], i, opname)
        self.b.pad_int(f"pad_{i}", x, y, pad, value, "half_up", f"{self.path}: operator {i} ({opname})",
                       sources=[f"{i}:{opname}"])

    # ---- operators on the IR ops of issue 10 (lut, mul, concat) --------------

    def _needs(self, i, opname, irop):
        if irop not in ir.OPS:
            self.fail(i, opname, f"needs the IR's `{irop}` operator, which this tessera does not have yet",
                      "see docs/tflite.md")

    def lut(self, i, opname, op, ins, outs):
        """LOGISTIC, TANH and HARD_SWISH: int8 -> int8 tables of TFLite's recipes."""
        from .tflite_luts import hard_swish_table, logistic_table, tanh_table
        self._needs(i, opname, "lut")
        x = self.act_tensor(ins[0], i, opname)
        y = self.act_tensor(outs[0], i, opname)
        s_in, z_in = self.scale_zp(ins[0], i, opname)[0], self.stored_zp(ins[0], i, opname)
        s_out, z_out = self.scale_zp(outs[0], i, opname)[0], self.stored_zp(outs[0], i, opname)
        make = {"LOGISTIC": logistic_table, "TANH": tanh_table, "HARD_SWISH": hard_swish_table}[opname]
        try:
            table = make(s_in, z_in, s_out, z_out)
        except ValueError as err:
            self.fail(i, opname, str(err))
        layer = Layer(name=self.b.layer_name(f"{opname.lower()}_{i}"), op="lut", inputs=[x], output=y,
                      table=table, source=[f"{i}:{opname}"])
        self.b.add_layer(layer, {})

    def mul(self, i, opname, op, ins, outs):
        """MUL: (a - zp_a) * (b - zp_b), requantized as TFLite's mul.cc
        (multiplier s_a * s_b / s_y in double, two roundings); size-1 axes broadcast."""
        self._needs(i, opname, "mul")
        o = self.m.options(op, "MulOptions")
        (sa, _), za = self.scale_zp(ins[0], i, opname), self.stored_zp(ins[0], i, opname)
        (sb, _), zb = self.scale_zp(ins[1], i, opname), self.stored_zp(ins[1], i, opname)
        so, _ = self.scale_zp(outs[0], i, opname)
        lo, hi = self.clamp(outs[0], o.FusedActivationFunction() if o else ACT_NONE, i, opname)
        rq = self.requant([float(sa) * float(sb) / float(so)], None, lo, hi, i, opname)
        rq.zero_point = self.stored_zp(outs[0], i, opname)
        k = self._constant_operand(ins)
        if k is not None and self._varies_in_space(ins, k, i, opname):
            return self._mul_by_constant_tensor(i, opname, ins, outs, k, [za, zb][k], rq)
        if k is not None:
            return self._binary_table(i, opname, ins, outs, lambda a, b: golden_ops.requantize(
                golden_ops.mul(a, b, [-za, -zb]), rq))
        a = self.spatial_input(ins[0], i, opname)
        b = self.spatial_input(ins[1], i, opname)
        y = self.act_tensor(outs[0], i, opname)
        layer = Layer(name=self.b.layer_name(f"mul_{i}"), op="mul", inputs=[a, b], output=y,
                      in_offset=[-za, -zb], requant=rq, source=[f"{i}:{opname}"])
        self.b.add_layer(layer, {})

    def concat(self, i, opname, op, ins, outs):
        """CONCATENATION of int8 tensors sharing the output's quantization (as
        TFLite requires for int8): a copy."""
        self._needs(i, opname, "concat")
        o = self.m.options(op, "ConcatenationOptions")
        xs = [self.spatial_input(t, i, opname) for t in ins]
        y = self.act_tensor(outs[0], i, opname)
        for t in ins:
            self._same_quant(i, opname, t, outs[0])
        rank = len(self.m.shape(outs[0]))
        axis = o.Axis() + rank if o.Axis() < 0 else o.Axis()
        hwc_axis = axis - (rank - 3)
        if rank != 4 or not 0 <= hwc_axis <= 2:
            self.fail(i, opname, f"concatenation along axis {o.Axis()} of a rank-{rank} tensor",
                      "concatenate NHWC tensors along H, W or C")
        lo, hi = self.clamp(outs[0], o.FusedActivationFunction(), i, opname)
        rq = Requant(mul=[1], add=[0], shift=[0], rounding="half_up", zero_point=0, lo=lo, hi=hi)
        layer = Layer(name=self.b.layer_name(f"concatenation_{i}"), op="concat", inputs=xs, output=y,
                      axis=hwc_axis, in_mul=[1] * len(xs), in_offset=[0] * len(xs), requant=rq,
                      source=[f"{i}:{opname}"])
        self.b.add_layer(layer, {})

    def softmax(self, i, opname, op, ins, outs):
        """SOFTMAX over the channels: the IR softmax with rounding "tflite"
        (reference_ops::Softmax's fixed point, golden/gemmlowp.py) on the
        table of exponentials of max - x."""
        from .tflite_luts import softmax_exp_table
        self._needs(i, opname, "softmax")
        o = self.m.options(op, "SoftmaxOptions")
        x = self.act_tensor(ins[0], i, opname)
        y = self.act_tensor(outs[0], i, opname)
        s_in, _ = self.scale_zp(ins[0], i, opname)
        s_out, z_out = self.scale_zp(outs[0], i, opname)[0], self.stored_zp(outs[0], i, opname)
        if z_out != -128 or float(s_out) != 1 / 256:
            self.fail(i, opname, f"output scale {float(s_out)} and zero point {z_out}",
                      "TFLite's int8 SOFTMAX outputs scale 1/256, zero point -128")
        channels = self.b.tensors[x].shape[2]
        if channels >= 4096:
            # the reference kernel's Q12.19 sum leaves room for 4095 values
            self.fail(i, opname, f"a softmax over {channels} values", "at most 4095")
        try:
            table = softmax_exp_table(o.Beta() if o else 1.0, s_in)
        except ValueError as err:
            self.fail(i, opname, str(err))
        rq = Requant(mul=[0], add=[0], shift=[0], rounding="tflite", zero_point=-128, lo=-128, hi=127)
        layer = Layer(name=self.b.layer_name(f"softmax_{i}"), op="softmax", inputs=[x], output=y,
                      table=table, requant=rq, source=[f"{i}:{opname}"])
        self.b.add_layer(layer, {})

    def lstm(self, i, opname, op, ins, outs):
        """UNIDIRECTIONAL_SEQUENCE_LSTM: one recurrent layer (frontend.tflite_rnn)."""
        from .tflite_rnn import lstm   # imports this module
        self._needs(i, opname, "lstm")
        lstm(self, i, opname, op, ins, outs)

    def final_softmax(self, i, opname, op, ins, outs):
        """drop_final_softmax: the network ends at the SOFTMAX's input (the
        logits; their argmax is the softmax's), which stays the output."""
        if outs[0] not in self.graph_outputs or self.consumers.get(outs[0]):
            self.fail(i, opname, "drop_final_softmax drops only a SOFTMAX that is the model's output")
        self.alias[outs[0]] = self.act_tensor(ins[0], i, opname)
        self.dropped_softmax = True

    def _handlers(self):
        return {
            "CONV_2D": self.conv, "DEPTHWISE_CONV_2D": self.depthwise, "FULLY_CONNECTED": self.fully_connected,
            "AVERAGE_POOL_2D": self.avgpool, "MAX_POOL_2D": self.maxpool, "ADD": self.add, "PAD": self.pad,
            "PADV2": self.pad, "QUANTIZE": self.quantize, "DEQUANTIZE": self.dequantize,
            "LOGISTIC": self.lut, "HARD_SWISH": self.lut, "TANH": self.lut, "MUL": self.mul, "CONCATENATION": self.concat,
            "MEAN": self.mean, "RELU": self.relu, "RELU6": self.relu, "RELU_N1_TO_1": self.relu,
            "SOFTMAX": self.softmax,
            # data movement and shape arithmetic (frontend.movement)
            "RESHAPE": self.movement, "SQUEEZE": self.movement, "EXPAND_DIMS": self.movement,
            "TRANSPOSE": self.movement, "GATHER": self.movement, "SPLIT": self.movement,
            "SPLIT_V": self.movement, "STRIDED_SLICE": self.movement, "SLICE": self.movement,
            "PACK": self.movement, "UNPACK": self.movement, "TILE": self.movement, "SHAPE": self.shape_of,
            "LEAKY_RELU": self.leaky_relu, "MAXIMUM": self.extremum, "MINIMUM": self.extremum,
            "RESIZE_NEAREST_NEIGHBOR": self.resize_nearest, "RESIZE_BILINEAR": self.resize_bilinear,
            "ARG_MAX": self.arg_max, "SUB": self.sub, "FILL": self.fill, "CAST": self.cast,
            "UNIDIRECTIONAL_SEQUENCE_LSTM": self.lstm,
        }

    def unsupported_scan(self):
        """unsupported_first on its own (nothing lowered)."""
        self.tail = set()
        self.handlers = self._handlers()
        self.unsupported_first()

    def unsupported_first(self):
        """An operator tessera has no lowering for is named before anything
        it would trip over first (an SVDF model's int16 input)."""
        sg = self.m.sg
        for i in range(sg.OperatorsLength()):
            name = self.m.opcode(sg.Operators(i))
            if i not in self.tail and name not in self.handlers and name not in ("SOFTMAX",):
                hint = HINTS.get(name, "supported: " + ", ".join(sorted(self.handlers)) + "; see docs/tflite.md")
                self.fail(i, name, "not supported by tessera's TFLite import", hint)

    # ---- where the integer network starts and ends ------------------------------

    def producer_of(self, t):
        if not hasattr(self, "_producer"):
            sg = self.m.sg
            self._producer = {int(o): i for i in range(sg.OperatorsLength()) for o in sg.Operators(i).OutputsAsNumpy()}
        return self._producer.get(t)

    def post_processing(self):
        """The operators after the integer network (a pose or detection
        model's decoding: ARG_MAX whose index is computed with, DEQUANTIZE
        into float arithmetic, CAST, and everything that reads their
        results): left to the application, as ONNX's float tails are. The
        firmware's outputs are then what they read of the integer network."""
        m, sg = self.m, self.m.sg
        self.skip = set()
        tail, derived = set(), set()
        for i in range(sg.OperatorsLength()):
            op = sg.Operators(i)
            name = m.opcode(op)
            ins = [int(t) for t in op.InputsAsNumpy() if t >= 0]
            outs = [int(t) for t in op.OutputsAsNumpy()]
            feeds_on = any(self.consumers.get(t) for t in outs)
            starts = (name in ("DEQUANTIZE", "ARG_MAX", "CAST") and feeds_on
                      and not (name == "CAST" and all(t in [int(x) for x in sg.InputsAsNumpy()] for t in ins)))
            if starts or any(t in derived for t in ins):
                tail.add(i)
                derived.update(outs)
        return tail

    def cast(self, i, opname, op, ins, outs):
        """A CAST the network computes with (not of a raw input, nor in the
        post-processing): no integer meaning tessera can give it."""
        self.fail(i, opname, f"a cast to {TYPE_NAMES.get(self.m.type(outs[0]))} inside the network",
                  "tessera takes a CAST of a raw uint8 input before its QUANTIZE")

    def cast_input(self, t, casts):
        """A uint8 graph input without quantization (raw pixels) read by
        CAST to float and QUANTIZE: the input is the uint8 values (scale 1,
        zero point 0), and CAST + QUANTIZE a table of them."""
        m, sg = self.m, self.m.sg
        if len(casts) != 1 or len(self.consumers.get(t, [])) != 1:
            self.fail(casts[0], "CAST", f"input {m.name(t)!r} is read by other ops than one CAST")
        c = casts[0]
        f = int(sg.Operators(c).OutputsAsNumpy()[0])
        qs = self.consumers.get(f, [])
        if len(qs) != 1 or m.opcode(sg.Operators(qs[0])) != "QUANTIZE":
            self.fail(c, "CAST", "a cast input not quantized right after", INT8_FIX)
        q = qs[0]
        y_t = int(sg.Operators(q).OutputsAsNumpy()[0])
        shape = hwc(m.shape(t))
        x = self.b.tensor(f"t{t}", shape, "uint8", 1.0, 0)
        self.alias[t] = x
        s, zp = self.scale_zp(y_t, q, "QUANTIZE")
        lo, hi = ZERO_POINT_RANGE[m.type(y_t)]
        # QUANTIZE's float arithmetic: round(x / s) half away from zero, plus the zero point
        vals = np.arange(256, dtype=np.float32) / _f32(s)
        raw = np.clip(np.array([tfl_round(float(v)) for v in vals], dtype=np.int64) + zp, lo, hi)
        table = raw - (128 if m.type(y_t) == UINT8 else 0)
        self.skip.update({c, q})
        self.emit_table(q, "QUANTIZE", x, y_t, table.reshape(1, 256))
        return x

    # ---- data movement (frontend.movement) ---------------------------------

    def const(self, t):
        """A constant's array (the flatbuffer's, or one computed at import), or None."""
        if t < 0:
            return None
        if t in self.consts:
            return self.consts[t]
        return self.m.data(t)

    def view(self, t, i, opname):
        """(source IR tensor, index array shaped like TFLite tensor t)."""
        if t in self.views:
            return self.views[t][:2]
        src = self.act_tensor(t, i, opname)
        shape = self.m.shape(t)
        if int(np.prod(shape, dtype=np.int64)) != self.b.tensors[src].size:
            self.fail(i, opname, f"tensor {t} has shape {shape}, its values {self.b.tensors[src].shape}")
        return src, movement.identity(shape)

    def shape_of(self, i, opname, op, ins, outs):
        """SHAPE of a tensor of fixed shape: a constant (a dynamic flatten's
        SHAPE -> STRIDED_SLICE -> PACK -> RESHAPE folds at import)."""
        dtype = np.int64 if self.m.type(outs[0]) == 4 else np.int32
        self.consts[outs[0]] = np.asarray(self.m.shape(ins[0]), dtype=dtype)

    def fold(self, i, opname, op, ins, outs, handler):
        """An operator of constants only (an LSTM's fully connected layer of
        its zero initial state): lowered as usual in a network of its own,
        run by the golden model, its outputs constants of this one."""
        from .. import golden
        sub = TfliteParser.__new__(TfliteParser)
        sub.__dict__.update(self.__dict__)
        sub.b = Builder("constant", "tflite", self.path)
        sub.alias, sub.views, sub.pad_of = {}, {}, {}
        values = sub.folding = {}      # act_tensor gives the constants it is asked for (their values here)
        getattr(sub, handler.__name__)(i, opname, op, ins, outs)
        if sub.b.layers:
            graph, weights = sub.b.finish()
            for layer in graph.layers:
                values[layer.output] = golden.run_layer(layer, graph, weights, values)
        for t in outs:
            name = sub.alias.get(t)
            if name is None:
                self.fail(i, opname, "an operator of constants whose output tessera cannot compute")
            shift = 128 if self.m.type(t) == UINT8 else 0
            self.consts[t] = (values[name].astype(np.int64) + shift).reshape(self.m.shape(t))

    def fill(self, i, opname, op, ins, outs):
        """FILL of constant dims with a constant value (an LSTM's zero initial
        state): a constant."""
        dims, value = self.const(ins[0]), self.const(ins[1])
        if dims is None or value is None:
            self.fail(i, opname, "dims or value are not constants", "freeze the model's shapes")
        self.consts[outs[0]] = np.full([int(d) for d in np.asarray(dims).reshape(-1)],
                                       np.asarray(value).reshape(-1)[0])

    def _movement_fn(self, i, opname, op, ins, outs):
        """The operator as a function of its first input's array (values or
        indices), returning one array per output."""
        m = self.m
        shape = lambda t: m.shape(t)  # noqa: E731
        if opname in ("RESHAPE", "SQUEEZE", "EXPAND_DIMS"):
            # the flatbuffer's output shape is the interpreter's (frontend.tflite_gate checks it)
            return lambda a: [a.reshape(shape(outs[0]))]
        if opname == "TRANSPOSE":
            perm = self.const(ins[1])
            if perm is None:
                self.fail(i, opname, "the permutation is not a constant", "freeze the model's shapes")
            return lambda a: [np.transpose(a, [int(p) for p in perm.reshape(-1)])]
        if opname == "GATHER":
            o = m.options(op, "GatherOptions")
            idx = self.const(ins[1])
            if idx is None:
                self.fail(i, opname, "gathers at indices computed by the network", "only constant indices")
            axis = o.Axis() if o else 0
            if o is not None and o.BatchDims():
                self.fail(i, opname, f"batch_dims {o.BatchDims()}", "a GATHER without batch dimensions")
            return lambda a: [np.take(a, np.asarray(idx, dtype=np.int64), axis=axis % a.ndim)]
        if opname in ("SPLIT", "SPLIT_V"):
            if opname == "SPLIT":
                axis_t, x_t = ins[0], ins[1]
                n = m.options(op, "SplitOptions").NumSplits()
                sizes = None
            else:
                x_t, sizes_t, axis_t = ins[0], ins[1], ins[2]
                sizes = self.const(sizes_t)
            axis = self.const(axis_t)
            if axis is None or (opname == "SPLIT_V" and sizes is None):
                self.fail(i, opname, "the axis or sizes are not constants", "freeze the model's shapes")
            axis = int(axis.reshape(-1)[0])
            full = shape(x_t)[axis]
            if sizes is None:
                sizes = [full // n] * n
            sizes = [int(v) for v in np.asarray(sizes).reshape(-1)]
            if -1 in sizes:
                sizes[sizes.index(-1)] = full - (sum(sizes) + 1)
            return lambda a: movement.split(a, axis % a.ndim, sizes)
        if opname == "STRIDED_SLICE":
            o = m.options(op, "StridedSliceOptions")
            begin, end, strides = (self.const(t) for t in ins[1:4])
            if begin is None or end is None or strides is None:
                self.fail(i, opname, "begin, end or strides are not constants", "freeze the model's shapes")
            if o.EllipsisMask() or o.NewAxisMask() or (hasattr(o, "Offset") and o.Offset()):
                self.fail(i, opname, "an ellipsis, new-axis or offset strided slice",
                          "slices with begin, end and strides only")
            return lambda a: [movement.strided_slice(a, begin.reshape(-1), end.reshape(-1), strides.reshape(-1),
                                                     o.BeginMask(), o.EndMask(), o.ShrinkAxisMask())]
        if opname == "SLICE":
            begin, size = self.const(ins[1]), self.const(ins[2])
            if begin is None or size is None:
                self.fail(i, opname, "begin or size are not constants", "freeze the model's shapes")

            def slice_(a):
                index = tuple(slice(int(b), None if int(n) < 0 else int(b) + int(n))
                              for b, n in zip(begin.reshape(-1), size.reshape(-1)))
                return [a[index]]
            return slice_
        if opname == "TILE":
            multiples = self.const(ins[1])
            if multiples is None:
                self.fail(i, opname, "the multiples are not a constant", "freeze the model's shapes")
            return lambda a: [np.tile(a, [int(k) for k in np.asarray(multiples).reshape(-1)])]
        if opname == "UNPACK":
            o = m.options(op, "UnpackOptions")
            return lambda a: [np.take(a, k, axis=o.Axis() % a.ndim) for k in range(a.shape[o.Axis() % a.ndim])]
        raise AssertionError(opname)

    def movement(self, i, opname, op, ins, outs):
        """A data-movement operator: on constants it computes the constant
        (shape arithmetic); on an activation it composes the index arrays
        and emits nothing until a layer reads the result (materialize)."""
        if opname == "PACK":
            return self.pack(i, opname, op, ins, outs)
        x_t = ins[1] if opname == "SPLIT" else ins[0]
        fn = self._movement_fn(i, opname, op, ins, outs)
        value = self.const(x_t)
        if value is not None:
            for t, v in zip(outs, fn(np.asarray(value))):
                self.consts[t] = v
            return
        src, idx = self.view(x_t, i, opname)
        results = fn(idx)
        for t, v in zip(outs, results):
            self._check_moved(i, opname, x_t, t, v)
            self.views[t] = (src, v, (i, opname))

    def pack(self, i, opname, op, ins, outs):
        """PACK of constants (shape arithmetic) or of pieces of one tensor."""
        o = self.m.options(op, "PackOptions")
        values = [self.const(t) for t in ins]
        if all(v is not None for v in values):
            self.consts[outs[0]] = np.stack([np.asarray(v) for v in values], axis=o.Axis())
            return
        views = [self.view(t, i, opname) for t in ins]
        if len({src for src, _ in views}) != 1:
            self.fail(i, opname, "packs different tensors", "tessera packs pieces of one tensor only")
        stacked = np.stack([idx for _, idx in views], axis=o.Axis())
        self._check_moved(i, opname, ins[0], outs[0], stacked)
        self.views[outs[0]] = (views[0][0], stacked, (i, opname))

    def _check_moved(self, i, opname, x_t, y_t, idx):
        if list(idx.shape) != self.m.shape(y_t):
            self.fail(i, opname, f"output shape {self.m.shape(y_t)}, the operator gives {list(idx.shape)}")
        if self.m.type(y_t) != self.m.type(x_t):
            self.fail(i, opname, f"changes the type ({TYPE_NAMES.get(self.m.type(x_t))} to "
                      f"{TYPE_NAMES.get(self.m.type(y_t))})")
        q_in, q_out = self.m.quant(x_t), self.m.quant(y_t)
        if q_out is not None and q_in is not None and (q_in[1][0] != q_out[1][0] or q_in[0][0] != q_out[0][0]):
            self.fail(i, opname, "changes the quantization", "a data movement keeps its input's scale and zero point")

    def materialize(self, t, i, opname):
        """The IR tensor t<t> for a tensor data movement made: the source
        itself where the order is the source's (a graph input takes the new
        shape; else a reshape layer), or one transpose or gather layer."""
        src, idx, (mi, mop) = self.views[t]
        want = hwc(self.m.shape(t))
        if want is None:
            self.fail(i, opname, f"reads tensor {t} of shape {self.m.shape(t)} (made by operator {mi}, {mop})",
                      "tessera's layers read batch-1 tensors of at most 3 more dimensions")
        x = self.b.tensors[src]
        where = f"{self.path}: operator {mi} ({mop})"
        if movement.classify(idx, x.shape) == ("same",) and want != x.shape and src in self.b.inputs \
                and not any(src in layer.inputs for layer in self.b.layers):
            # a graph input read only in its new shape (a flat KWS input viewed as a
            # spectrogram): the input itself takes it, no copy
            x.shape = list(want)
            self.alias[t] = src
            return src
        name = self.b.moved(src, idx, f"t{t}", want, where, str(mi), sources=[f"{mi}:{mop}"])
        if name is None:
            self.fail(mi, mop, "a data movement that is not one transpose, gather or reshape of "
                      f"{x.shape} (HWC)", "see docs/operators.md, Data movement")
        self.alias[t] = name
        return name

    def flat_input(self, t, i, opname):
        """(IR tensor, order) for a layer that reads its input flat (a fully
        connected layer): order None when the tensor's own HWC order is the
        input's, else the permutation of the source's values it reads (the
        layer's weights are permuted instead: free and exact)."""
        if t not in self.views or t in self.alias:
            return self.act_tensor(t, i, opname), None
        src, idx, _ = self.views[t]
        flat = idx.reshape(-1)
        if flat.size == self.b.tensors[src].size and np.array_equal(np.sort(flat), np.arange(flat.size)):
            return src, None if np.array_equal(flat, np.arange(flat.size)) else flat
        return self.act_tensor(t, i, opname), None

    # ---- MEAN ------------------------------------------------------------------

    def mean(self, i, opname, op, ins, outs):
        """MEAN over axes whose groups are whole boxes of H and/or W of the
        source (after any transposes before it): an average pool with the
        reference kernel's arithmetic (reference_ops::QuantizedMeanOrSum, any
        axes, int8 or uint8): the sum of (x - zp_in) times s_in / s_out as a
        multiplier M with exponent e, M turned into (M << k) / n and e into
        e - k (k = floor(log2 n), at most 32 and 31 + e), then
        MultiplyByQuantizedMultiplier and the output zero point."""
        axes = self.const(ins[1])
        if axes is None:
            self.fail(i, opname, "the axes are not a constant", "freeze the model's shapes")
        axes = sorted({int(a) % len(self.m.shape(ins[0])) for a in axes.reshape(-1)})
        src, idx = self.view(ins[0], i, opname)
        x = self.b.tensors[src]
        groups = movement.reduce_groups(idx, axes, x.shape)
        if groups is None:
            self.fail(i, opname, f"mean over axes {axes} of a {self.m.shape(ins[0])} tensor",
                      "tessera lowers a MEAN over height and/or width (average pooling); a mean over "
                      "channels is not supported")
        varying, pooled, out_idx = groups
        kh, kw = (x.shape[0] if 0 in varying else 1), (x.shape[1] if 1 in varying else 1)
        n = kh * kw
        out_idx = out_idx.reshape(self.m.shape(outs[0]))
        in_order = (pooled == hwc(self.m.shape(outs[0]))
                    and np.array_equal(out_idx.reshape(-1), np.arange(out_idx.size)))
        # the pooled source keeps the source's layout: it is TFLite's tensor only when
        # that is the output's order, else a tensor of tessera's own (data movement follows)
        y = self.b.tensor(f"t{outs[0]}" if in_order else f"t{outs[0]}_pooled", pooled, x.source_dtype,
                          *self.scale_zp(outs[0], i, opname))
        s_in, _ = self.scale_zp(ins[0], i, opname)
        s_out, _ = self.scale_zp(outs[0], i, opname)
        mul, ir_shift = quantize_multiplier(float(s_in) / float(s_out))
        e = 31 - ir_shift
        k = min(n.bit_length() - 1, 32, 31 + e)
        if k < 0:
            self.fail(i, opname, "an output scale too large for TFLite's mean", "re-convert the model")
        mul, e = (mul << k) // n, e - k
        rq = Requant(mul=[mul], add=[0], shift=[31 - e], rounding="tflite",
                     zero_point=self.b.stored_zero_point(y), lo=-128, hi=127)
        layer = Layer(name=self.b.layer_name(f"mean_{i}"), op="avgpool", inputs=[src], output=y,
                      kernel=[kh, kw], stride=[1, 1], input_offset=-self.b.stored_zero_point(src), requant=rq,
                      source=[f"{i}:{opname}"])
        self.b.add_layer(layer, {})
        if in_order:
            self.alias[outs[0]] = y
        else:
            self.views[outs[0]] = (y, out_idx, (i, opname))

    def quantize(self, i, opname, op, ins, outs):
        if self.m.type(ins[0]) == FLOAT32:
            if ins[0] not in [int(t) for t in self.m.sg.InputsAsNumpy()]:
                self.fail(i, opname, "quantizes a float tensor inside the network",
                          "float layers are not supported: quantize the whole model to int8")
            self.act_tensor(outs[0], i, opname)
            return
        # int8 -> int8 requantization (tensorflow's requantize): a 1x1 average pool
        x = self.act_tensor(ins[0], i, opname)
        y = self.act_tensor(outs[0], i, opname)
        s_in, _ = self.scale_zp(ins[0], i, opname)
        s_out, _ = self.scale_zp(outs[0], i, opname)
        rq = self.requant([float(s_in) / float(s_out)], y, -128, 127, i, opname)
        layer = Layer(name=self.b.layer_name(f"quantize_{i}"), op="avgpool", inputs=[x], output=y,
                      input_offset=-self.b.stored_zero_point(x), requant=rq, source=[f"{i}:{opname}"])
        self.b.add_layer(layer, {})

    def dequantize(self, i, opname, op, ins, outs):
        if outs[0] not in self.graph_outputs or len(self.consumers.get(outs[0], [])) > 0:
            self.fail(i, opname, "dequantizes inside the network",
                      "float layers are not supported: quantize the whole model to int8")
        if self.m.type(ins[0]) != INT8:
            self.fail(i, opname, f"dequantizes a {TYPE_NAMES.get(self.m.type(ins[0]))} tensor (float16 weights?)",
                      "give a full int8 model")
        self.alias[outs[0]] = self.act_tensor(ins[0], i, opname)


def import_tflite(path, name, drop_final_softmax=False):
    """Lower the .tflite file at `path` to (Graph, {key: array}), once the
    TFLite interpreter runs it (frontend.tflite_gate). The parser's own
    one-line errors win when it names the operator (an op or a type tessera
    does not take); anything else it trips on in a model the interpreter
    refuses is the interpreter's refusal."""
    from .tflite_gate import check_identifier, interpreter_refusal
    check_identifier(path)
    refusal, structural = interpreter_refusal(path)
    if structural and "crashed" in refusal.what:
        # it read the model and aborted in a kernel: name what tessera does not take in it
        try:
            TfliteParser(path, name).unsupported_scan()
        except FrontendError as err:
            raise FrontendError(path, f"{err.what}; the TFLite interpreter also crashes on the model "
                                f"({refusal.what.rsplit('(', 1)[-1]}", err.fix) from None
        except Exception:
            pass
    if structural:
        raise refusal
    try:
        result = TfliteParser(path, name, drop_final_softmax).parse()
    except FrontendError:
        raise
    except Exception:
        if refusal is None:
            raise
        raise refusal from None
    if refusal is not None:
        raise refusal
    from ..golden.tflite_repair import repair
    notes = repair(path)[1]
    if notes:
        graph = result[0]
        graph.notes = dict(graph.notes or {}, repaired=notes)
    return result

"""TFLite's UNIDIRECTIONAL_SEQUENCE_LSTM (int8 input, int16 cell state) to
the IR's `lstm` layer, with the constants TFLite's Prepare computes.

The parameters reproduce unidirectional_sequence_lstm.cc's
PopulateQuantizedLstmParams8x8_16 and PopulatePrecomputedZPTimesWeightsWithBias:
each effective scale in float32 in the order TFLite multiplies and divides
(the gates' intermediate scale is 2^-12 without layer normalization; the
hidden one is the op's fifth intermediate's), QuantizeMultiplier of it in
double, the zero points folded into int32 biases (b - zp * rowsum(W)), the
cell state's scale a power of two, the clips quantized and truncated as
TFLite casts them. golden/recurrent.py is the step's arithmetic.
"""

import math

import numpy as np

from ..ir import Layer
from .tflite_math import quantize_multiplier
from .tflite_schema import INT8, INT16, INT32

# lstm::full input indices
X = 0
W_IN = {"i": 1, "f": 2, "g": 3, "o": 4}
W_REC = {"i": 5, "f": 6, "g": 7, "o": 8}
W_PEEP = {"i": 9, "f": 10, "o": 11}
BIAS = {"i": 12, "f": 13, "g": 14, "o": 15}
W_PROJ, B_PROJ, H_STATE, C_STATE = 16, 17, 18, 19
LAYER_NORM = (20, 21, 22, 23)
INTERMEDIATE_SCALE = np.float32(2.0 ** -12)   # Q3.12 gate pre-activations without layer norm


def _f32(x):
    return np.float32(x)


def _present(ins, k):
    return k < len(ins) and ins[k] >= 0


def _rowsum(w):
    return np.asarray(w, dtype=np.int64).sum(axis=1)


def _int32(values, p, i, opname, what):
    v = np.asarray(values, dtype=np.int64)
    if v.size and (v.min() < -(1 << 31) or v.max() > (1 << 31) - 1):
        p.fail(i, opname, f"{what} leaves int32", "re-quantize the model")
    return v.astype(np.int32)


def _scale(p, t, i, opname):
    q = p.m.quant(t)
    if q is None:
        p.fail(i, opname, f"tensor {t} ({p.m.name(t)!r}) has no quantization parameters",
               "convert with full int8 quantization (representative dataset)")
    scales, zps, _ = q
    if scales.size != 1:
        p.fail(i, opname, f"tensor {t} ({p.m.name(t)!r}) has {scales.size} scales",
               "TFLite's integer LSTM takes per-tensor scales")
    return _f32(scales[0]), int(zps[0])


def _const(p, t, i, opname, dtype, what):
    w = p.m.data(t)
    if w is None or p.m.type(t) != dtype:
        p.fail(i, opname, f"{what} (tensor {t}) is not a constant {({INT8: 'int8', INT16: 'int16', INT32: 'int32'})[dtype]} tensor",
               "give a full int8 model (int8 weights, int32 biases)")
    return w


def lstm(p, i, opname, op, ins, outs):
    """One UNIDIRECTIONAL_SEQUENCE_LSTM operator onto one `lstm` layer."""
    m = p.m
    o = m.options(op, "UnidirectionalSequenceLSTMOptions")
    if any(_present(ins, k) for k in LAYER_NORM):
        p.fail(i, opname, "layer-normalized LSTM", "tessera's recurrent step has no layer normalization")
    if o is not None and o.FusedActivationFunction() not in (4,):   # kTfLiteActTanh
        p.fail(i, opname, f"cell activation {o.FusedActivationFunction()}", "TFLite's integer LSTM uses TANH")
    if m.type(ins[X]) != INT8:
        p.fail(i, opname, "input is not int8", "a full-integer LSTM (int8 input, int16 cell state)")
    shape = m.shape(ins[X])
    time_major = bool(o.TimeMajor()) if o is not None else False
    if len(shape) != 3 or (shape[1] if time_major else shape[0]) != 1:
        p.fail(i, opname, f"input shape {shape}", "tessera runs one sequence (batch 1) of [time, features]")
    steps, n_input = (shape[0] if time_major else shape[1]), shape[2]
    gates = "ifgo" if _present(ins, W_IN["i"]) else "fgo"
    w_in, w_rec, s_w_in, s_w_rec = [], [], [], []
    for g in gates:
        w = _const(p, ins[W_IN[g]], i, opname, INT8, f"input-to-{g} weights")
        r = _const(p, ins[W_REC[g]], i, opname, INT8, f"recurrent-to-{g} weights")
        if w.ndim != 2 or r.ndim != 2:
            p.fail(i, opname, "diagonal recurrent weights", "tessera takes full recurrent matrices")
        w_in.append(w)
        w_rec.append(r)
        s_w_in.append(_scale(p, ins[W_IN[g]], i, opname)[0])
        s_w_rec.append(_scale(p, ins[W_REC[g]], i, opname)[0])
    n_cell, n_output = w_in[0].shape[0], w_rec[0].shape[1]
    s_x, zp_x = _scale(p, ins[X], i, opname)
    s_h, zp_h = _scale(p, ins[H_STATE], i, opname)
    s_c, _ = _scale(p, ins[C_STATE], i, opname)
    if m.type(ins[C_STATE]) != INT16:
        p.fail(i, opname, "cell state is not int16", "a full-integer LSTM has an int16 cell state")
    log2 = math.log2(float(s_c))
    cell_exp = int(round(log2))
    if abs(log2 - cell_exp) >= 1e-3:
        p.fail(i, opname, f"cell state scale {float(s_c)} is not a power of two", "TFLite requires one")
    if not 0 <= 15 + cell_exp <= 6 or not 0 <= 30 + cell_exp <= 31:
        p.fail(i, opname, f"cell state scale 2^{cell_exp}", "TFLite's integer LSTM takes 2^-15 to 2^-9")
    inter = op.IntermediatesAsNumpy() if op.IntermediatesLength() else []
    if len(inter) < 5:
        p.fail(i, opname, "no hidden-state intermediate", "convert with TensorFlow's int8 LSTM quantization")
    s_hid, zp_hid = _scale(p, int(inter[4]), i, opname)

    def mq(real):
        mul, shift = quantize_multiplier(float(real))
        return int(mul), int(shift)

    mul, shift = {}, {}

    def put(kind, pairs):
        mul[kind] = [a for a, _ in pairs]
        shift[kind] = [b for _, b in pairs]

    put("input", [mq(_f32(sw * s_x) / INTERMEDIATE_SCALE) for sw in s_w_in])
    put("recurrent", [mq(_f32(sr * s_h) / INTERMEDIATE_SCALE) for sr in s_w_rec])
    hidden = _f32(2.0 ** -15 / float(s_hid) * 2.0 ** -15)
    mul["hidden"], shift["hidden"] = mq(hidden)
    arrays = {
        "w_input": np.concatenate(w_in).astype(np.int8),
        "w_recurrent": np.concatenate(w_rec).astype(np.int8),
    }
    b_in, b_rec = [], []
    for k, g in enumerate(gates):
        b = _const(p, ins[BIAS[g]], i, opname, INT32, f"{g} gate bias").astype(np.int64).reshape(-1)
        b_in.append(b - zp_x * _rowsum(w_in[k]))
        b_rec.append(-zp_h * _rowsum(w_rec[k]))
    arrays["b_input"] = _int32(np.concatenate(b_in), p, i, opname, "a gate bias")
    arrays["b_recurrent"] = _int32(np.concatenate(b_rec), p, i, opname, "a recurrent bias")
    peephole = "".join(g for g in "ifo" if g in gates and _present(ins, W_PEEP[g]))
    if peephole:
        pw, pairs = [], []
        for g in peephole:
            w = _const(p, ins[W_PEEP[g]], i, opname, INT16, f"cell-to-{g} weights")
            pw.append(w.reshape(-1))
            sp = _scale(p, ins[W_PEEP[g]], i, opname)[0]
            pairs.append(mq(_f32(2.0 ** cell_exp * float(sp) / float(INTERMEDIATE_SCALE))))
        put("peephole", pairs)
        arrays["w_peephole"] = np.concatenate(pw).astype(np.int16)
    projection = _present(ins, W_PROJ)
    if projection:
        wp = _const(p, ins[W_PROJ], i, opname, INT8, "projection weights")
        sp = _scale(p, ins[W_PROJ], i, opname)[0]
        mul["projection"], shift["projection"] = mq(_f32(_f32(sp * s_hid) / s_h))
        bp = (_const(p, ins[B_PROJ], i, opname, INT32, "projection bias").astype(np.int64).reshape(-1)
              if _present(ins, B_PROJ) else np.zeros(wp.shape[0], np.int64))
        arrays["w_projection"] = wp.astype(np.int8)
        arrays["b_projection"] = _int32(bp + zp_hid * _rowsum(wp), p, i, opname, "the projection bias")
    cell_clip = proj_clip = 0
    if o is not None and o.CellClip() > 0:
        cell_clip = int(min(max(_f32(o.CellClip()) / s_c, _f32(-32768.0)), _f32(32767.0)))
    if o is not None and o.ProjClip() > 0:
        proj_clip = int(min(max(_f32(o.ProjClip()) / s_h, _f32(-128.0)), _f32(127.0)))
    rnn = {"cell": "lstm", "steps": steps, "n_input": n_input, "n_cell": n_cell, "n_output": n_output,
           "gates": gates, "peephole": peephole, "projection": bool(projection), "mul": mul, "shift": shift,
           "cell_exp": cell_exp, "hidden_zp": zp_hid, "state_zp": zp_h, "cell_clip": cell_clip,
           "proj_clip": proj_clip}
    x = p.b.tensor(f"t{ins[X]}", [1, steps, n_input], "int8", s_x, zp_x) if ins[X] not in p.alias \
        else p.alias[ins[X]]
    p.alias[ins[X]] = x
    if p.b.tensors[x].size != steps * n_input:
        p.fail(i, opname, f"reads a {p.b.tensors[x].shape} tensor as [{steps}, {n_input}]")
    if p.b.tensors[x].shape != [1, steps, n_input]:
        p.fail(i, opname, f"reads a {p.b.tensors[x].shape} tensor", "its input must be the [1, time, features] sequence")
    out_shape = m.shape(outs[0])
    if int(np.prod(out_shape)) != steps * n_output:
        p.fail(i, opname, f"output shape {out_shape}", "one hidden state per step")
    s_y, zp_y = _scale(p, outs[0], i, opname)
    y = p.b.tensor(f"t{outs[0]}", [1, steps, n_output], "int8", s_y, zp_y)
    p.alias[outs[0]] = y
    layer = Layer(name=p.b.layer_name(f"lstm_{i}"), op="lstm", inputs=[x], output=y, rnn=rnn,
                  source=[f"{i}:{opname}"])
    p.b.recurrent(layer, arrays)


def time_major_input(p, t):
    """A graph input [T, 1, F] read only by time-major LSTMs: with batch 1
    its values are those of [1, T, F], so it is registered as that (the
    sequence the layer reads); its IR name, or None."""
    m = p.m
    shape = m.shape(t)
    users = p.consumers.get(t, [])
    if len(shape) != 3 or shape[1] != 1 or shape[0] == 1 or not users or m.type(t) != INT8:
        return None
    for c in users:
        op = m.sg.Operators(c)
        o = m.options(op, "UnidirectionalSequenceLSTMOptions")
        if m.opcode(op) != "UNIDIRECTIONAL_SEQUENCE_LSTM" or o is None or not o.TimeMajor():
            return None
    s, zp = _scale(p, t, -1, "input")
    p.alias[t] = p.b.tensor(f"t{t}", [1, shape[0], shape[2]], "int8", s, zp)
    return p.alias[t]

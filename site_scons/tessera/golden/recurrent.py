"""The recurrent step's arithmetic (IR op `lstm`, see ir.Layer): TFLite's
integer LSTM (lstm_eval's 8x8_16 recipe: int8 input, weights and hidden
state, int16 gates and cell state), one time step after the other.

Per step t, for each gate k of `gates` ("ifgo", or "fgo" without an input
gate, TFLite's CIFG):

    in_k  = sat16(MBQM(b_in[k] + W_in[k] x_t,  m_in[k]))
    g_k   = sat16(in_k + MBQM(b_rec[k] + W_rec[k] h, m_rec[k]))
    g_k   = sat16(g_k + MBQM(w_peep[k] * c, m_peep[k]))      (peephole: i, f on the old c, o on the new)
    i, f, o = logistic(Q3.12 -> Q0.15); g = tanh(Q3.12 -> Q0.15)
    c     = sat16(wrap16(RDBPOT(f * c, 15)) + wrap16(RDBPOT(i * g, 30 + cell_exp)))   (i = 32767 - f: CIFG)
    c     = clip(c, cell_clip)                                  (cell_clip > 0)
    t     = tanh(Q(15 + cell_exp) -> Q0.15) of c
    h     = clamp8(MBQM(o * t, m_hidden) + hidden_zp)           (no projection)
          = clamp8(MBQM(b_proj + W_proj s, m_proj) + state_zp), s = clamp8(MBQM(o * t, m_hidden) - hidden_zp)
    y_t   = h

MBQM is TFLite's MultiplyByQuantizedMultiplier (ops.tflite_multiply, the
IR's shift); the biases hold the zero points folded in (b_in = bias -
zp_x * rowsum(W_in), b_rec = -zp_h * rowsum(W_rec), b_proj = bias +
hidden_zp * rowsum(W_proj)), as TFLite's Prepare folds them. The state
starts at h = state_zp (real 0), c = 0 for every inference.
"""

import numpy as np

from . import fixed16
from .ops import tflite_multiply

_I16 = (-(1 << 15), (1 << 15) - 1)

# The layer's constants are one int8 array (its `weights`, what the weight
# level holds and the step's code copies to L1 at once): its arrays, the
# int32 ones first, then int16, then int8 (by name within a width), each at
# a multiple of 4 bytes, the whole padded to a multiple of n_output bytes
# (so it reads as n_output equal "channels" to the planners).
# rnn["layout"] gives each array's [offset, count, dtype].


def pack(arrays, n_output):
    """(int8 blob, layout) of a recurrent layer's arrays."""
    parts, layout, at = [], {}, 0
    for role in sorted(arrays, key=lambda r: (-np.asarray(arrays[r]).dtype.itemsize, r)):
        raw = np.ascontiguousarray(arrays[role]).reshape(-1)
        layout[role] = [at, int(raw.size), raw.dtype.name]
        b = raw.view(np.int8)
        pad = -b.size % 4
        parts += [b, np.zeros(pad, np.int8)]
        at += b.size + pad
    total = at + (-at % n_output)
    parts.append(np.zeros(total - at, np.int8))
    return np.concatenate(parts), layout


def unpack(rnn, blob):
    """{role: array} views of a recurrent layer's blob."""
    blob = np.ascontiguousarray(blob, dtype=np.int8).reshape(-1)
    out = {}
    for role, (at, n, dtype) in rnn["layout"].items():
        out[role] = blob[at:at + n * np.dtype(dtype).itemsize].view(dtype)
    return out


def _sat16(x):
    return np.clip(x, *_I16)


def _matvec(w, v):
    """Exact int64 matrix-vector product (NumPy's integer matmul)."""
    return np.asarray(w, dtype=np.int64) @ np.asarray(v, dtype=np.int64)


def _mbqm(acc, mul, shift):
    return tflite_multiply(acc, mul, shift)


def _lut16(table, x):
    return table[np.asarray(x, dtype=np.int64) + (1 << 15)].astype(np.int64)


def lstm(x, rnn, arrays):
    """x [T, F] stored int8 -> int8 [T, n_output] (every step's h).
    `arrays` maps the names of rnn["arrays"] to their values."""
    gates = rnn["gates"]
    nc, no = rnn["n_cell"], rnn["n_output"]
    m, s = rnn["mul"], rnn["shift"]
    w_in = np.asarray(arrays["w_input"], dtype=np.int64).reshape(len(gates), nc, -1)
    w_rec = np.asarray(arrays["w_recurrent"], dtype=np.int64).reshape(len(gates), nc, no)
    b_in = np.asarray(arrays["b_input"], dtype=np.int64).reshape(len(gates), nc)
    b_rec = np.asarray(arrays["b_recurrent"], dtype=np.int64).reshape(len(gates), nc)
    peep = rnn.get("peephole")
    w_peep = np.asarray(arrays["w_peephole"], dtype=np.int64).reshape(len(peep), nc) if peep else None
    sig = fixed16.sigmoid_table()
    tanh_gate = fixed16.tanh_table(3)
    tanh_cell = fixed16.tanh_table(15 + rnn["cell_exp"])
    h = np.full(no, rnn["state_zp"], dtype=np.int64)
    c = np.zeros(nc, dtype=np.int64)
    out = np.empty((x.shape[0], no), dtype=np.int64)

    def peephole(k, g, cell):
        if not peep or gates[k] not in peep:
            return g
        j = peep.index(gates[k])
        # TFLite passes n_output as the vector size (equal to n_cell without projection)
        n = min(no, nc)
        prod = _mbqm(w_peep[j][:n] * cell[:n], m["peephole"][j], s["peephole"][j])
        g = g.copy()
        g[:n] = _sat16(g[:n] + prod)
        return g

    for t in range(x.shape[0]):
        xt = np.asarray(x[t], dtype=np.int64)
        pre = {}
        for k, name in enumerate(gates):
            g = _sat16(_mbqm(b_in[k] + _matvec(w_in[k], xt), m["input"][k], s["input"][k]))
            g = _sat16(g + _mbqm(b_rec[k] + _matvec(w_rec[k], h), m["recurrent"][k], s["recurrent"][k]))
            pre[name] = g
        act = {}
        for k, name in enumerate(gates):
            if name == "o":
                continue
            g = peephole(k, pre[name], c)
            act[name] = _lut16(tanh_gate if name == "g" else sig, g)
        f = act["f"]
        i = act["i"] if "i" in act else np.int64(32767) - f
        c = _sat16(fixed16.wrap16(fixed16.rdbpot(f * c, 15))
                   + fixed16.wrap16(fixed16.rdbpot(i * act["g"], 30 + rnn["cell_exp"])))
        if rnn.get("cell_clip"):
            c = np.clip(c, -rnn["cell_clip"], rnn["cell_clip"])
        k = gates.index("o")
        o = _lut16(sig, peephole(k, pre["o"], c))
        th = _lut16(tanh_cell, c)
        if rnn.get("projection"):
            hid = np.clip(_mbqm(o * th, m["hidden"], s["hidden"]) - rnn["hidden_zp"], -128, 127)
            w_p = np.asarray(arrays["w_projection"], dtype=np.int64).reshape(no, nc)
            acc = np.asarray(arrays["b_projection"], dtype=np.int64) + _matvec(w_p, hid)
            h = np.clip(_mbqm(acc, m["projection"], s["projection"]) + rnn["state_zp"], -128, 127)
            if rnn.get("proj_clip"):
                h = np.clip(h, -rnn["proj_clip"], rnn["proj_clip"])
        else:
            h = np.clip(_mbqm(o * th, m["hidden"], s["hidden"]) + rnn["hidden_zp"], -128, 127)
        out[t] = h
    return out


# ---- cells of plain ops (rnn["cell"] == "ops") ------------------------------
#
# A recurrent layer that a converter unrolled into plain int8 ops (TFLite's
# FULLY_CONNECTED, ADD, LOGISTIC, TANH, MUL, SPLIT per step; ONNX Runtime's
# QDQ MatMul, Add, Sigmoid, Tanh, Mul, Split), recognised and run as one
# layer: per step, the body's vector ops, each with the arithmetic of the IR
# op it is named after (ir.Layer: linear, add, mul, lut, their Requant) and
# its own parameters for that step (a converter quantizes every step's
# tensors apart). Vectors are the step's input "x", the states (rnn["states"]:
# name, size, initial stored value) and the ops' outputs; an op reads a
# vector from element `at` on ({"v": name, "at": k}) or a constant array of
# the layer ({"const": role}). After the step the states take the vectors
# rnn["next"] names; rnn["emit"] is the step's output (every step's, or the
# last one's when rnn["sequence"] is false).

def _requant(p, rounding):
    from ..ir import Requant

    mul, shift, zp, lo, hi = p["rq"]
    return Requant(mul=[mul], add=[0], shift=[shift], rounding=rounding, zero_point=zp, lo=lo, hi=hi)


def _operand(values, arrays, ref, n):
    if "const" in ref:
        v = np.asarray(arrays[ref["const"]], dtype=np.int64)
    else:
        v = values[ref["v"]]
    at = ref.get("at", 0)
    return v[at:at + n] if n is not None else v[at:]


def body_op(op, t, values, arrays, tables):
    """One body op at step t -> its int64 output vector."""
    from . import ops

    p = op["steps"][t]
    n = op["n"]
    kind = op["op"]
    if kind == "linear":
        x = _operand(values, arrays, op["in"][0], None)
        w = np.asarray(arrays[op["weights"]], dtype=np.int64).reshape(n, -1)
        b = arrays[op["bias"]] if op.get("bias") else None
        acc = ops.linear(x.reshape(1, 1, -1), w, b, p["input_offset"])
        y = ops.requantize(acc, _requant(p, op["rounding"]))
    elif kind in ("add", "mul"):
        a, b = (_operand(values, arrays, ref, n).reshape(1, 1, n) for ref in op["in"])
        acc = (ops.add(a, b, p["in_mul"], p["in_offset"], p.get("in_shift")) if kind == "add"
               else ops.mul(a, b, p["in_offset"]))
        y = ops.requantize(acc, _requant(p, op["rounding"]))
    elif kind == "lut":
        y = ops.lut(_operand(values, arrays, op["in"][0], n), tables[p["table"]])
    else:
        raise ValueError(f"recurrent body op {kind!r}")
    return np.asarray(y, dtype=np.int64).reshape(-1)


def ops_cell(x, rnn, arrays, trace=None):
    """x [T, F] stored int8 -> int8 [T or 1, emit size]. trace: a dict that
    receives (body op index, step) -> that op's result."""
    tables = [np.asarray(table, dtype=np.int64) for table in rnn.get("tables", [])]
    state = {s["name"]: np.full(s["size"], s["init"], dtype=np.int64) for s in rnn["states"]}
    out = []
    for t in range(rnn["steps"]):
        values = dict(state, x=np.asarray(x[t], dtype=np.int64))
        for k, op in enumerate(rnn["body"]):
            values[op["out"]] = body_op(op, t, values, arrays, tables)
            if trace is not None:
                trace[(k, t)] = values[op["out"]]
        out.append(values[rnn["emit"]])
        state = {name: values[v] for name, v in rnn["next"].items()}
    return np.stack(out if rnn.get("sequence", True) else out[-1:])


# ---- ONNX's LSTM and GRU, quantized by ONNX Runtime (rnn["cell"] "onnx_lstm", "onnx_gru")
#
# ONNX Runtime's quantize_static puts QuantizeLinear/DequantizeLinear around
# every input and output of an LSTM or GRU node and runs the node itself in
# float: the states are never quantized between steps. The integer form
# keeps them in fixed point far finer than the output's step, so that only
# the last rounding can differ from ONNX Runtime's (at most 1 LSB):
#
#   px  = rq_x(sum (x - zp_x)(W - zp_w))      Q8.23, rq_x = s_x s_w 2^23 (half up)
#   ph  = rq_h(sum (R - zp_r) h)              h in Q0.15, rq_h = s_r 2^8
#   gates: sigmoid / tanh of px + ph + bW + bR (the biases in Q8.23), gemmlowp's
#          32-bit logistic and tanh (8 integer bits in, Q0.31 out, ~1e-7)
#   LSTM (gates i, o, f, c): c = SRDHM(f, c) + RDBPOT(SRDHM(i, g), 8)   (Q8.23)
#                            h = RDBPOT(SRDHM(o, tanh(c)), 16)           (Q0.15)
#   GRU (gates z, r, h; linear_before_reset 1): n = tanh(px_n + bW_n + SRDHM(r, ph_n + bR_n))
#                            h = RDBPOT(SRDHM(1 - z, n) + SRDHM(z, h << 16), 16)
#   y = clamp(rq_y(h) + zp_y), rq_y = 2^-15 / s_y
# rq(acc) = (acc * mul + 2^(shift - 1)) >> shift in 64 bits (the IR's half up).

def _rq64(acc, mul, shift):
    acc = np.asarray(acc, dtype=np.int64) * int(mul)
    return (acc + (1 << (int(shift) - 1))) >> int(shift) if shift > 0 else acc


def onnx_cell(x, rnn, arrays):
    """x [T, F] stored int8 -> int8 [T or 1, H]."""
    from .gemmlowp import logistic32, rdbpot, srdhm32, tanh32

    H = rnn["n_cell"]
    gates = 4 if rnn["cell"] == "onnx_lstm" else 3
    w = np.asarray(arrays["w_input"], dtype=np.int64).reshape(gates * H, -1) - rnn["zp"]["w"]
    r = np.asarray(arrays["w_recurrent"], dtype=np.int64).reshape(gates * H, H) - rnn["zp"]["r"]
    bw = np.asarray(arrays["b_input"], dtype=np.int64)
    br = np.asarray(arrays["b_recurrent"], dtype=np.int64)
    m, s = rnn["mul"], rnn["shift"]
    sat32 = lambda v: max(-(1 << 31), min((1 << 31) - 1, int(v)))   # noqa: E731
    sat16 = lambda v: max(-(1 << 15), min((1 << 15) - 1, int(v)))   # noqa: E731
    h = np.zeros(H, dtype=np.int64)
    c = np.zeros(H, dtype=np.int64)
    out = []
    for t in range(x.shape[0]):
        px = _rq64(w @ (np.asarray(x[t], dtype=np.int64) - rnn["zp"]["x"]), m["x"], s["x"])
        ph = _rq64(r @ h, m["h"], s["h"])
        new = h.copy()
        for j in range(H):
            if gates == 4:   # ONNX's order: i, o, f, c
                p = [sat32(px[k * H + j] + ph[k * H + j] + bw[k * H + j] + br[k * H + j]) for k in range(4)]
                i, o, f = (logistic32(p[k], 8) for k in (0, 1, 2))
                g = tanh32(p[3], 8)
                c[j] = sat32(srdhm32(f, int(c[j])) + rdbpot(srdhm32(i, g), 8))
                new[j] = sat16(rdbpot(srdhm32(o, tanh32(int(c[j]), 8)), 16))
            else:            # z, r, h
                z = logistic32(sat32(px[j] + ph[j] + bw[j] + br[j]), 8)
                rr = logistic32(sat32(px[H + j] + ph[H + j] + bw[H + j] + br[H + j]), 8)
                n = tanh32(sat32(px[2 * H + j] + bw[2 * H + j] + srdhm32(rr, sat32(ph[2 * H + j] + br[2 * H + j]))), 8)
                new[j] = sat16(rdbpot(srdhm32((1 << 31) - 1 - z, n) + srdhm32(z, int(h[j]) << 16), 16))
        h = new
        out.append(np.clip(_rq64(h, m["y"], s["y"]) + rnn["y_zp"], -128, 127))
    return np.stack(out if rnn.get("sequence", True) else out[-1:])

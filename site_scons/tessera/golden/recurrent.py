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
# level holds and the step's code copies to L1 at once): the sections below,
# in this order, each at a multiple of 4 bytes, the whole padded to a
# multiple of n_output bytes (so it reads as n_output equal "channels" to the
# planners). rnn["layout"] gives each present section's [offset, count].
SECTIONS = (("b_input", np.int32), ("b_recurrent", np.int32), ("b_projection", np.int32),
            ("w_peephole", np.int16), ("w_input", np.int8), ("w_recurrent", np.int8), ("w_projection", np.int8))


def pack(arrays, n_output):
    """(int8 blob, layout) of a recurrent layer's arrays."""
    parts, layout, at = [], {}, 0
    for role, dtype in SECTIONS:
        if role not in arrays:
            continue
        raw = np.ascontiguousarray(arrays[role], dtype=dtype).reshape(-1)
        layout[role] = [at, int(raw.size)]
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
    for role, dtype in SECTIONS:
        if role in rnn["layout"]:
            at, n = rnn["layout"][role]
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

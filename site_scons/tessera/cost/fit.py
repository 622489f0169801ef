"""Fitting the coefficients: least squares on relative error (each layer's
row divided by its measured count, so a 5000-instruction layer weighs as
much as a 5-million one), coefficients kept non-negative (a cost never
shrinks when a layer does more) by refitting without the columns that came
out negative until none does (an active-set method: the data are a few
hundred rows by a few dozen columns).

Samples are (op, features, measured count). Every op seen gets its own
compute coefficients; `default` (for ops the fit never saw) is the fit of
all layers with one shared set. The dma coefficients are shared by all ops.
"""

import numpy as np

from .model import COMPUTE, DMA


def _nnls(A, b):
    active = np.ones(A.shape[1], dtype=bool)
    while True:
        x = np.zeros(A.shape[1])
        if active.any():
            x[active] = np.linalg.lstsq(A[:, active], b, rcond=None)[0]
        neg = active & (x < 0)
        if not neg.any():
            return x
        active &= ~neg


def _design(samples, ops):
    cols = [(op, k) for op in ops for k in COMPUTE] + [("dma", k) for k in DMA]
    index = {c: i for i, c in enumerate(cols)}
    A = np.zeros((len(samples), len(cols)))
    b = np.ones(len(samples))
    for r, (op, feats, measured) in enumerate(samples):
        x = dict(feats, layer=1)
        key = op if op in ops else "default"
        for k in COMPUTE:
            A[r, index[(key, k)]] = x[k] / measured
        for k in DMA:
            A[r, index[("dma", k)]] = x[k] / measured
    return cols, A, b


def fit(samples, combine="sum"):
    """{ops, default, dma} fitted on samples [(op, features, measured)]."""
    samples = [s for s in samples if s[2] > 0]
    ops = sorted({s[0] for s in samples})
    cols, A, b = _design(samples, ops)
    x = _nnls(A, b)
    out = {"ops": {}, "dma": {}}
    for (group, k), v in zip(cols, x):
        v = float(f"{v:.6g}")
        if group == "dma":
            out["dma"][k] = v
        else:
            out["ops"].setdefault(group, {})[k] = v
    shared = [("default", f, m) for _, f, m in samples]
    cols, A, b = _design(shared, ["default"])
    x = _nnls(A, b)
    out["default"] = {k: float(f"{v:.6g}") for (g, k), v in zip(cols, x) if g == "default"}
    out["combine"] = combine
    return out

"""Random tiles for the Cortex-M kernels (kernels/cmsis_nn/), with the
golden model's output: shared by tests/test_cmsis_nn.py (host, through
ctypes) and the QEMU harness it builds (the same cases compiled into a
firmware), and by benchmarks/cortexm_kernels.py.

A case is one tsr_cmsis_* call: its argument fields, arrays, requantization,
scratch size (kernels/cmsis_nn/library.yaml's terms for the tile) and the
expected output. Requantizations are CMSIS-NN's (half-up rounding, no
additive term, shift 1..62) for the CMSIS-API ops; average pooling and add
have tessera's semantics and get any rounding.
"""

import os
from dataclasses import dataclass

import numpy as np

from tessera.config import load_yaml
from tessera.golden import ops
from tessera.ir import Requant
from tessera.tiler.library import op_spec

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIBRARY = load_yaml(os.path.join(ROOT, "kernels", "cmsis_nn", "library.yaml"))
# <op>_rq: tessera's whole requantization (floor rounding, an additive
# term, Requant.divisor: NEMO/DORY/Deeploy layers; the cores' K64 form and
# any_rq.c), a third of them with a weight offset (TF1-style uint8 weights:
# any_rq.c's own code); <op>_tfl: TFLite's two roundings (the cores' TFL forms)
OPS = ("conv2d", "pointwise", "depthwise", "linear", "maxpool", "avgpool", "add",
       "conv2d_rq", "pointwise_rq", "linear_rq", "depthwise_rq",
       "conv2d_tfl", "pointwise_tfl", "depthwise_tfl", "linear_tfl", "add_tfl")
# the argument struct of each op (tsr_<kind>_args_t)
KIND = {"conv2d": "conv", "pointwise": "conv", "depthwise": "conv", "linear": "conv",
        "maxpool": "pool", "avgpool": "pool", "add": "add", "add_tfl": "add", "lut": "lut", "mul": "binary",
        "resize": "resize", "conv2d_dilated": "conv"}
KIND.update({f"{op}_{form}": "conv" for op in ("conv2d", "pointwise", "linear", "depthwise") for form in ("rq", "tfl")})



@dataclass
class Case:
    op: str
    fields: dict                  # scalar fields of the argument struct
    arrays: dict                  # pointer fields: name -> numpy array (int8 or int32)
    expected: np.ndarray          # int8 output, HWC (or flat for add)
    rq: dict = None               # mul, shift (tessera's), add, per_channel, zero_point, lo, hi, rounding
    scratch: int = 0
    macs: int = 0

    @property
    def fn(self):
        return "tsr_cmsis_" + ("add" if self.op == "add_tfl" else self.op)


def scratch_bytes(op, **q):
    """Scratch the tiler reserves for a tile (library.yaml's terms)."""
    q = dict({"cores": 1, "kh": 1, "kw": 1, "kernel_area": 1, "patch": 1, "in_c": 1, "tile_c": 1}, **q)
    return op_spec(LIBRARY["tiler"], op).scratch_bytes(q)


def _int8(rng, shape):
    return rng.integers(-128, 128, size=shape).astype(np.int8)


def _requant(rng, channels, acc_max, cmsis=True, mul_max=2**31 - 1):
    """A requantization whose outputs mostly land inside int8 (scaled to
    acc_max), sometimes saturating; per-channel or per-tensor."""
    per_channel = bool(rng.integers(2))
    n = channels if per_channel else 1
    mul, shift = [], []
    for _ in range(n):
        m = int(rng.integers(1, mul_max + 1))
        bits = (max(acc_max, 1) * m).bit_length()
        s = int(bits - 7 + rng.integers(-2, 3))
        mul.append(m)
        shift.append(max(1 if cmsis else 0, min(62, s)))
    rounding = "half_up" if cmsis or rng.integers(2) else "floor"
    add = [0] * n
    if not cmsis and rng.integers(2):
        add = [int(a) >> max(0, 24 - s) for a, s in zip(rng.integers(-2**31, 2**31, size=n), shift)]
    lo, hi = -128, 127
    if rng.integers(2):
        lo = int(rng.integers(-128, 100))
        hi = int(rng.integers(lo, 128))
    divisor = 0
    if rounding == "floor" and rng.integers(2):
        # NEMO's 2**d - 1 (the shift gives up its bits, outputs stay in range)
        d = int(rng.integers(2, 25))
        divisor = 2 ** d - 1
        shift = [max(0, v - d) for v in shift]
    return {"mul": mul, "shift": shift, "add": add, "per_channel": int(per_channel),
            "zero_point": int(rng.integers(-128, 128)), "lo": lo, "hi": hi, "rounding": rounding,
            "divisor": divisor}


def _tflite_requant(rng, channels, acc_max):
    """TFLite's requantization as its converter makes it: a multiplier in
    [2^30, 2^31) (QuantizeMultiplier's), the IR's shift 31 + r, mostly
    within the kernels' short form (32..54), sometimes outside it (the
    wide form up to 62, and channels of zero scale: multiplier 0, a shift
    of 31 or near 62, as the converter writes them; the per-element path
    below 31), per channel or per tensor."""
    per_channel = bool(rng.integers(2))
    n = channels if per_channel else 1
    mul, shift = [], []
    for _ in range(n):
        m = int(rng.integers(2**30, 2**31))
        s = max(31, min(60, (max(acc_max, 1) * m).bit_length() - 7 + int(rng.integers(-2, 3))))
        kind = rng.integers(12)
        if kind == 0:
            s = int(rng.choice([29, 30, 31, 55, 56, 62]))
        elif kind == 1:
            m, s = 0, int(rng.choice([31, 62]))
        mul.append(m)
        shift.append(s)
    lo, hi = -128, 127
    if rng.integers(2):
        lo = int(rng.integers(-128, 100))
        hi = int(rng.integers(lo, 128))
    return {"mul": mul, "shift": shift, "add": [0] * n, "per_channel": int(per_channel),
            "zero_point": int(rng.integers(-128, 128)), "lo": lo, "hi": hi, "rounding": "tflite", "divisor": 0}


def golden_requant(acc, rq):
    r = Requant(mul=rq["mul"], add=rq["add"], shift=rq["shift"], rounding=rq["rounding"],
                zero_point=rq["zero_point"], lo=rq["lo"], hi=rq["hi"], divisor=rq.get("divisor") or None)
    return ops.requantize(acc, r).astype(np.int8)


def _geometry(rng, max_k=5, max_hw=8, k=None):
    kh, kw = k if k else (int(rng.integers(1, max_k + 1)), int(rng.integers(1, max_k + 1)))
    sh, sw = int(rng.integers(1, 3)), int(rng.integers(1, 3))
    pt, pb = int(rng.integers(0, kh)), int(rng.integers(0, kh))
    pl, pr = int(rng.integers(0, kw)), int(rng.integers(0, kw))
    in_h = int(rng.integers(max(1, kh - pt - pb), max_hw + 1))
    in_w = int(rng.integers(max(1, kw - pl - pr), max_hw + 1))
    out_h = (in_h + pt + pb - kh) // sh + 1
    out_w = (in_w + pl + pr - kw) // sw + 1
    return dict(kh=kh, kw=kw, sh=sh, sw=sw, pad_t=pt, pad_l=pl, pad_b=pb, pad_r=pr,
                in_h=in_h, in_w=in_w, out_h=out_h, out_w=out_w)


def _channels(rng, hi):
    """Channel counts: multiples of 4 (the SIMD paths) half the time."""
    return int(rng.integers(1, hi // 4 + 1)) * 4 if rng.integers(2) else int(rng.integers(1, hi + 1))


def _bias(rng, n):
    return None if rng.integers(4) == 0 else rng.integers(-2**20, 2**20, size=n).astype(np.int32)


def _acc(op, x, w, bias, off, g):
    """The accumulators of a convolution-like tile (w: [co, ...] as the kernels take it)."""
    pad = (g["pad_t"], g["pad_l"], g["pad_b"], g["pad_r"])
    k, s = (g["kh"], g["kw"]), (g["sh"], g["sw"])
    if op == "conv2d":
        return ops.conv2d(x, w, bias, off, k, s, pad)
    if op == "pointwise":
        return ops.pointwise(x, w, bias, off)
    if op == "depthwise":
        return ops.depthwise(x, w.transpose(1, 2, 0), bias, off, k, s, pad)
    return ops.linear(x, w, bias, off)


def make_case(op, rng):
    """One random case of op."""
    if op.endswith(("_rq", "_tfl")) and op != "add_tfl":
        base, form = op.rsplit("_", 1)
        case = make_case(base, rng)
        # the same tile with tessera's or TFLite's requantization in place of CMSIS-NN's
        acc, co = case.acc, case.fields["out_c"]
        if form == "rq" and rng.integers(3) == 0:
            # TF1-style uint8 weights: every weight plus the weight offset
            wo = int(rng.integers(-127, 129))
            case.fields["weight_offset"] = wo
            w = case.arrays["weights"].astype(np.int64) + wo
            acc = _acc(base, case.arrays["in"], w, case.arrays.get("bias"), case.fields["input_offset"], case.g)
        acc_max = int(np.abs(acc).max(initial=0))
        case.op = op
        case.rq = _requant(rng, co, acc_max, cmsis=False) if form == "rq" else _tflite_requant(rng, co, acc_max)
        case.expected = golden_requant(acc, case.rq)
        if form == "rq" and rng.integers(2):
            case.scratch = 0           # conv2d_rq's direct path (no column)
        return case
    if op in ("conv2d", "pointwise", "depthwise", "linear"):
        off = int(rng.integers(-127, 129))
        if op == "pointwise":
            g = dict(_geometry(rng, k=(1, 1)), sh=1, sw=1, pad_t=0, pad_l=0, pad_b=0, pad_r=0)
            g["out_h"], g["out_w"] = g["in_h"], g["in_w"]
            ci, co = _channels(rng, 40), _channels(rng, 17)
        elif op == "linear":
            g = dict(kh=1, kw=1, sh=1, sw=1, pad_t=0, pad_l=0, pad_b=0, pad_r=0,
                     in_h=int(rng.integers(1, 4)), in_w=int(rng.integers(1, 4)), out_h=1, out_w=1)
            ci, co = _channels(rng, 24), _channels(rng, 17)
        elif op == "depthwise":
            g = _geometry(rng, k=(3, 3) if rng.integers(2) else None)
            ci = co = _channels(rng, 13)
        else:
            g = _geometry(rng)
            ci, co = _channels(rng, 12), _channels(rng, 9)
        x = _int8(rng, (g["in_h"], g["in_w"], ci))
        bias = _bias(rng, co)
        if op == "conv2d":
            w = _int8(rng, (co, g["kh"], g["kw"], ci))
            q = dict(tile_c=co, patch=g["kh"] * g["kw"] * ci)
        elif op == "pointwise":
            w = _int8(rng, (co, ci))
            q = dict(tile_c=co, in_c=ci)
        elif op == "depthwise":
            w = _int8(rng, (co, g["kh"], g["kw"]))          # tessera's [c][kh][kw]
            q = dict(tile_c=co, kernel_area=g["kh"] * g["kw"], in_tile_w=g["in_w"])
        else:
            w = _int8(rng, (co, g["in_h"] * g["in_w"] * ci))
            q = dict(tile_c=co, in_h=g["in_h"], in_w=g["in_w"], in_c=ci)
        acc = _acc(op, x, w, bias, off, g)
        rq = _requant(rng, co, int(np.abs(acc).max(initial=0)))
        fields = {key: g[key] for key in ("in_h", "in_w", "kh", "kw", "sh", "sw", "pad_t", "pad_l", "pad_b",
                                          "pad_r")}
        fields.update(in_c=ci, out_h=acc.shape[0], out_w=acc.shape[1], out_c=co, input_offset=off)
        arrays = {"in": x, "weights": w}
        if bias is not None:
            arrays["bias"] = bias
        macs = int(acc.size * (w.size // co))
        if op == "depthwise":
            q.update(tile_h=acc.shape[0], tile_w=acc.shape[1])
        scratch = scratch_bytes(op, **q)
        if op in ("conv2d", "pointwise") and rng.integers(2):
            # the least the kernels take: the multipliers and shifts, then
            # two int16 columns (arm_convolve_s8's buffer; two pixels at a time)
            k = q["patch"] if op == "conv2d" else ci
            scratch = 8 * co + 2 * 2 * ((k + 3) & ~3)
        case = Case(op, fields, arrays, golden_requant(acc, rq), rq, scratch, macs)
        case.acc, case.g = acc, g
        return case
    if op in ("maxpool", "avgpool"):
        c = _channels(rng, 13)
        g = _geometry(rng, max_k=4)
        if op == "avgpool":
            g.update(pad_t=0, pad_l=0, pad_b=0, pad_r=0)
            g["in_h"] = max(g["in_h"], g["kh"])
            g["in_w"] = max(g["in_w"], g["kw"])
            g["out_h"] = (g["in_h"] - g["kh"]) // g["sh"] + 1
            g["out_w"] = (g["in_w"] - g["kw"]) // g["sw"] + 1
        x = _int8(rng, (g["in_h"], g["in_w"], c))
        k, s = (g["kh"], g["kw"]), (g["sh"], g["sw"])
        fields = {key: g[key] for key in ("in_h", "in_w", "out_h", "out_w", "kh", "kw", "sh", "sw",
                                          "pad_t", "pad_l", "pad_b", "pad_r")}
        fields["c"] = c
        if op == "maxpool":
            y = ops.maxpool(x, k, s, (g["pad_t"], g["pad_l"], g["pad_b"], g["pad_r"])).astype(np.int8)
            fields["input_offset"] = 0
            return Case(op, fields, {"in": x}, y, None, 0, int(y.size * g["kh"] * g["kw"]))
        off = int(rng.integers(-127, 129))
        acc = ops.avgpool_sum(x, off, k, s)
        rq = _requant(rng, c, int(np.abs(acc).max(initial=0)), cmsis=False)
        fields["input_offset"] = off
        return Case(op, fields, {"in": x}, golden_requant(acc, rq), rq, 0, int(acc.size * g["kh"] * g["kw"]))
    if op == "add_tfl":
        # TFLite's ADD as the importer makes it: each input's multiplier below
        # 1 (QuantizeMultiplier's, or exactly 1/2: 2^30 with shift 31), the
        # output's TFLite requantization (sometimes outside the short form)
        n = int(rng.integers(1, 100))
        a, b = _int8(rng, n), _int8(rng, n)
        in_mul, in_shift = [], []
        for _ in range(2):
            half = rng.integers(3) == 0
            in_mul.append(2**30 if half else int(rng.integers(2**30, 2**31)))
            in_shift.append(31 if half else int(rng.integers(31, 40)))
        in_off = [int(v) for v in rng.integers(-127, 129, size=2)]
        probe = rng.integers(3) == 0
        if probe:
            # the rounding boundaries: each input's rescale halves (a + o) << 20
            # with ties at odd a + o, the output's quarters the sum
            in_mul, in_shift = [2**30, 2**30], [51, 51]
        acc = ops.add(a, b, in_mul, in_off, in_shift)
        rq = _tflite_requant(rng, 1, int(np.abs(acc).max(initial=0)))
        if probe:
            rq.update(mul=[2**30], shift=[32], lo=-128, hi=127)
        fields = {"n": n, "in_mul": in_mul, "in_offset": in_off, "in_shift": in_shift}
        return Case(op, fields, {"a": a, "b": b}, golden_requant(acc.reshape(n, 1), rq).reshape(n), rq, 0, n)
    # add: multipliers and shift as the frontend makes them (a shared shift)
    n = int(rng.integers(1, 100))
    a, b = _int8(rng, n), _int8(rng, n)
    in_mul = [int(v) for v in rng.integers(2**27, 2**30, size=2)]
    in_off = [int(v) for v in rng.integers(-127, 129, size=2)]
    acc = ops.add(a, b, in_mul, in_off)
    # acc reaches 2^39: the product with the multiplier must stay in int64
    rq = _requant(rng, 1, int(np.abs(acc).max(initial=0)), cmsis=False, mul_max=2**23)
    rq["per_channel"] = 0
    if rng.integers(2):
        rq.update(mul=[1], shift=[int(rng.integers(28, 34))])
    fields = {"n": n, "in_mul": in_mul, "in_offset": in_off}
    return Case(op, fields, {"a": a, "b": b}, golden_requant(acc.reshape(n, 1), rq).reshape(n), rq, 0, n)


def rounding_of(form):
    """A probe's rounding by its op's form (None: tessera's, either)."""
    return {"cmsis": "half_up", "tfl": "tflite"}.get(form)


def probe_case(op, rng):
    """A case whose accumulators sit on (or next to) the requantization's
    rounding boundaries, where the forms differ: zero input and offset, so
    every accumulator is its channel's bias, the bias chosen per channel
    from the multiplier 2^30 and the shift (TFLite's halves away from zero
    of RDBPOT, half up's and floor's boundaries). Wide enough for the
    kernels' fast paths (four pixels, whole words) most of the time."""
    form = op.rsplit("_", 1)[1] if op.endswith(("_rq", "_tfl")) else "cmsis"
    for _ in range(100):
        case = make_case(op, rng)
        f = case.fields
        if f["out_h"] * f["out_w"] >= (1 if op.startswith("linear") else 4):
            break
    co = f["out_c"]
    per_channel = bool(rng.integers(4))
    n = co if per_channel else 1
    # the short forms' shifts, and (TFLite) sometimes the wide one's
    wide = rounding_of(form) == "tflite" and rng.integers(3) == 0
    shift = [int(rng.integers(33, 50)) if not wide or rng.integers(2) else int(rng.integers(55, 59)) for _ in range(n)]
    rounding = rounding_of(form) or ("half_up" if rng.integers(2) else "floor")
    bias = []
    for c in range(co):
        s = shift[c if per_channel else 0]
        t = int(rng.integers(-100, 101)) >> max(0, s - 52)   # |acc| < 2^29: TFLite's doubled accumulators
        if rounding == "tflite":      # SRDHM(acc, 2^30) = floor((acc + 1) / 2), then halves at odd multiples of 2^(r-1)
            acc = (2 * t - 1) << (s - 31)
        elif rounding == "half_up":   # acc 2^30 + 2^(s-1) a multiple of 2^s
            acc = (2 * t + 1) << (s - 31)
        else:
            acc = t << (s - 30)
        bias.append(acc + int(rng.integers(-2, 3)) * int(rng.integers(0, 2)))
    lo, hi = (-128, 127) if rng.integers(2) else sorted(int(v) for v in rng.integers(-128, 128, size=2))
    case.rq = {"mul": [2**30] * n, "shift": shift, "add": [0] * n, "per_channel": int(per_channel),
               "zero_point": int(rng.integers(-20, 21)), "lo": lo, "hi": hi, "rounding": rounding, "divisor": 0}
    case.arrays["in"] = np.zeros_like(case.arrays["in"])
    case.arrays["bias"] = np.array(bias, dtype=np.int32)
    f["input_offset"] = 0
    acc = np.broadcast_to(np.array(bias, dtype=np.int64), (f["out_h"], f["out_w"], co))
    case.acc = acc
    case.expected = golden_requant(acc, case.rq)
    return case


def cases(op, count, seed):
    rng = np.random.default_rng([seed, OPS.index(op)])
    return [make_case(op, rng) for _ in range(count)]


def probes(op, count, seed):
    """Rounding-boundary cases (probe_case) of a convolution-like op."""
    rng = np.random.default_rng([seed, OPS.index(op), 1])
    return [probe_case(op, rng) for _ in range(count)]


# ops whose requantization probe_case covers
PROBED = tuple(op for op in OPS if KIND[op] == "conv")

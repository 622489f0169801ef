"""NEMO/DORY integer ONNX dialect (NEMO's "integer deployable" export, the
input of DORY; opset 9/10).

Integers live in float tensors. Each Conv/Gemm/MatMul (and pool, and
residual Add) is followed by a chain that folds batch-norm and
requantization into integer arithmetic, e.g.

    Conv -> Mul(kappa[c]) -> Add(lambda[c]) -> Cast(int64) -> Mul(m)
         -> Div(2**d) -> Cast -> Cast -> Cast(float) -> Clip(0, 255)
    Mul(a, 32), Mul(b, 32) -> Add -> Div(64) -> Floor          (residual)

Lowering: the chain is folded symbolically into one exact rational
(acc * mul + add) / den and one rounding point, which becomes the layer's
Requant with rounding "floor": y = clamp((acc * mul + add) >> log2(den)),
or, when den = 2**s * q with q odd (NEMO divides by 2**d - 1), y =
clamp(floor(((acc * mul + add) >> s) / q)) with Requant.divisor = q: a
shift by d instead differs (11 of 320,000 values of one real layer). An
add beyond 32 bits moves into the accumulator's bias (_fit_int32). A chain
after a finished one (after a residual Add's Floor) is DORY's layer of its
own: an elementwise requantization.

Arithmetic. The graph multiplies the accumulator by kappa and adds lambda
in float32, which rounds once |acc * kappa| >= 2**24 (it does for 134166 of
the 160000 outputs of Residual_connection_test_1's first conv on its
reference input). tessera computes the chain exactly in 64-bit integers.
Both arithmetics reproduce every DORY reference output bit for bit (ONNX
Runtime's float32 and tessera's integers were both checked against all 29
out_layer files): the rounding error, a few units, must land across a
2**d / m division boundary to change an output, and over every accumulator
value the layers can reach that happens for only 63 (channel, value) pairs
in Residual_connection_test_1 and 112 in dronet_2.0, none of which the
reference inputs produce (e.g. its first conv, channel 3, acc = 125734: 60
exactly, 61 in float32). Exact integers it is, because that is what DORY's
kernels compute on the MCU, what the IR's integer Requant can express, and
what a C kernel can match without emulating float32 rounding.

Rounding. An integer Div (after Cast to int64) truncates toward zero, not
floor; the two agree after a clamp whose lower bound is >= 0 (any value
that differs is negative and clamps to the bound), which is what DORY's
ReLU-style Clip(0, 255) gives. A chain that truncates without such a clamp
is rejected.

Activations are uint8 (0..255), stored shifted by -128 (the offset is
folded into the next layer's input_offset and this layer's zero point). A
chain without a Clip (the residual Add's Floor) is DORY's 8-bit unsigned
activation all the same: DORY's kernels saturate it to [0, 255], so tessera
clamps there too (Residual_connection_test_1's Add is a + b, up to 510 in
principle; its reference values stay within 0..4, and DORY checks bytes). A Conv/Gemm/MatMul with no chain at all outputs its int32
accumulators (DORY's final fully connected layer).

Float post-processing at the graph outputs (Sigmoid, Softmax, and the
Gather (-> Unsqueeze) that splits the last layer's outputs) is not part of the integer
network: DORY stops at the last integer layer, and so does tessera; the
IR outputs are the tensors those ops read.

DORY numbers its layers (out_layerN.txt) one per Conv/Gemm/MatMul with its
chain (and the zero Pads folded into it), pool (a zero Pad before a max
pool folded too), residual Add and standalone chain, in graph order;
tessera's layers are exactly those, in the same order.
"""

import math

import numpy as np

from ..errors import FrontendError
from .intbase import INT_RANGES, Acc, IntegerParser, dtype_for
from .onnxgraph import attrs

INT_TYPES = {2, 3, 4, 5, 6, 7, 12, 13}   # ONNX uint8, int8, uint16, int16, int32, int64, uint32, uint64
FLOAT_TYPES = {1, 10, 11, 16}
TAIL_OPS = ("Sigmoid", "Softmax", "LogSoftmax", "Gather", "Identity", "Unsqueeze")
DORY_RANGE = (0, 255)


def _pow2(q):
    return q > 0 and q & (q - 1) == 0


class NemoParser(IntegerParser):
    dialect = "nemo"
    rounding = "floor"
    default_input = "uint8"
    supported = ("tessera lowers NEMO/DORY graphs: Conv/Gemm/MatMul, MaxPool/AveragePool, residual Add, "
                 "each followed by Mul/Add/Div/Floor/Cast/Clip chains, Pad before Conv or MaxPool, Flatten/Reshape")

    def __init__(self, g, builder, input_types=None):
        super().__init__(g, builder, input_types)
        self.tail_nodes = []

    # ---- the requantization chain ----------------------------------------------

    def _operand(self, node, t):
        """The constant operand of a binary node whose other input is t."""
        other = [i for i in node.input if i != t]
        if len(node.input) != 2 or len(other) != 1 or not self.is_const(other[0]):
            return None
        return self.int_const(node, other[0], f"{node.op_type} operand")

    def finish_acc(self, acc):
        b = self.b
        mul, add = np.array(acc.alpha, dtype=np.int64), np.array(0, dtype=np.int64)
        bias = None
        if acc.offset is not None:
            if acc.takes_bias and acc.alpha == 1:
                bias = self.bias_array(acc, acc.offset)
            else:
                add = acc.offset
        den, rounded = acc.den, None
        p = self.g.producer.get(acc.out)             # is_int: the ONNX tensor is an integer type
        is_int = p is not None and p.op_type == "Cast" and attrs(p).get("to") in INT_TYPES
        lo, hi, clipped = -math.inf, math.inf, False
        t, nodes, follows = acc.out, [], False
        while True:
            u = self.single_user(t)
            if u is None:
                break
            op = u.op_type
            open_chain = rounded is None and not clipped
            if (not open_chain and op in ("Mul", "Div") and self._operand(u, t) is not None
                    and not self._scales_add(u)):
                follows = True        # a requantization chain of its own (see _standalone)
                break
            if op == "Mul" and open_chain and (k := self._operand(u, t)) is not None:
                mul, add = mul * k, add * k
            elif op == "Add" and open_chain and (k := self._operand(u, t)) is not None:
                add = add + k * den
            elif op == "Div" and open_chain and u.input[0] == t and self.is_const(u.input[1]):
                q = self.int_const(u, u.input[1], "divisor")
                if q.size != 1 or int(q.reshape(())) <= 0:
                    raise FrontendError(self.where(u), f"division by {q.reshape(-1)[:4].tolist()}, not one "
                                        "positive integer", "divide the whole tensor by one positive constant")
                den *= int(q.reshape(()))
                if is_int:        # integer Div truncates (see the module doc)
                    rounded = "trunc"
            elif op == "Floor":
                rounded = rounded or "floor"
            elif op == "Cast":
                to = attrs(u).get("to")
                if to in INT_TYPES:
                    if den > 1 and rounded is None:
                        rounded = "trunc"
                    is_int = True
                elif to in FLOAT_TYPES:
                    is_int = False
                else:
                    raise FrontendError(self.where(u), f"Cast to ONNX type {to}", "cast to an integer or float type")
            elif op in ("Clip", "Relu"):
                c_lo, c_hi = self._clip(u)
                lo, hi, clipped = max(lo, c_lo), min(hi, c_hi), True
            else:
                break
            self.claim(u)
            nodes.append(u)
            t = u.output[0]
        where = self.where(nodes[-1] if nodes else acc.node)
        if den > 1 and rounded is None:
            raise FrontendError(where, f"the value is divided by {den} but never floored",
                                "end the requantization chain with Floor (or an integer Div)")
        sources = acc.sources + [n.name for n in nodes]
        if not nodes and acc.den == 1:
            # no chain at all: the int32 accumulator (plus bias) is the output
            if acc.alpha != 1 or (acc.offset is not None and bias is None):
                raise FrontendError(where, f"Gemm alpha={acc.alpha} on an accumulator that is not "
                                    "requantized", "fold alpha into the weights")
            y = self.new_act(t, acc.shape, "int32", acc.layout, where)
            acc.emit(y, None, bias, sources)
            return
        # a bound the graph leaves open is DORY's: its activations are uint8
        # and its kernels saturate to [0, 255]
        lo = DORY_RANGE[0] if math.isinf(lo) else lo
        hi = DORY_RANGE[1] if math.isinf(hi) else hi
        lo, hi = int(math.ceil(lo)), int(math.floor(hi))
        if rounded == "trunc" and lo < 0:
            raise FrontendError(where, f"an integer Div truncates toward zero, which differs from floor "
                                f"for negative values, and the clamp's lower bound is {lo}",
                                "clip at 0 or above after the division, or divide in float and Floor")
        dtype = dtype_for(lo, hi)
        y = self.new_act(t, acc.shape, dtype, acc.layout, where)
        rq = self._requant(acc, y, mul, add, den, lo, hi, where)
        bias = self._fit_int32(acc, rq, bias, where)
        acc.emit(y, rq, bias, sources)
        if follows:
            self._standalone(t)

    def _scales_add(self, node):
        """Does this Mul scale an operand of a residual Add (through Casts)?"""
        while node is not None and node.op_type in ("Mul", "Cast"):
            node = self.single_user(node.output[0])
        return node is not None and node.op_type == "Add" and not any(self.is_const(i) for i in node.input)

    def _standalone(self, t):
        """A chain (Mul, Div, Floor, Clip) after a finished one, e.g. after a
        residual Add's Floor: DORY's own layer (an out_layerN file of its
        own), tessera's elementwise requantization (a 1x1 average pool)."""
        x = self.ir[t]
        tx = self.b.tensors[x]
        u = self.single_user(t)
        shape = list(self.shape(t))

        def emit(y, rq, bias, sources):
            self.b.avgpool_int(u.name or "requant", x, y, [1, 1], [1, 1], rq, self.where(u), sources)

        self.finish_acc(Acc(u, t, shape, self.layout[x], emit, takes_bias=False,
                            acc_range=INT_RANGES[tx.source_dtype], sources=[]))

    def _clip(self, node):
        if node.op_type == "Relu":
            return 0, math.inf
        a = attrs(node)
        lo, hi = a.get("min", -math.inf), a.get("max", math.inf)
        for i, name in ((1, "min"), (2, "max")):
            if len(node.input) > i and node.input[i]:
                v = self.const(node.input[i])
                if v.size != 1:
                    raise FrontendError(self.where(node), f"Clip {name} is a tensor of shape {list(v.shape)}, "
                                        "not a scalar", "give Clip scalar bounds")
                if i == 1:
                    lo = float(v.reshape(()))
                else:
                    hi = float(v.reshape(()))
        for v in (lo, hi):
            if math.isnan(v) or not math.isinf(v) and v != int(v):
                raise FrontendError(self.where(node), f"Clip bound {v} is not an integer")
        if lo > hi:
            raise FrontendError(self.where(node), f"Clip bounds min {lo} > max {hi}", "re-export the model")
        return lo, hi

    def _requant(self, acc, y, mul, add, den, lo, hi, where):
        b = self.b
        if _pow2(den):
            (mul_l, add_l), shape = self.hwc_params(acc, [mul, add], "requantization")
            return b.int_requant(y, mul_l, add_l, [den.bit_length() - 1], "floor", lo, hi, shape)
        m, a = np.unique(np.asarray(mul)), np.unique(np.asarray(add))
        if acc.den > 1 and m.size == 1 and a.size == 1:
            # a pool over a window whose area is not a power of two: a
            # multiply and shift, exact over the window sums it can reach
            try:
                mul_p, add_p, shift, k = exact_divider(int(m[0]), int(a[0]), den, *acc.acc_range)
            except ValueError:
                pass
            else:
                rq = b.int_requant(y, [mul_p], [add_p], [shift], "floor", lo, hi)
                rq.zero_point -= k
                return rq
        # den = 2**s * q, q odd (NEMO divides by 2**d - 1): the shift, then
        # the exact floor division by q (Requant.divisor)
        s = (den & -den).bit_length() - 1
        (mul_l, add_l), shape = self.hwc_params(acc, [mul, add], "requantization")
        rq = b.int_requant(y, mul_l, add_l, [s], "floor", lo, hi, shape)
        rq.divisor = den >> s
        # the kernels divide in 32 bits what is left after the clamp (kernels.h)
        if (rq.hi - rq.lo + 1) * rq.divisor > 1 << 32:
            raise FrontendError(where, f"division by {den} (odd factor {rq.divisor}) into a {hi - lo + 1}-value "
                                "range: tessera's kernels divide by 2^d - 1 below 2^24 into 8-bit outputs",
                                "clip the chain's output to 8 bits")
        return rq

    def _fit_int32(self, acc, rq, bias, where):
        """The kernels hold mul and add in 32 bits. An add beyond that
        (lambda * m of a large batch-norm offset) moves into the
        accumulator's bias, exactly: acc * mul + add = (acc + b) * mul +
        (add - b * mul) with b = floor(add / mul). Returns the bias."""
        lim = 1 << 31
        if any(not -lim <= v < lim for v in rq.mul):
            narrow_multiplier(rq, acc.acc_range)
        if any(not -lim <= v < lim for v in rq.mul):
            big = next(v for v in rq.mul if not -lim <= v < lim)
            raise FrontendError(where, f"requantization multiplier {big} does not fit 32 bits",
                                "tessera's kernels multiply by an int32 (rescale the chain's Mul constants)")
        if all(-lim <= v < lim for v in rq.add):
            return bias
        big = next(v for v in rq.add if not -lim <= v < lim)
        if not acc.takes_bias or rq.shape is not None or any(v <= 0 for v in rq.mul):
            raise FrontendError(where, f"requantization additive term {big} does not fit 32 bits",
                                "tessera's kernels add an int32 after the multiply: rescale the chain")
        channels = max(len(rq.mul), len(rq.add))
        mul = np.broadcast_to(np.asarray(rq.mul, dtype=np.int64), (channels,))
        add = np.broadcast_to(np.asarray(rq.add, dtype=np.int64), (channels,))
        moved = add // mul
        # the accumulator stays within int32 with 2**30 to spare for the sum
        # of products (8-bit inputs and weights: 2**30 / (255 * 128) terms)
        if np.any(np.abs(moved) >= 1 << 30):
            raise FrontendError(where, f"requantization additive term {big} does not fit 32 bits, nor "
                                "does it as an accumulator bias", "rescale the chain")
        rq.add = [int(v) for v in add - moved * mul]
        rq.mul = [int(v) for v in mul] if len(rq.mul) > 1 else rq.mul
        return moved if bias is None else bias + moved

    # ---- ops -----------------------------------------------------------------

    def op_Add(self, node):
        """A residual Add: both operands are activations, each maybe scaled
        by a constant Mul first."""
        if any(self.is_const(i) for i in node.input):
            raise FrontendError(self.where(node), "Add of a constant outside a requantization chain",
                                "constants are added only in the chain after Conv/Gemm/MatMul")
        xs, muls, pre = [], [], []
        for name in node.input:
            m, x, chain = self._prescaled(node, name)
            xs.append(x)
            muls.append(m)
            pre += chain
        for x in xs:
            self.eight_bit(node, x)
        if self.layout[xs[0]] != self.layout[xs[1]]:
            raise FrontendError(self.where(node), "Add of a feature map and a matrix")
        ta = self.b.tensors[xs[0]]
        shape = list(ta.source_shape)

        def emit(y, rq, bias, sources):
            self.b.add_int(node.name or "add", xs[0], xs[1], y, muls, rq, self.where(node), sources)

        self.finish_acc(Acc(node, node.output[0], shape, self.layout[xs[0]], emit, takes_bias=False,
                            sources=[n.name for n in pre] + [node.name]))

    def _prescaled(self, node, name):
        """(multiplier, IR tensor, nodes) for an Add operand: an activation
        through Mul-by-constant and Cast nodes."""
        m, chain = 1, []
        while name not in self.ir:
            p = self.g.producer.get(name)
            if p is None or len(self.consumers(name)) != 1:
                return m, self.act(node, name), chain
            if p.op_type == "Mul":
                ins = [i for i in p.input if not self.is_const(i)]
                k = self._operand(p, ins[0]) if len(ins) == 1 else None
                if k is None or k.size != 1:
                    raise FrontendError(self.where(p), "the operand of a residual Add is scaled by a "
                                        "non-scalar or non-constant factor", "scale each Add input by one integer")
                m *= int(k.reshape(()))
                name = ins[0]
            elif p.op_type == "Cast" and attrs(p).get("to") in INT_TYPES | FLOAT_TYPES:
                name = p.input[0]
            else:
                return m, self.act(node, name), chain
            chain.append(p)
            self.claim(p)
        return m, self.ir[name], chain

    def op_MaxPool(self, node):
        super().op_MaxPool(node)
        self._absorb_noops(node.output[0])

    def _absorb_noops(self, t):
        """Cast/Floor and non-restricting Clip after a max pool change nothing."""
        x = self.ir[t]
        lo, hi = INT_RANGES[self.b.tensors[x].source_dtype]
        while (u := self.single_user(t)) is not None:
            if u.op_type == "Cast" and attrs(u).get("to") in INT_TYPES | FLOAT_TYPES or u.op_type == "Floor":
                pass
            elif u.op_type in ("Clip", "Relu"):
                c_lo, c_hi = self._clip(u)
                if c_lo > lo or c_hi < hi:
                    raise FrontendError(self.where(u), "Clip after a max pool that restricts its range",
                                        "tessera's max pool has no requantization")
            else:
                return
            self.claim(u)
            t = u.output[0]
            self.ir[t] = x

    # ---- outputs: float post-processing is not part of the integer network ----

    def op_view(self, node):
        """A view of a tail op's output (Gather -> Unsqueeze) is part of the
        tail: left to output_sources (or reported unclaimed if it is not)."""
        p = self.g.producer.get(node.input[0])
        if node.input[0] not in self.ir and p is not None and p.op_type in TAIL_OPS:
            self.claimed.discard(id(node))
            return
        super().op_view(node)

    def output_sources(self):
        g = self.g
        out = []
        for name in g.output_names:
            t, tail = name, []
            while t not in self.ir:
                p = g.producer.get(t)
                if p is None or p.op_type not in TAIL_OPS:
                    break
                tail.append(p)
                t = p.input[0]
            if t in self.ir and tail:
                for p in tail:
                    self.claim(p)
                self.tail_nodes += tail
            out.append(t if t in self.ir else name)
        return out


def exact_divider(mul, add, den, acc_lo, acc_hi):
    """(M, A, S, K) with floor((acc * mul + add) / den) == ((acc * M + A) >> S) - K
    for every integer acc in [acc_lo, acc_hi] (Granlund-Montgomery: with
    v = acc * mul + add + K * den >= 0, m = ceil(2**S / den), e = m * den - 2**S,
    floor(v * m / 2**S) = floor(v / den) whenever e * v < 2**S)."""
    ends = [acc_lo * mul + add, acc_hi * mul + add]
    vmin, vmax = min(ends), max(ends)
    k = -(vmin // den) if vmin < 0 else 0
    vtop = vmax + k * den
    for s in range(0, 63):
        m = -(-(1 << s) // den)
        e = m * den - (1 << s)
        if e * max(vtop, 1) < (1 << s):
            if abs(mul * m) * max(abs(acc_lo), abs(acc_hi)) + abs((add + k * den) * m) >= 1 << 62:
                break
            return mul * m, (add + k * den) * m, s, k
    raise ValueError(f"division by {den} has no exact 64-bit multiplier over the accumulator range")


def narrow_multiplier(rq, acc_range=(None, None)):
    """Rewrites rq in place with every multiplier below 2**31 where an exact
    equivalent exists. y = clamp(floor((acc * M + A) / (2**S * q)) + zp, lo,
    hi) (q the odd divisor, 1 without) is a monotone step function of acc,
    fixed by the first acc reaching each output value t (its threshold). A
    plain (M', A', S') gives the same y for every reachable acc when it
    crosses each t at the same acc; for a given M', S' the A' that do form
    an interval. Leaves rq as it is (the caller then refuses the layer) when
    some channel has no such triple, or rq is not a floor requantization."""
    if rq.rounding != "floor" or rq.shape is not None:
        return
    q = rq.divisor or 1
    lo_acc = -(1 << 31) if acc_range[0] is None else int(acc_range[0])
    hi_acc = (1 << 31) - 1 if acc_range[1] is None else int(acc_range[1])
    n = max(len(rq.mul), len(rq.add), len(rq.shift))
    pick = lambda a, c: int(a[c if len(a) > 1 else 0])
    out = []
    for c in range(n):
        m, a, s = pick(rq.mul, c), pick(rq.add, c), pick(rq.shift, c)
        if m < 1 << 31 and q == 1:
            out.append((m, a, s))
            continue
        found = None
        if m > 0:
            found = _narrow_one(m, a, s, q, rq.lo - rq.zero_point, rq.hi - rq.zero_point, lo_acc, hi_acc)
        if found is None:
            return
        out.append(found)
    rq.mul = [v[0] for v in out]
    rq.add = [v[1] for v in out]
    rq.shift = [v[2] for v in out]
    rq.divisor = None


def _narrow_one(m, a, s, q, v_lo, v_hi, acc_lo, acc_hi):
    """(M', A', S') with 0 < M' < 2**31 and clamp((acc * M' + A') >> S',
    v_lo, v_hi) == clamp(floor((acc * m + a) / (2**s * q)), v_lo, v_hi) for
    every acc in [acc_lo, acc_hi], m > 0; None when there is none."""
    den = q << s
    need = []   # (acc, t, +1): the output reaches t at acc; (acc, t, -1): it is below t
    for t in range(v_lo + 1, v_hi + 1):
        th = -((a - t * den) // m)           # ceil((t * den - a) / m)
        if th > acc_lo:                      # a threshold clipped to the range bounds one end only
            need.append((min(th, acc_hi + 1) - 1, t, -1))
        if th <= acc_hi:
            need.append((max(th, acc_lo), t, +1))
    for s2 in range(0, 63):
        base = (m << s2) // den
        if base >= 1 << 31:
            break
        for m2 in (base, base + 1):
            if not 0 < m2 < 1 << 31:
                continue
            # acc * m2 + a2 >= t << s2 where it reaches t, < t << s2 where below
            a_lo = max([(t << s2) - x * m2 for x, t, k in need if k > 0], default=-(1 << 62))
            a_hi = min([(t << s2) - x * m2 - 1 for x, t, k in need if k < 0], default=1 << 62)
            if a_lo <= a_hi:
                return m2, min(max(0, a_lo), a_hi), s2
    return None

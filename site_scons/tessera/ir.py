"""tessera's intermediate representation: layers, tensors, requantization.

Every input dialect (ONNX QDQ, QOperator, NEMO/DORY, QuantLib/Deeploy) lowers
to this, and everything after the frontend (golden model, tiler, planner,
codegen) reads only this. docs/ir.md states the arithmetic exactly; the
golden model (tessera.golden) is its executable form.

Conventions
- Activations are HWC, batch 1: every tensor shape is [H, W, C].
- 8-bit activations are stored as int8. A tensor whose source dtype is uint8
  is stored shifted: stored = source - 128 (`Tensor.shift` = 128), so all
  kernels are signed-int8 kernels. The network's entry point converts.
- Accumulator outputs (a layer without requantization) are int32.
- Weights: conv2d [Co, kh, kw, Ci]; depthwise [kh, kw, C]; pointwise and
  linear [Co, K] (linear K in HWC order of its input). int8, symmetric.
- Bias: int32, one per output channel [Co]; or, for a Gemm whose C operand
  is a full [M, N] matrix, one per output element, shaped like the output
  [H, W, Co] (acc[h, w, c] += bias[h, w, c]; `Layer.bias_shape` says so).
- matmul (a product of two activations: attention's Q.K^T and P.V,
  QuantLib's MatMul of two non-constant operands): a [Bt, M, K] (batches
  as H, rows as W, K as C) times b [Bb, K, N] (Bb = Bt, or 1: one matrix
  for every batch) -> [Bt, M, N]; with `trans_b` b is stored [Bb, N, K]
  (each output column's K values contiguous, as a K tensor before its
  transpose: Q.K^T reads K itself); it has no weights.
- Token-major tensors (a transformer's [tokens, features]) are [1, T, F]
  (or [T', T, F] for batched heads): tokens are pixels, features channels,
  so linear layers on them are pointwise layers and run on the fast paths.
- Source layout (integer dialects, NEMO and QuantLib): every tensor
  records how its ONNX array maps to the stored [H, W, C] array:
  `source_layout` "chw" (channel first, NCHW/NCL/NC: reshape to [C, H, W],
  transpose to [H, W, C]) or "hwc" (channel last, the rows of a
  MatMul/Gemm operand, [M, K] -> [1, M, K], [B, M, K] -> [B, M, K]: reshape
  to [H, W, C]), and `source_shape` its ONNX shape (for a graph output,
  the output's). The entry point converts graph inputs and outputs with
  them. Unset (None, the other dialects) means "chw"; unset fields are not
  written to graph.json.
"""

from dataclasses import dataclass, field, asdict
from typing import Optional

OPS = ("conv2d", "depthwise", "pointwise", "linear", "add", "maxpool", "avgpool", "matmul",
       "mul", "concat", "resize", "lut", "softmax", "transpose", "reshape", "gather", "layernorm", "argmax",
       "lstm")
# Ops computed on whole tensors in L1 (not tiled): their inputs differ in
# shape (broadcast, concatenation), or every output reads a whole row of
# input (softmax, layernorm, resize), or an output block reads a box of the
# input that is not the output's own (the data movements transpose,
# reshape, gather), or the layer carries state across its whole sequence
# (lstm). The tiler gives them one tile, blocks of rows or channels, or a
# fit error.
WHOLE_OPS = ("concat", "resize", "softmax", "transpose", "reshape", "gather", "layernorm", "argmax", "lstm")
# Ops that only move int8 values (no arithmetic, no requantization): the
# output has the input's quantization.
MOVEMENT_OPS = ("transpose", "reshape", "gather")
# softmax's integer algorithms (Layer.mode): tessera's exponential table
# (None: QDQ/QOperator, and TFLite's with rounding "tflite") and Deeploy's
SOFTMAX_MODES = (None, "isoftmax", "itamax", "itapartialmax")
# layernorm's: tessera's exact normalization then a per-channel requant
# ("int": QDQ LayerNormalization) and Deeploy's iLayerNorm
LAYERNORM_MODES = ("int", "ilayernorm")
# fixed-point fraction bits of resize's interpolation weights
RESIZE_FRAC = 11
# "tflite" and "tflite_div" reproduce TFLite's integer kernels (see Requant)
ROUNDING = ("half_up", "floor", "tflite", "tflite_div")
DTYPES = {"int8": 1, "int32": 4}


@dataclass
class Tensor:
    name: str
    shape: list                 # [H, W, C]
    dtype: str = "int8"         # storage: int8 | int32
    shift: int = 0              # source value = stored value + shift (128 for uint8 sources)
    source_dtype: str = "int8"  # dtype in the source graph: int8 | uint8 | int32 | ...
    scale: Optional[float] = None       # real value = scale * (source - zero_point), if known
    zero_point: Optional[int] = None    # in the source dtype
    source_layout: Optional[str] = None  # "chw" | "hwc" (see the module doc); None: chw
    source_shape: Optional[list] = None  # its ONNX shape (a graph output: the output's)

    @property
    def size(self):
        h, w, c = self.shape
        return h * w * c

    @property
    def nbytes(self):
        return self.size * DTYPES[self.dtype]


@dataclass
class Requant:
    """acc (int32) -> output, per output channel c:

        y = clamp(((acc * mul[c] + add[c] + R) >> shift[c]) + zero_point, lo, hi)

    computed in 64-bit, `>>` arithmetic (floor), R = 1 << (shift[c] - 1) for
    rounding "half_up" (0 when shift is 0) and R = 0 for "floor". Arrays of
    length 1 apply to every channel. zero_point, lo, hi are in the stored
    (int8) domain; lo/hi are the int32 range for an int32 output.

    `shape` (None unless needed): parameters that vary along H or W as well
    (a Gemm requantized per row, or folding a Gemm's full C matrix). Then
    every array longer than 1 holds prod(shape) values laid out as `shape`
    ([h, w, c], each 1 or the output's size) and broadcast over the output:
    y[i, j, c] uses mul[i % h', j % w', c % c'] (a size-1 axis repeats).

    `divisor` (None unless needed; rounding "floor" only): an odd constant
    the shifted value is also divided by, floor((...) >> shift) / divisor,
    for NEMO chains that divide by 2**d - 1. It comes before the zero point:

        y = clamp(floor(((acc * mul[c] + add[c]) >> shift[c]) / divisor) + zero_point, lo, hi)

    `add_shift` (None unless needed): add[c] counts units of 2^add_shift
    (the 64-bit term of a bias wider than 32 bits, kept in 32-bit arrays):
    the add above is add[c] << add_shift.

    `neg_mul`, `neg_shift` (None unless needed; one value each, rounding
    "half_up" or "floor"): the multiplier and shift of a negative
    accumulator, a LeakyRelu folded into the requantization (a Conv ->
    LeakyRelu -> Q island of a Vitis-quantized export):

        y = clamp(((acc * (acc < 0 ? neg_mul : mul[c]) + add[c] + R) >> (acc < 0 ? neg_shift : shift[c])) + zp, lo, hi)

    TFLite's arithmetic (models from a .tflite file) has two more rules:
    "tflite": y = clamp(RDBPOT(SRDHM(acc << l, mul), r) + zero_point, lo, hi)
    with the exponent e = 31 - shift split as l = max(e, 0), r = max(-e, 0)
    (so mul / 2^shift is still the real multiplier), SRDHM gemmlowp's
    saturating rounding doubling high multiply ((x * mul + nudge) / 2^31,
    nudge 2^30, or 1 - 2^30 below zero, the division toward zero: halves
    round up) and RDBPOT its rounding divide by 2^r (halves away from zero):
    two roundings, as TFLite's MultiplyByQuantizedMultiplier; acc is int32.
    add must be 0.
    "tflite_div": y = clamp(sign(acc) * ((|acc| + mul // 2) // mul) + zero_point, lo, hi),
    TFLite's average pooling: the window sum divided by the count (mul),
    rounded half away from zero; shift and add are 0.
    """
    mul: list
    add: list
    shift: list
    rounding: str = "half_up"
    zero_point: int = 0
    lo: int = -128
    hi: int = 127
    shape: Optional[list] = None
    divisor: Optional[int] = None
    neg_mul: Optional[list] = None
    neg_shift: Optional[list] = None
    add_shift: Optional[int] = None

    def channel(self, values, c):
        return values[c] if len(values) > 1 else values[0]


@dataclass
class Layer:
    """One canonical op.

    conv2d / depthwise / pointwise / linear:
        acc[c] = bias[c] + sum((x + input_offset) * (w + weight_offset))   over the window;
        padded positions contribute 0 (they hold the value -input_offset).
        weight_offset (None: 0) is for asymmetric uint8 weights (TF1-style
        TFLite models: stored w = w_u8 - 128, weight_offset = 128 - zp_w),
        whose values w_u8 - zp_w span up to 9 bits.
    avgpool:  acc = sum(x + input_offset) over the window (no padding).
              A 1x1 avgpool is an elementwise requantization (QuantLib's
              standalone RequantShift lowers to it).
    conv2d and depthwise take `dilation` [dh, dw] (None: [1, 1]): window tap
              (i, j) reads input row oh * sh - pad_top + i * dh (columns alike);
              the effective kernel is d * (k - 1) + 1.
    maxpool:  y = max(x) over the window, padded positions ignored; no requant.
    add:      acc = (a + in_offset[0]) * in_mul[0] + (b + in_offset[1]) * in_mul[1]
              (64-bit before requantization). With `in_shift` set (TFLite's
              ADD, requant rounding "tflite"): each input is rescaled first,
              acc = T((a + in_offset[0]) << 20, in_mul[0], in_shift[0])
                  + T((b + in_offset[1]) << 20, in_mul[1], in_shift[1])
              in int32, T the "tflite" multiply (see Requant) without the
              zero point and clamp.
    matmul:   acc[t, m, n] = sum_k (a[t, m, k] + in_offset[0]) * (b[t', k, n] + in_offset[1])
              with t' = t, or 0 when b holds one matrix (inputs [a, b]);
              `trans_b`: b[t', n, k] instead.
    mul:      acc = (a + in_offset[0]) * (b + in_offset[1]), numpy broadcasting
              over [H, W, C] (an axis of size 1 repeats: squeeze-and-excitation
              [H, W, C] * [1, 1, C]); add broadcasts the same way.
    concat:   inputs joined along `axis` (0, 1, 2 of HWC; 2 = channels),
              input i first rescaled: acc = (x_i + in_offset[i]) * in_mul[i],
              then requant (one shift, zero point, clamp for all inputs).
    resize:   `table` holds Ho triples (y0, y1, fy) then Wo triples
              (x0, x1, fx): output (i, j) interpolates input rows y0, y1 and
              columns x0, x1 with weights in RESIZE_FRAC fraction bits
              (F = 2**RESIZE_FRAC; nearest: f = 0, y1 = y0):
                acc = sum over (r, wr) in ((y0, F - fy), (y1, fy)),
                              (q, wq) in ((x0, F - fx), (x1, fx)) of
                      wr * wq * (x[r, q, c] + input_offset)
              then requant (its mul/shift include the 2**-2*RESIZE_FRAC).
              The coordinate rule (ONNX coordinate_transformation_mode,
              nearest_mode) is the frontend's; the table is its result.
    lut:      y[h, w, c] = table[t * 256 + x[h, w, c] + 128], t = c when the
              table holds one 256-entry row per channel (PRelu), else 0.
              Any int8 -> int8 function: the frontend computes the table at
              build time exactly as the source framework rounds it. No requant.
              A per-channel table may be the layer's `weights` instead
              ([C, 256] int8, table None; the builder puts every one there):
              constants in the weight level, each channel tile's rows loaded
              with it, as a depthwise's weights (a table per channel of a
              640-channel ADD is 160 kB, more than a program's code room).
    softmax:  over the channels of each pixel, with `table` the 256 int32
              values E[d] (d = max_c x - x[c], 0..255; E[d] * mul[0] and
              C * max(E) << shift[0] below 2**63, which the golden model checks):
                s = sum_c E[max - x[c]]            (64-bit)
                y[c] = clamp(zero_point + (E[max - x[c]] * mul[0] + (s << (shift[0] - 1)))
                             // (s << shift[0]), lo, hi)   (floor division, all >= 0)
              i.e. round half up of E/s * mul / 2**shift; with mul = 2**shift / s_y
              this quantizes the probability to the output scale. Only
              requant's mul[0], shift[0], zero_point, lo, hi are used.
              With requant rounding "tflite" (TFLite's reference int8
              softmax, golden/gemmlowp.py): table holds E[d] in Q0.31, the
              row's s = sum RDBPOT(E, 12) (int32), R its gemmlowp reciprocal
              (one_over_one_plus_x of s normalized by its leading zeros z)
              and y = clamp(RDBPOT(SRDHM(R, E[max - x]), 35 - z) + zero_point, lo, hi);
              mul and shift are unused.
              Deeploy's integer softmaxes (`mode`, requant None, the output
              the uint8 probability n * 255 / s stored shifted), per row of
              C values, m = max x (x the source values), C arithmetic:
              "isoftmax" (table [A, B, C0, log2, levels], I-BERT's
              polynomial): d = x - m, z = min(-d // log2, 31), p = d + z * log2,
                e = (A * (p + B)**2 + C0) >> z, y = e * (levels - 1) // sum(e)
              "itamax" (table [levels]): k = (m - x + 16) >> 5,
                y = ((levels - 1) * 256 // sum(256 >> k)) >> k
              "itapartialmax" (table [group, levels]): ITA's streaming form,
                the sum built group by group, each running max rescaling it
                (k of the new max over the old), y = ((levels / 2 - 1) * 256 // s) >> k
              The frontend checks every intermediate stays in the 32-bit
              unsigned range the C kernels compute in.
    transpose: y = x.transpose(perm), `perm` a permutation of (0, 1, 2)
              over x's [H, W, C]: y.shape[k] = x.shape[perm[k]] (a TFLite
              or ONNX transpose of any rank is one of these on a grouping of
              its axes; HWC -> CHW is perm [2, 0, 1]). With `dims`, x is
              first viewed row-major as dims (three axes: an integer
              dialect's head split [T, h * d] -> [h, T, d] is dims [T, h, d],
              perm [1, 0, 2], whatever x's own [H, W, C]) and y keeps its
              own shape.
    reshape:  y = x.reshape(y.shape): the same values in the same (HWC,
              row-major) order, another [H, W, C] (a flat KWS input viewed
              as a spectrogram, a head split). The frontends use it only
              where the consumer needs the new shape; a reshape into a
              fully connected layer is no layer at all.
    gather:   y = take(x, table, axis): `table` holds the indices along
              HWC `axis` (2: channels, as a channel shuffle or a SPLIT of
              channels; 0, 1: rows or columns, as a strided slice); an index
              -1 gives the stored value `fill` (a PAD of channels).
    transpose, reshape and gather move int8 values: no requant, and y has
    x's quantization.
    layernorm: over the C channels of each pixel (a token's features).
              mode "int": with xo = x + input_offset, N = C,
                S1 = sum xo, S2 = sum xo**2, D = ((N * S2 - S1**2) << 16) + table[0]
                (table[0] >= 1 holds 2**16 * N**2 * eps / s_x**2, rounded:
                D is 2**16 N**2 (var + eps) in the input's steps),
                f = (62 - bitlength(D)) // 2, S = isqrt(D << 2f), R = 2**62 // S
                (R / 2**(62 - f) ~ 1 / sqrt(D) to 30 bits), sh = 38 - f,
                acc[c] = ((N * xo[c] - S1) * R + 2**(sh - 1)) >> sh
              the normalized value in Q16 (|acc| < 2**23 for N <= 4096), then
              requant per channel (mul = gamma/s_y, add = beta/s_y in fixed
              point). Exact integers; within 1 LSB of the float LayerNorm.
              mode "ilayernorm" (Deeploy's iLayerNorm, table = weight [C] +
              bias [C], requant.shift[0] = log2 D, lo/hi the clamp; requant's
              mul/add unused): m = trunc(sum xo / N), t = xo - m,
                std = isqrt(trunc(sum t**2 / N) + 1),
                y = clamp((trunc(t * weight[c] / std) + bias[c]) >> shift, lo, hi)
    argmax:   y[h, w, 0] = the first c with x[h, w, c] the largest (int32; a
              segmentation map's classes). No requant.
    lstm:     a recurrent layer over a sequence: input [1, T, F] (time along W),
              output [1, T, n_output], every step's hidden state; `rnn`
              holds its parameters and where each of its arrays sits in its
              one int8 `weights` array (golden.recurrent.pack); the
              arithmetic per step is golden/recurrent.py's (cell "lstm":
              TFLite's integer LSTM, int8 input, weights and hidden state,
              int16 gates and cell state, gemmlowp's 16-bit logistic and
              tanh, with or without input gate, peephole and projection;
              "ops": an unrolled step's plain ops; "onnx_lstm", "onnx_gru":
              ONNX Runtime's float step between Q/DQ in fixed point). The
              state starts at zero (real) for every inference. No requant.
    add, avgpool and maxpool also read int32 tensors (accumulators of a
    layer without requantization); maxpool's output has its input's dtype.
    Then `requant` turns acc into the int8 output, or, when None, the output
    is acc itself as int32.
    """
    name: str
    op: str
    inputs: list
    output: str
    kernel: list = field(default_factory=lambda: [1, 1])
    stride: list = field(default_factory=lambda: [1, 1])
    pad: list = field(default_factory=lambda: [0, 0, 0, 0])   # top, left, bottom, right
    input_offset: int = 0
    weights: Optional[str] = None    # key in weights.npz
    bias: Optional[str] = None       # key in weights.npz (int32, one per output channel)
    bias_shape: Optional[list] = None  # [H, W, C] when the bias is per output element
    in_mul: list = field(default_factory=list)      # add only
    in_offset: list = field(default_factory=list)   # add only
    in_shift: Optional[list] = None  # add only: TFLite's per-input rescale (see above)
    requant: Optional[Requant] = None
    source: list = field(default_factory=list)  # names of the source-graph nodes it came from
    digest: str = ""   # digest of its arrays in weights.npz (so a layer's JSON changes with them)
    dilation: Optional[list] = None   # conv2d/depthwise [dh, dw]; None: [1, 1]
    axis: Optional[int] = None        # concat: the HWC axis joined; gather: the axis indexed
    mode: Optional[str] = None        # resize: "nearest" | "bilinear" (documentation; the table decides);
                                      # softmax, layernorm: the algorithm (SOFTMAX_MODES, LAYERNORM_MODES)
    table: Optional[list] = None      # lut, softmax, resize, gather, layernorm: the layer's constants (see above)
    perm: Optional[list] = None       # transpose: output axis k is input axis perm[k]
    dims: Optional[list] = None       # transpose: x viewed row-major as these three axes (None: x's shape)
    trans_b: Optional[int] = None     # matmul: 1 when b is stored [Bb, N, K]
    weight_offset: Optional[int] = None  # conv-like: added to every stored weight (uint8 weights)
    fill: Optional[int] = None        # gather: the stored value at index -1
    rnn: Optional[dict] = None        # lstm: the recurrent step's parameters (golden/recurrent.py)
    # a layer tessera adds that the source toolchain does not count (e.g. the
    # part of a NEMO Pad a convolution cannot take): why; None otherwise
    added: Optional[str] = None


@dataclass
class Graph:
    name: str
    dialect: str
    tensors: dict            # name -> Tensor
    layers: list             # execution order
    inputs: list
    outputs: list
    # what normalization changed (tessera.frontend.normalize): pinned batch,
    # input layouts, float ops left to the application; None: nothing
    notes: Optional[dict] = None

    def tensor(self, name):
        return self.tensors[name]

    def layer(self, name):
        for layer in self.layers:
            if layer.name == name:
                return layer
        raise KeyError(name)

    def producer(self):
        """tensor name -> index of the layer that writes it."""
        return {layer.output: i for i, layer in enumerate(self.layers)}

    def readers(self):
        """tensor name -> indices of the layers that read it, in order (a
        layer reading it twice is listed twice)."""
        out = {}
        for i, layer in enumerate(self.layers):
            for name in layer.inputs:
                out.setdefault(name, []).append(i)
        return out

    def last_use(self):
        """tensor name -> index of the last layer that reads it (outputs: the end)."""
        last = {}
        for i, layer in enumerate(self.layers):
            for name in layer.inputs:
                last[name] = i
        for name in self.outputs:
            last[name] = len(self.layers) - 1
        return last

    def to_json(self):
        return {
            "name": self.name,
            "dialect": self.dialect,
            "inputs": list(self.inputs),
            "outputs": list(self.outputs),
            "tensors": {n: _drop_unset(asdict(t), _OPTIONAL_TENSOR) for n, t in sorted(self.tensors.items())},
            "layers": [_layer_json(layer) for layer in self.layers],
            **({"notes": self.notes} if self.notes else {}),
        }

    @staticmethod
    def from_json(data):
        tensors = {n: Tensor(**t) for n, t in data["tensors"].items()}
        layers = []
        for d in data["layers"]:
            d = dict(d)
            if d.get("requant") is not None:
                d["requant"] = Requant(**d["requant"])
            layers.append(Layer(**d))
        return Graph(data["name"], data["dialect"], tensors, layers,
                     data["inputs"], data["outputs"], data.get("notes"))


# Fields added for the integer dialects: left out of graph.json when unset,
# so graphs from the other dialects serialize exactly as before.
_OPTIONAL_TENSOR = ("source_layout", "source_shape")
_OPTIONAL_REQUANT = ("shape", "divisor", "neg_mul", "neg_shift", "add_shift")
_OPTIONAL_LAYER = ("bias_shape", "in_shift", "dilation", "axis", "mode", "table", "added", "perm", "dims",
                   "trans_b", "weight_offset", "fill", "rnn")


def _drop_unset(d, keys):
    for k in keys:
        if d.get(k) is None:
            d.pop(k, None)
    return d


def _layer_json(layer):
    d = _drop_unset(asdict(layer), _OPTIONAL_LAYER)
    if d.get("requant") is not None:
        _drop_unset(d["requant"], _OPTIONAL_REQUANT)
    return d


def dilation(layer):
    return list(layer.dilation) if layer.dilation else [1, 1]


def effective_kernel(layer):
    """The window's extent in the input: d * (k - 1) + 1 per axis."""
    return [d * (k - 1) + 1 for d, k in zip(dilation(layer), layer.kernel)]


def weight_bytes_per_cout(layer, graph):
    """Bytes of weights per output channel, as the kernels store them."""
    kh, kw = layer.kernel
    if layer.op == "conv2d":
        return kh * kw * graph.tensor(layer.inputs[0]).shape[2]
    if layer.op == "depthwise":
        return kh * kw
    if layer.op == "pointwise":
        return graph.tensor(layer.inputs[0]).shape[2]
    if layer.op == "linear":
        return graph.tensor(layer.inputs[0]).size
    if layer.op == "lut" and layer.weights:
        return 256
    if layer.op == "lstm":   # its packed constants, padded to whole "channels"
        return layer.rnn["bytes"] // layer.rnn["n_output"]
    return 0


def macs(layer, graph):
    """Multiply-accumulates of a layer (adds and pools count one per input element)."""
    out = graph.tensor(layer.output)
    kh, kw = layer.kernel
    if layer.op in ("conv2d", "pointwise"):
        return out.size * kh * kw * graph.tensor(layer.inputs[0]).shape[2]
    if layer.op == "depthwise":
        return out.size * kh * kw
    if layer.op == "linear":
        return out.size * graph.tensor(layer.inputs[0]).size
    if layer.op in ("avgpool", "maxpool"):
        return out.size * kh * kw
    if layer.op in ("add", "mul", "concat", "lut"):
        return out.size
    if layer.op == "resize":
        return out.size * 4
    if layer.op in ("softmax", "layernorm"):
        return out.size * 2
    if layer.op == "transpose":
        return out.size
    if layer.op == "matmul":
        return out.size * graph.tensor(layer.inputs[0]).shape[2]
    if layer.op == "lstm":
        return rnn_macs(layer.rnn)
    return 0


def rnn_macs(rnn):
    """Gate matmuls (input and recurrent), peephole, projection and the
    cell's elementwise products, over every step (a cell of plain ops:
    its linear ops' products and one per element of the others)."""
    if rnn["cell"] == "ops":
        per_step = 0
        for op in rnn["body"]:
            at, n, _ = rnn["layout"][op["weights"]] if op["op"] == "linear" else (0, op["n"], "")
            per_step += n
        return rnn["steps"] * per_step
    if rnn["cell"] in ("onnx_lstm", "onnx_gru"):
        g = 4 if rnn["cell"] == "onnx_lstm" else 3
        return rnn["steps"] * (g * rnn["n_cell"] * (rnn["n_input"] + rnn["n_cell"]) + 3 * rnn["n_cell"])
    g, nc, no = len(rnn["gates"]), rnn["n_cell"], rnn["n_output"]
    per_step = g * nc * (rnn["n_input"] + no) + len(rnn.get("peephole") or "") * nc + 3 * nc
    if rnn.get("projection"):
        per_step += nc * no
    return rnn["steps"] * per_step

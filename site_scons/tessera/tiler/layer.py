"""The tiler's view of a layer: validation and per-op traits.

The layer dict is the canonical projection of one IR layer (see the package
docstring). A malformed one is a bug upstream (frontend or glue), not a user
mistake, so it raises ValueError naming the field.
"""

from ..tiles.geometry import CHANNEL_WISE

OPS = ("conv2d", "depthwise", "pointwise", "linear", "add", "maxpool", "avgpool", "matmul",
       "mul", "lut", "concat", "resize", "softmax", "transpose", "reshape", "gather", "layernorm", "argmax",
       "lstm")
# Ops the tiler does not tile by windows: the whole layer in L1 at once, or
# blocks of channels or rows (`split` "c" / "h", "" for neither), or a fit
# error (`whole` in the layer dict; broadcast add/mul carry it too). Their
# `in_sizes` gives each input's elements.
WHOLE = ("concat", "resize", "softmax", "transpose", "reshape", "gather", "layernorm", "argmax", "lstm")

_INT_FIELDS = ("in_bytes", "out_bytes", "n_inputs", "w_bytes_per_cout",
               "param_bytes_per_cout")
_LIST_FIELDS = {"in": 3, "out": 3, "kernel": 2, "stride": 2, "pad": 4}


def _bad(layer, what):
    return ValueError(f"tiler: layer {layer.get('name', '?')}: {what}")


def check(layer):
    """Raise ValueError unless layer is a consistent canonical layer dict."""
    if not isinstance(layer, dict):
        raise ValueError("tiler: layer must be a dict")
    if not isinstance(layer.get("name"), str):
        raise _bad(layer, "missing string field 'name'")
    op = layer.get("op")
    if op not in OPS:
        raise _bad(layer, f"op {op!r} is not one of {', '.join(OPS)}")
    for key, n in _LIST_FIELDS.items():
        v = layer.get(key)
        if (not isinstance(v, (list, tuple)) or len(v) != n
                or not all(isinstance(x, int) and not isinstance(x, bool) for x in v)):
            raise _bad(layer, f"'{key}' must be a list of {n} ints, got {v!r}")
    for key in _INT_FIELDS:
        v = layer.get(key)
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise _bad(layer, f"'{key}' must be a non-negative int, got {v!r}")
    H, W, C = layer["in"]
    Ho, Wo, Co = layer["out"]
    kh, kw = layer["kernel"]
    sh, sw = layer["stride"]
    top, left, bottom, right = layer["pad"]
    if min(H, W, C, Ho, Wo, Co, kh, kw, sh, sw) < 1:
        raise _bad(layer, "shapes, kernel and stride must be positive")
    if min(top, left, bottom, right) < 0:
        raise _bad(layer, "padding must be non-negative")
    if layer["in_bytes"] < 1 or layer["out_bytes"] < 1:
        raise _bad(layer, "in_bytes and out_bytes must be positive")
    if layer.get("whole"):
        sizes = layer.get("in_sizes")
        if (not isinstance(sizes, list) or len(sizes) != layer["n_inputs"]
                or not all(isinstance(v, int) and v > 0 for v in sizes)):
            raise _bad(layer, "a whole-tensor layer needs in_sizes, one positive int per input")
        if layer.get("split", "") not in ("", "c", "h", "k"):
            raise _bad(layer, f"split must be '', 'c', 'h' or 'k', got {layer.get('split')!r}")
        if layer.get("split") == "k" and layer.get("axis") not in (0, 1, 2):
            raise _bad(layer, "split 'k' (along the concatenation axis) needs the axis")
        return
    if op in WHOLE:
        raise _bad(layer, f"{op} is only computed whole ('whole': 1)")
    # add/mul with a [1, 1, C] operand: it comes as the "weights" (n_inputs 1)
    allowed = (1, 2) if op in ("add", "mul") else (1,)
    if layer["n_inputs"] not in allowed:
        raise _bad(layer, f"n_inputs must be {' or '.join(map(str, allowed))} for {op}")
    if op == "linear":
        if (Ho, Wo) != (1, 1) or (kh, kw) != (1, 1) or any(layer["pad"]):
            raise _bad(layer, "linear must have out [1, 1, Co], kernel [1, 1], no pad")
        return
    # Padding as large as the kernel would make windows of pure padding;
    # no exporter produces that and the kernels do not support it.
    dil = layer.get("dilation", [1, 1])
    if (not isinstance(dil, (list, tuple)) or len(dil) != 2
            or not all(isinstance(d, int) and d >= 1 for d in dil)):
        raise _bad(layer, f"'dilation' must be two positive ints, got {dil!r}")
    if tuple(dil) != (1, 1) and op not in ("conv2d", "depthwise"):
        raise _bad(layer, f"{op} cannot be dilated")
    kh, kw = dil[0] * (kh - 1) + 1, dil[1] * (kw - 1) + 1   # the window's extent
    if top >= kh or bottom >= kh or left >= kw or right >= kw:
        raise _bad(layer, f"padding {layer['pad']} must be smaller than kernel {layer['kernel']}")
    want_h = (H + top + bottom - kh) // sh + 1
    want_w = (W + left + right - kw) // sw + 1
    if H + top + bottom < kh or W + left + right < kw or (Ho, Wo) != (want_h, want_w):
        raise _bad(layer, f"out {layer['out']} does not match in {layer['in']}, kernel, "
                          f"stride and pad (expected [{want_h}, {want_w}, ...])")
    if op in CHANNEL_WISE and Co != C:
        raise _bad(layer, f"{op} must have as many output channels as input channels")
    if op in ("add", "matmul", "mul", "lut") and ((kh, kw) != (1, 1) or (sh, sw) != (1, 1) or any(layer["pad"])):
        raise _bad(layer, f"{op} must have kernel [1, 1], stride [1, 1], no pad")

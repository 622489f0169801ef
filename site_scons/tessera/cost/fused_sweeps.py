"""The fused-step microbenchmarks: small networks of depthwise and pointwise
chains (DW->PW and PW->DW pairs over maps from 120x120 to 3x3, 8 to 512
channels, strides 1 and 2, widths that are not multiples of 8, the largest
maps in many bands) that
tools/fit_cost_model.py builds with fusion=min_latency fusion_cost=measured
on the target's own runner: that build runs each network apart
(variants/none) and with every feasible pair of each kind fused
(variants/all_dw_pw, variants/all_pw_dw), so every feasible pair is one
sample: its layers' counts apart and its count fused (cost/fused_fit.py).

Written like cost.sweeps (tessera.zoo's Net, fixed seed, ONNX Runtime's
quantize_static): same code, same bytes. Apart from cost.sweeps because
those fit the layers; these only the fused steps.
"""

from .sweeps import _dw, _head

SWEEPS = {}


def names():
    return sorted(SWEEPS)


def _sweep(c, h, w):
    def register(fn):
        SWEEPS[fn.__name__.removeprefix("_")] = (c, h, w, fn)
        return fn
    return register


def _pw(net, x, name, cout):
    return net.conv(x, name, cout, 1, act="relu6")


@_sweep(8, 64, 64)
def _fs_v1(net):
    """MobileNetV1 blocks from 64x64x8 to 16x16x64 (the first ones in
    several bands and row blocks)."""
    x = _dw(net, "input", "dw1")
    x = _pw(net, x, "pw1", 16)
    x = _dw(net, x, "dw2", 2)
    x = _pw(net, x, "pw2", 32)
    x = _dw(net, x, "dw3")
    x = _pw(net, x, "pw3", 32)
    x = _dw(net, x, "dw4", 2)
    x = _pw(net, x, "pw4", 64)
    x = _dw(net, x, "dw5")
    x = _pw(net, x, "pw5", 64)
    return _head(net, x)


@_sweep(24, 24, 24)
def _fs_v1w(net):
    """MobileNetV1 blocks with 24 to 200 channels (not multiples of 8),
    24x24 to 6x6."""
    x = _dw(net, "input", "dw1")
    x = _pw(net, x, "pw1", 40)
    x = _dw(net, x, "dw2", 2)
    x = _pw(net, x, "pw2", 72)
    x = _dw(net, x, "dw3")
    x = _pw(net, x, "pw3", 120)
    x = _dw(net, x, "dw4", 2)
    x = _pw(net, x, "pw4", 200)
    x = _dw(net, x, "dw5")
    x = _pw(net, x, "pw5", 200)
    return _head(net, x)


@_sweep(16, 48, 48)
def _fs_v2(net):
    """MobileNetV2 inverted bottlenecks (no adds): expansion pointwise,
    depthwise, projection, 48x48 to 12x12, 16 to 192 channels."""
    x = _pw(net, "input", "pw1", 48)
    x = _dw(net, x, "dw1")
    x = net.conv(x, "pw2", 16, 1)
    x = _pw(net, x, "pw3", 96)
    x = _dw(net, x, "dw2", 2)
    x = net.conv(x, "pw4", 24, 1)
    x = _pw(net, x, "pw5", 144)
    x = _dw(net, x, "dw3")
    x = net.conv(x, "pw6", 32, 1)
    x = _pw(net, x, "pw7", 192)
    x = _dw(net, x, "dw4", 2)
    x = net.conv(x, "pw8", 64, 1)
    return _head(net, x)


@_sweep(64, 25, 5)
def _fs_kws(net):
    """DS-CNN's blocks: 64 channels on 25x5, then 96 and 48."""
    x = _dw(net, "input", "dw1")
    x = _pw(net, x, "pw1", 64)
    x = _dw(net, x, "dw2")
    x = _pw(net, x, "pw2", 64)
    x = _dw(net, x, "dw3")
    x = _pw(net, x, "pw3", 96)
    x = _dw(net, x, "dw4")
    x = _pw(net, x, "pw4", 48)
    return _head(net, x, 12)


@_sweep(64, 12, 12)
def _fs_deep(net):
    """the MobileNets' last blocks: 64 to 384 channels, 12x12 to 3x3."""
    x = _dw(net, "input", "dw1")
    x = _pw(net, x, "pw1", 128)
    x = _dw(net, x, "dw2", 2)
    x = _pw(net, x, "pw2", 256)
    x = _dw(net, x, "dw3")
    x = _pw(net, x, "pw3", 256)
    x = _dw(net, x, "dw4", 2)
    x = _pw(net, x, "pw4", 384)
    x = _dw(net, x, "dw5")
    x = _pw(net, x, "pw5", 384)
    return _head(net, x)


@_sweep(8, 120, 120)
def _fs_wide(net):
    """MobileNetV1 blocks on a large map, 120x120x8 to 60x60x24: pairs in
    more bands (up to about 15 on gap8's L1) than the other sweeps', each
    band re-reading (DW->PW) or recomputing (PW->DW) its halo rows."""
    x = _dw(net, "input", "dw1")
    x = _pw(net, x, "pw1", 16)
    x = _dw(net, x, "dw2", 2)
    x = _pw(net, x, "pw2", 24)
    x = _dw(net, x, "dw3")
    x = _pw(net, x, "pw3", 24)
    return _head(net, x)


def write(name, directory):
    from . import sweeps
    return sweeps.write(name, directory, SWEEPS)

"""The cost model's microbenchmarks: small networks whose layers sweep each
op over channels, kernels, strides and sizes (so tile shapes go from one
whole-layer tile to many small ones), built, run and checked on a target's
own runner like any model. Every layer of them is one sample of its op.

A network per theme rather than one per layer: a build's fixed part
(quantization, ONNX Runtime check, compile, emulator start) would otherwise
cost more than the layers it measures, and each layer's count is reported
on its own anyway. Sizes keep every network within stm32f4's flash and
GAP8's L2, so the same sweep runs on every target.

    write(name, directory) -> the model YAML's path (ONNX beside it)

Same code, same bytes: the float graph comes from tessera.zoo's Net with a
fixed seed and is quantized the zoo's way (ONNX Runtime's quantize_static).
"""

import os

import numpy as np
import yaml

from ..util import canon
from ..zoo.net import Net, same_pads

# name: (input channels, height, width, builder(net) -> last tensor)
SWEEPS = {}

# sweeps a target's fit leaves out: none. (gap8 left cb_pw2 out until the
# features counted the weights streamed from L3 in a layer's window, and the
# fit took the DMA copies' cost from their own counts; docs/cost_model.md.)
NOT_ON = {}


def names_for(target):
    """The sweeps target's fit uses, sorted."""
    return sorted(n for n in SWEEPS if n not in NOT_ON.get(target, ()))


def _sweep(c, h, w):
    def register(fn):
        SWEEPS[fn.__name__.removeprefix("_")] = (c, h, w, fn)
        return fn
    return register


def _head(net, x, classes=10):
    x = net.global_avgpool(x, "pool")
    x = net.flatten(x, "flatten")
    return net.classifier(x, "fc", classes)


@_sweep(3, 64, 64)
def _cb_conv3(net):
    """conv2d: 3, 12, 24, 6 and 32 input channels; 3x3 and 5x5; strides 1, 2."""
    x = net.conv("input", "c0", 16, 3, stride=2, act="relu6")     # the MobileNets' first layer
    x = net.conv(x, "c1", 12, 3, act="relu")
    x = net.conv(x, "c2", 24, 5, stride=2, act="relu")
    x = net.conv(x, "c3", 6, 3, act="relu")
    x = net.conv(x, "c4", 32, 3, stride=2, act="relu")
    x = net.conv(x, "c5", 64, 3, act="relu")
    return _head(net, x)


@_sweep(1, 48, 48)
def _cb_conv1(net):
    """conv2d from 1 and 3 input channels (a spectrogram's first layer), 10x4."""
    x = net.conv("input", "c0", 8, 3, act="relu")
    top, bottom = same_pads(48, 10, 2)
    left, right = same_pads(48, 4, 2)
    x = net.conv(x, "c1", 16, (10, 4), stride=2, pads=[top, left, bottom, right], act="relu")
    x = net.conv(x, "c2", 3, 3, act="relu")
    x = net.conv(x, "c3", 32, 3, act="relu")
    x = net.conv(x, "c4", 48, 3, stride=2, act="relu")
    return _head(net, x)


def _dw(net, x, name, stride=1):
    return net.conv(x, name, net.channels(x), 3, stride=stride, group=net.channels(x), act="relu6")


@_sweep(3, 64, 64)
def _cb_dw(net):
    """depthwise 3x3 over 8, 32 and 96 channels, 32x32 to 8x8, strides 1 and
    2; pointwise between them."""
    x = net.conv("input", "c0", 8, 3, stride=2, act="relu6")
    x = _dw(net, x, "dw1")
    x = net.conv(x, "pw1", 32, 1, act="relu6")
    x = _dw(net, x, "dw2", 2)
    x = _dw(net, x, "dw3")
    x = net.conv(x, "pw3", 96, 1, act="relu6")
    x = _dw(net, x, "dw4")
    x = _dw(net, x, "dw5", 2)
    return _head(net, x)


@_sweep(12, 16, 16)
def _cb_dw2(net):
    """depthwise 3x3 first (12 channels: not a multiple of 8), then 200 and
    256 channels, 16x16 to 4x4. (Apart from cb_dw: stm32f4's 64 kB of
    code.)"""
    x = _dw(net, "input", "dw1")
    x = net.conv(x, "pw1", 200, 1, act="relu6")
    x = _dw(net, x, "dw2", 2)
    x = _dw(net, x, "dw3")
    x = _dw(net, x, "dw4", 2)
    x = net.conv(x, "pw4", 256, 1, act="relu6")
    x = _dw(net, x, "dw5")
    return _head(net, x)


def _dw_ladder(net, x, mid, last):
    """dw1, dw2 (stride 2), a pointwise to `mid` channels, dw3, dw4 (stride
    2), a pointwise to `last`, dw5."""
    x = _dw(net, x, "dw1")
    x = _dw(net, x, "dw2", 2)
    x = net.conv(x, "pw2", mid, 1, act="relu6")
    x = _dw(net, x, "dw3")
    x = _dw(net, x, "dw4", 2)
    x = net.conv(x, "pw4", last, 1, act="relu6")
    return _dw(net, x, "dw5")


@_sweep(1, 96, 96)
def _cb_dwbig(net):
    """depthwise on maps larger than L1 (48x48x16, 24x24x64): many tiles.
    (One input channel: the golden input is a constant in flash, and
    stm32f4 has 64 kB for code and constants.)"""
    x = net.conv("input", "c0", 16, 3, stride=2, act="relu6")
    return _head(net, _dw_ladder(net, x, 64, 128))


@_sweep(1, 128, 16)
def _cb_dwtall(net):
    """depthwise on tall, narrow maps (128x16 to 32x4) and 16, 24 and 44
    channels (not all multiples of 8): many plane rows for their outputs,
    so a row's set-up and a channel's stand apart from the MACs (square
    maps tie them to each other)."""
    x = net.conv("input", "c0", 16, 3, act="relu6")
    return _head(net, _dw_ladder(net, x, 24, 44))


@_sweep(1, 16, 128)
def _cb_dwwide(net):
    """cb_dwtall's layers on wide, short maps (16x128 to 4x32): few plane
    rows for their outputs."""
    return _cb_dwtall(net)


@_sweep(3, 32, 32)
def _cb_pw(net):
    """pointwise (16..64 channels, 44, 36 and 24: not powers of two), add at two
    sizes, max pooling 2x2 and 3x3, average pooling, three linear layers."""
    x0 = net.conv("input", "c0", 16, 3, act="relu")
    x = net.conv(x0, "pw1", 44, 1, act="relu6")
    x = net.conv(x, "pw2", 36, 1, act="relu6")
    x = net.conv(x, "pw3", 16, 1)
    x = net.add(x0, x, "add1")
    x = net.conv(x, "pw4", 64, 1, act="relu6")      # 64 kB: stm32f4's SRAM holds it and its input
    x1 = net.conv(x, "pw5", 24, 1)
    x = net.maxpool(x1, "mp1", 2, 2)
    x2 = net.conv(x, "pw6", 24, 1)
    x = net.add(x, x2, "add2")
    x = net.maxpool(x, "mp2", 3, 2)
    x = net.global_avgpool(x, "pool")
    x = net.flatten(x, "flatten")
    x = net.classifier(x, "fc1", 100, output="fc1")
    x = net.classifier(x, "fc2", 250, output="fc2")
    return net.classifier(x, "fc", 10)


@_sweep(128, 8, 8)
def _cb_deep(net):
    """depthwise and pointwise deep in a network: 128 and 256 channels on
    8x8 and 4x4 maps, where per-layer and per-channel costs weigh most."""
    x = _dw(net, "input", "dw1")
    x = net.conv(x, "pw1", 128, 1, act="relu6")
    x = _dw(net, x, "dw2", 2)
    x = net.conv(x, "pw2", 256, 1, act="relu6")
    x = _dw(net, x, "dw3")
    x = net.conv(x, "pw3", 256, 1, act="relu6")
    return _head(net, x)


@_sweep(16, 32, 32)
def _cb_misc(net):
    """max pooling 2x2/2 and 3x3/1 at three sizes, add at two, linear 48 to
    128 wide: the ops the other sweeps have once or twice."""
    x = net.maxpool("input", "mp1", 2, 2)
    x = net.maxpool(x, "mp2", 3, 1)
    p = net.conv(x, "pw1", 16, 1)
    x = net.add(x, p, "add1")
    x = net.conv(x, "pw2", 48, 1, act="relu")
    x = net.maxpool(x, "mp3", 2, 2)
    p = net.conv(x, "pw3", 48, 1)
    x = net.add(x, p, "add2")
    x = net.global_avgpool(x, "pool")
    x = net.flatten(x, "flatten")
    x = net.classifier(x, "fc1", 64, output="fc1")
    x = net.classifier(x, "fc2", 128, output="fc2")
    return net.classifier(x, "fc", 10)


@_sweep(512, 8, 8)
def _cb_dw512(net):
    """depthwise 3x3 over 512 channels, 8x8 and 4x4, strides 1 and 2 (the
    wide MobileNets' last blocks: per-channel costs dominate)."""
    x = _dw(net, "input", "dw1")
    x = _dw(net, x, "dw2", 2)
    x = _dw(net, x, "dw3")
    return _head(net, x)


@_sweep(1024, 4, 4)
def _cb_dw1024(net):
    """depthwise 3x3 over 1024 channels on 4x4, 3x3 and 2x2 maps. (The
    input is the widest tensor: no pointwise to 1024 channels, whose
    weights stm32f4's flash would not hold beside the code.)"""
    x = _dw(net, "input", "dw1")
    x = net.maxpool(x, "mp1", 2, 1)                 # 4x4 -> 3x3
    x = _dw(net, x, "dw2")
    x = _dw(net, x, "dw3", 2)
    x = _dw(net, x, "dw4")
    return _head(net, x)


@_sweep(32, 24, 24)
def _cb_pw2(net):
    """pointwise 32 to 256 channels at the small MobileNets' map sizes
    (24x24 to 3x3), depthwise stride 2 between them, linear 256 to 512 and
    512 to 10."""
    x = net.conv("input", "pw1", 64, 1, act="relu6")
    x = _dw(net, x, "dw1", 2)
    x = net.conv(x, "pw2", 64, 1, act="relu6")
    x = net.conv(x, "pw3", 128, 1, act="relu6")
    x = _dw(net, x, "dw3", 2)
    x = net.conv(x, "pw4", 128, 1, act="relu6")
    x = net.conv(x, "pw5", 256, 1, act="relu6")
    x = _dw(net, x, "dw5", 2)
    x = net.conv(x, "pw6", 256, 1, act="relu6")
    x = net.global_avgpool(x, "pool")
    x = net.flatten(x, "flatten")
    x = net.classifier(x, "fc1", 512, output="fc1")
    return net.classifier(x, "fc", 10)


@_sweep(1, 49, 10)
def _cb_kws(net):
    """DS-CNN's shapes: a 10x4 stride-2 conv2d from one channel (49x10 ->
    25x5x64), depthwise and pointwise 64 channels on 25x5, linear 64 to 12."""
    top, bottom = same_pads(49, 10, 2)
    left, right = same_pads(10, 4, 2)
    x = net.conv("input", "c0", 64, (10, 4), stride=2, pads=[top, left, bottom, right], act="relu")
    x = _dw(net, x, "dw1")
    x = net.conv(x, "pw1", 64, 1, act="relu6")
    x = _dw(net, x, "dw2")
    x = net.conv(x, "pw2", 32, 1, act="relu6")
    return _head(net, x, 12)


@_sweep(16, 8, 8)
def _cb_small(net):
    """every op on small maps (8x8 to 2x2), where per-layer and per-tile
    setup is most of the count: 3x3 conv2d with 8 to 24 input channels,
    pointwise, add, max pooling 2x2/2 and 2x2/1, depthwise, average
    pooling, linear 32 to 16."""
    x0 = net.conv("input", "c1", 8, 3, act="relu")           # 8x8, 16 -> 8
    x = net.conv(x0, "c2", 16, 3, act="relu")                 # 8x8, 8 -> 16
    p = net.conv(x, "pw1", 16, 1)
    x = net.add(x, p, "add1")                                 # 8x8x16
    x = net.maxpool(x, "mp1", 2, 2)                           # 4x4x16
    y = net.conv(x, "c3", 24, 3, act="relu")                  # 4x4, 16 -> 24
    y = net.conv(y, "c4", 12, 3, act="relu")                  # 4x4, 24 -> 12
    p = net.conv(y, "pw2", 12, 1)
    y = net.add(y, p, "add2")                                 # 4x4x12
    y = _dw(net, y, "dw1")
    y = net.maxpool(y, "mp2", 2, 1)                           # 3x3x12
    y = net.conv(y, "c5", 32, 3, act="relu")                  # 3x3, 12 -> 32
    y = net.maxpool(y, "mp3", 2, 1)                           # 2x2x32
    y = net.global_avgpool(y, "pool")
    y = net.flatten(y, "flatten")
    y = net.classifier(y, "fc1", 16, output="fc1")
    return net.classifier(y, "fc", 10)


@_sweep(4, 6, 6)
def _cb_small2(net):
    """conv2d from 4 and 8 input channels on 6x6 and 3x3 maps, add and max
    pooling on 6x6 with 8 to 32 channels."""
    x = net.conv("input", "c1", 8, 3, act="relu")            # 6x6, 4 -> 8
    x = net.conv(x, "c2", 32, 3, act="relu")                  # 6x6, 8 -> 32
    p = net.conv(x, "pw1", 32, 1)
    x = net.add(x, p, "add1")                                 # 6x6x32
    x = net.maxpool(x, "mp1", 2, 2)                           # 3x3x32
    x = net.conv(x, "c3", 8, 3, act="relu")                   # 3x3, 32 -> 8
    x = net.conv(x, "c4", 16, 3, act="relu")                  # 3x3, 8 -> 16
    return _head(net, x)


@_sweep(1, 40, 10)
def _cb_kws2(net):
    """conv2d split over the cores by output channels (few output pixels,
    many channels: every core unrolls every pixel): 10x4 and 3x3 stride 2
    from one input channel, 3x3 from 64, on a 20x5 map; add."""
    top, bottom = same_pads(40, 10, 2)
    left, right = same_pads(10, 4, 2)
    a = net.conv("input", "ca", 64, (10, 4), stride=2, pads=[top, left, bottom, right], act="relu")
    b = net.conv("input", "cb", 64, 3, stride=2, act="relu")
    x = net.add(a, b, "add1")                                 # 20x5x64
    x = net.conv(x, "c2", 64, 3, act="relu")                  # 20x5, 64 -> 64
    return _head(net, x, 12)


def write(name, directory, table=None):
    """Write <directory>/<name>.onnx (quantized) and <name>.yaml; returns the
    YAML's path. Files are rewritten only when their bytes change, so the
    build that reads them stays up to date. table: the registry the sweep is
    in (SWEEPS; fused_sweeps.SWEEPS)."""
    from ..zoo.params import quantization_params
    from ..zoo.quantize import normalize, quantize

    c, h, w, fn = (table or SWEEPS)[name]
    net = Net(np.random.default_rng(0), c, h, w)
    fn(net)
    q = quantization_params({})
    model = quantize(net.model(name), q)
    normalize(model, {"tessera.cost.sweep": name, "tessera.zoo.quantization": canon.dumps(q)})
    os.makedirs(directory, exist_ok=True)
    onnx_path = os.path.join(directory, f"{name}.onnx")
    yaml_path = os.path.join(directory, f"{name}.yaml")
    _write_if_changed(onnx_path, model.SerializeToString())
    doc = (fn.__doc__ or "").split("\n\n")[0].replace("\n", " ")
    text = yaml.safe_dump({"description": f"cost model sweep {name}: {' '.join(doc.split())}",
                           "onnx": f"{name}.onnx", "input": {"seed": 0}}, sort_keys=True, width=1000)
    _write_if_changed(yaml_path, text.encode())
    return yaml_path


def _write_if_changed(path, data):
    if os.path.exists(path):
        with open(path, "rb") as f:
            if f.read() == data:
                return
    canon.write_atomic(path, data)


# ---- the recurrent step ----------------------------------------------------
# One int8 TFLite LSTM per network (tessera.zoo.tflite_lstm, seeded), over
# sequence lengths, input and cell counts and the options (no input gate,
# peephole, projection): samples of the op lstm. Each keeps its constants
# under 10 kB, so that it fits stm32f4's L1 as well.
RECURRENT = {
    "rb_small": dict(steps=8, inputs=10, cells=16),
    "rb_mnist": dict(steps=28, inputs=28, cells=20),
    "rb_long": dict(steps=40, inputs=8, cells=8),
    "rb_wide": dict(steps=12, inputs=40, cells=32),
    "rb_cifg": dict(steps=16, inputs=20, cells=24, cifg=True),
    "rb_proj": dict(steps=10, inputs=16, cells=24, outputs=12, projection=True, peephole=True),
}


def write_recurrent(name, directory):
    """Write <directory>/<name>.tflite and <name>.yaml; returns the YAML's
    path (files rewritten only when their bytes change)."""
    import tempfile

    from ..zoo import tflite_lstm

    os.makedirs(directory, exist_ok=True)
    tfl = os.path.join(directory, f"{name}.tflite")
    with tempfile.TemporaryDirectory() as tmp:
        tflite_lstm.write(os.path.join(tmp, "m.tflite"), seed=0, **RECURRENT[name])
        with open(os.path.join(tmp, "m.tflite"), "rb") as f:
            _write_if_changed(tfl, f.read())
    shape = ", ".join(f"{k} {v}" for k, v in RECURRENT[name].items())
    text = yaml.safe_dump({"description": f"cost model sweep {name}: one int8 LSTM ({shape})",
                           "tflite": f"{name}.tflite", "input": {"seed": 0}}, sort_keys=True, width=1000)
    yaml_path = os.path.join(directory, f"{name}.yaml")
    _write_if_changed(yaml_path, text.encode())
    return yaml_path

"""The architectures: each function fills a `Net` from validated parameters.

All of them: NCHW input "input" [1, channels, H, W], logits "output"
[1, classes], batch-norm folded into conv weights and biases.
"""

from .net import Net, same_pads


def _mobilenet_v1(net, p):
    """MobileNetV1 (Howard et al. 2017, Table 1).

    Channel counts follow TF-slim's `depth()`: max(8, int(c * width)).
    Every 3x3 conv, stride 2 included, uses symmetric pads [1,1,1,1]
    (PyTorch style). For an even input size TF's 'SAME' pads stride-2 convs
    [0,0,1,1] (top, left, bottom, right) instead; both give ceil(H/2)
    outputs and the same MAC count, only which border taps see padding
    differs. For odd sizes the two agree.
    """
    width = p["width"]

    def depth(c):
        return max(8, int(c * width))

    x = net.conv("input", "conv0", depth(32), 3, stride=2, act="relu6")
    blocks = [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2)]
    blocks += [(512, 1)] * 5 + [(1024, 2), (1024, 1)]
    for i, (c, s) in enumerate(blocks, start=1):
        x = net.conv(x, f"dw{i}", net.channels(x), 3, stride=s, group=net.channels(x), act="relu6")
        x = net.conv(x, f"pw{i}", depth(c), 1, act="relu6")
    x = net.global_avgpool(x, "pool")
    x = net.flatten(x, "flatten")
    return net.classifier(x, "fc", p["classes"])


def _make_divisible(v, divisor=8, min_value=None):
    """MobileNetV2's channel rounding (from the reference implementation)."""
    min_value = min_value or divisor
    new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:  # never round down by more than 10%
        new_v += divisor
    return new_v


def _mobilenet_v2(net, p):
    """MobileNetV2 (Sandler et al. 2018, Table 2).

    Inverted residual: 1x1 expand + ReLU6 (skipped when t=1), 3x3 depthwise +
    ReLU6, 1x1 project (linear); Add of the block input when stride 1 and
    in == out channels. Channels rounded to multiples of 8 as in the
    reference code; the final 1280 only grows for width > 1. Symmetric
    padding as for MobileNetV1. `scale_head`: the last 1x1 convolution
    scaled by the width too (TF-slim's default, finegrain_classification_mode
    off), not kept at 1280 as the paper does for width < 1.
    """
    width = p["width"]
    settings = [  # t, c, n, s
        (1, 16, 1, 1),
        (6, 24, 2, 2),
        (6, 32, 3, 2),
        (6, 64, 4, 2),
        (6, 96, 3, 1),
        (6, 160, 3, 2),
        (6, 320, 1, 1),
    ]
    x = net.conv("input", "conv0", _make_divisible(32 * width), 3, stride=2, act="relu6")
    b = 0
    for t, c, n, s in settings:
        out = _make_divisible(c * width)
        for i in range(n):
            b += 1
            stride = s if i == 0 else 1
            cin = net.channels(x)
            h = x
            if t != 1:
                h = net.conv(h, f"b{b}.expand", cin * t, 1, act="relu6")
            h = net.conv(h, f"b{b}.dw", net.channels(h), 3, stride=stride, group=net.channels(h), act="relu6")
            h = net.conv(h, f"b{b}.project", out, 1)
            if stride == 1 and cin == out:
                h = net.add(x, h, f"b{b}.add")
            x = h
    head = width if p.get("scale_head") else max(1.0, width)
    x = net.conv(x, "conv_last", _make_divisible(1280 * head), 1, act="relu6")
    x = net.global_avgpool(x, "pool")
    x = net.flatten(x, "flatten")
    return net.classifier(x, "fc", p["classes"])


def _dscnn(net, p):
    """DS-CNN keyword spotting (Zhang et al. 2017, "Hello Edge"; ARM ML-Zoo).

    The small variant: a 10x4 stride-2 conv to 64 channels, four
    depthwise-separable blocks (3x3 dw + 1x1 pw, ReLU after each), average
    pool over the whole map, fully connected to the classes. `width` scales
    the 64 channels (the "medium" model has 172 = 64 * 2.6875).

    The first conv's pads reproduce TF 'SAME' exactly: for the 49x10 MFCC
    input that is [4, 1, 5, 1] (top, left, bottom, right) -- asymmetric,
    giving a 25x5 map, as the TFLite model has.
    """
    c = max(1, int(round(64 * p["width"])))
    h, w = net.spatial("input")
    top, bottom = same_pads(h, 10, 2)
    left, right = same_pads(w, 4, 2)
    x = net.conv("input", "conv0", c, (10, 4), stride=2, pads=[top, left, bottom, right], act="relu")
    for i in range(1, 5):
        x = net.conv(x, f"dw{i}", c, 3, group=c, act="relu")
        x = net.conv(x, f"pw{i}", c, 1, act="relu")
    x = net.global_avgpool(x, "pool")
    x = net.flatten(x, "flatten")
    return net.classifier(x, "fc", p["classes"])


def _tiny(net, p):
    """A seconds-to-build network with one of every op the later stages need.

    conv 3x3 s2 + Clip(0,6) -> depthwise 3x3 + Relu -> pointwise 1x1 + Clip
    -> [skip + linear pointwise branch] Add -> MaxPool 2x2 s2 -> conv 3x3 s1
    pad 1 + Relu -> GlobalAveragePool -> Flatten -> Gemm. Both Relu and Clip
    appear because the MobileNets use Clip and DS-CNN uses Relu; the Add
    joins a non-negative input with a signed one, so the two sides have
    different scales and zero points after quantization.
    """
    width = p["width"]
    c1 = max(1, int(round(8 * width)))
    c2 = max(1, int(round(16 * width)))
    x = net.conv("input", "conv0", c1, 3, stride=2, act="relu6")
    x = net.conv(x, "dw1", c1, 3, group=c1, act="relu")
    x = net.conv(x, "pw1", c2, 1, act="relu6")
    branch = net.conv(x, "branch", c2, 1)
    x = net.add(x, branch, "add")
    x = net.maxpool(x, "maxpool", 2, 2)
    x = net.conv(x, "conv2", 2 * c2, 3, act="relu")
    x = net.global_avgpool(x, "pool")
    x = net.flatten(x, "flatten")
    return net.classifier(x, "fc", p["classes"])


def _fc_as_conv(net, x, name, features, act="relu"):
    """A hidden fully connected layer on a feature map: a conv whose kernel
    covers the whole map (1x1 output), as VGG's and AlexNet's FC layers run
    once their input is HWC (the same weights, another order)."""
    h, w = net.spatial(x)
    return net.conv(x, name, features, (h, w), pads=[0, 0, 0, 0], act=act)


def _vgg16(net, p):
    """VGG-16 (Simonyan and Zisserman 2015, configuration D): 13 3x3 convs
    with ReLU in five stages of 64, 128, 256, 512, 512 channels (`width`
    scales them), a 2x2 max-pool after each, then FC 4096, FC 4096 and the
    classifier. At 64x64 the last map is 2x2x512, so the first FC has 2048
    inputs: about 44 M parameters, most of them in the FC layers (SwapNN's
    VGG16, run out of core)."""
    width = p["width"]
    x = "input"
    n = 0
    for c, convs in ((64, 2), (128, 2), (256, 3), (512, 3), (512, 3)):
        for _ in range(convs):
            n += 1
            x = net.conv(x, f"conv{n}", max(8, int(c * width)), 3, act="relu")
        x = net.maxpool(x, f"pool{n}", 2, 2)
    x = _fc_as_conv(net, x, "fc6", max(8, int(4096 * width)))
    x = net.conv(x, "fc7", max(8, int(4096 * width)), 1, act="relu")
    x = net.flatten(x, "flatten")
    return net.classifier(x, "fc8", p["classes"])


def _alexnet(net, p):
    """An AlexNet-style network (Krizhevsky et al. 2012, single tower) for
    small inputs: five convs (64, 192, 384, 256, 256 channels; the first
    5x5 stride 2, max-pools after the first, second and fifth), then two
    large FC layers and the classifier. Its FC layers hold most of the
    weights and do one MAC per weight: the IO-bound case of out-of-core
    execution (SwapNN, Table 2)."""
    width = p["width"]

    def c(n):
        return max(8, int(n * width))

    x = net.conv("input", "conv1", c(64), 5, stride=2, act="relu")
    x = net.maxpool(x, "pool1", 2, 2)
    x = net.conv(x, "conv2", c(192), 3, act="relu")
    x = net.maxpool(x, "pool2", 2, 2)
    x = net.conv(x, "conv3", c(384), 3, act="relu")
    x = net.conv(x, "conv4", c(256), 3, act="relu")
    x = net.conv(x, "conv5", c(256), 3, act="relu")
    x = net.maxpool(x, "pool5", 2, 2)
    x = _fc_as_conv(net, x, "fc6", c(2048))
    x = net.conv(x, "fc7", c(2048), 1, act="relu")
    x = net.flatten(x, "flatten")
    return net.classifier(x, "fc8", p["classes"])


#: arch name -> (builder, defaults for the generator keys it does not get).
BUILDERS = {
    "mobilenet_v1": (_mobilenet_v1, {"resolution": 224, "channels": 3, "classes": 1000}),
    "mobilenet_v2": (_mobilenet_v2, {"resolution": 224, "channels": 3, "classes": 1000}),
    "dscnn": (_dscnn, {"resolution": [49, 10], "channels": 1, "classes": 12}),
    "tiny": (_tiny, {"resolution": 16, "channels": 3, "classes": 10}),
    "vgg16": (_vgg16, {"resolution": 224, "channels": 3, "classes": 1000}),
    "alexnet": (_alexnet, {"resolution": 64, "channels": 3, "classes": 1000}),
}


def build_net(p, rng):
    """A finished Net for validated generator parameters p."""
    builder, _ = BUILDERS[p["arch"]]
    h, w = p["resolution"]
    net = Net(rng, p["channels"], h, w)
    builder(net, p)
    return net

"""Corpus: PyTorch exports quantized with ONNX Runtime's quantize_static.

Each model is a small PyTorch network with seeded random weights, exported
by torch.onnx.export with a symbolic batch dimension (dynamic_axes), then
quantized by onnxruntime.quantization.quantize_static (QDQ, int8
activations and per-channel weights, seeded random calibration data), as
a user would. The float head (Softmax, Sigmoid) is left out of the
quantization, as vendors' exports leave it: it stays after the network's
last DequantizeLinear. Run in the converters' environment
(tests/corpus/README.md):

    /work/wt/convenv/bin/python tools/corpus/make_torch.py tests/corpus [model ...]
"""

import os
import sys
import tempfile

import numpy as np
import onnx
import torch
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
from torch import nn


class Audio1d(nn.Module):
    """A 1D audio CNN on raw 1x1024 samples, ending in a softmax."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv1d(1, 8, 9, stride=4, padding=4), nn.BatchNorm1d(8), nn.ReLU(),
            nn.Conv1d(8, 16, 5, stride=2, padding=2), nn.ReLU(),
            nn.Conv1d(16, 16, 3, padding=1, groups=16), nn.ReLU(),
            nn.Conv1d(16, 24, 1), nn.ReLU(),
            nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(24, 6))
        self.head = nn.Softmax(dim=1)

    def forward(self, x):
        return self.head(self.body(x))

    input_shape = (1, 1, 1024)


class Vision2d(nn.Module):
    """A small 2D CNN (conv, batch norm, ReLU6, residual add, flatten) with a
    sigmoid head (multi-label)."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8), nn.ReLU6())
        self.block = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1, groups=8), nn.ReLU(), nn.Conv2d(8, 8, 1))
        self.tail = nn.Sequential(nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU(), nn.Flatten(),
                                  nn.Linear(16 * 8 * 8, 5))
        self.head = nn.Sigmoid()

    def forward(self, x):
        x = self.stem(x)
        x = x + self.block(x)
        return self.head(self.tail(x))

    input_shape = (1, 3, 32, 32)


class SqueezeExcite(nn.Module):
    def __init__(self, c, r):
        super().__init__()
        self.fc = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(c, r, 1), nn.ReLU(), nn.Conv2d(r, c, 1),
                                nn.Hardsigmoid())

    def forward(self, x):
        return x * self.fc(x)


class MobileNetV3Small(nn.Module):
    """MobileNetV3-small's building blocks at a small size: hardswish,
    depthwise separable inverted residuals, squeeze-and-excitation
    (global pool, 1x1 convs, hardsigmoid, broadcast multiply), a softmax head."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8), nn.Hardswish())
        self.b1 = nn.Sequential(nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=8), nn.BatchNorm2d(8), nn.ReLU(),
                                SqueezeExcite(8, 4), nn.Conv2d(8, 8, 1), nn.BatchNorm2d(8))
        self.b2 = nn.Sequential(nn.Conv2d(8, 24, 1), nn.Hardswish(),
                                nn.Conv2d(24, 24, 5, padding=2, groups=24), nn.Hardswish(),
                                SqueezeExcite(24, 8), nn.Conv2d(24, 8, 1))
        self.head = nn.Sequential(nn.Conv2d(8, 32, 1), nn.Hardswish(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                  nn.Linear(32, 10))
        self.out = nn.Softmax(dim=1)

    def forward(self, x):
        x = self.b1(self.stem(x))
        x = x + self.b2(x)
        return self.out(self.head(x))

    input_shape = (1, 3, 32, 32)


class DilatedTcn(nn.Module):
    """A temporal convolution network: causal-padded dilated 1D convolutions
    (dilation 1, 2, 4) in residual blocks."""

    def __init__(self):
        super().__init__()
        self.inp = nn.Conv1d(4, 16, 1)
        self.blocks = nn.ModuleList(nn.Sequential(nn.ConstantPad1d((2 * d, 0), 0.0),
                                                  nn.Conv1d(16, 16, 3, dilation=d), nn.ReLU())
                                    for d in (1, 2, 4))
        self.out = nn.Sequential(nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(16, 5))

    def forward(self, x):
        x = self.inp(x)
        for b in self.blocks:
            x = x + b(x)
        return self.out(x)

    input_shape = (1, 4, 64)


class SegNet(nn.Module):
    """A small U-Net-like segmentation net: strided encoder, nearest and
    bilinear upsampling, skip connections by concatenation, a sigmoid mask."""

    def __init__(self):
        super().__init__()
        self.e1 = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
        self.e2 = nn.Sequential(nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU())
        self.e3 = nn.Sequential(nn.Conv2d(16, 16, 3, stride=2, padding=1), nn.ReLU())
        self.up1 = nn.Upsample(scale_factor=2, mode="nearest")
        self.d1 = nn.Sequential(nn.Conv2d(32, 16, 3, padding=1), nn.ReLU())
        self.up2 = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
        self.d2 = nn.Sequential(nn.Conv2d(24, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 1, 1))
        self.mask = nn.Sigmoid()

    def forward(self, x):
        a = self.e1(x)
        b = self.e2(a)
        c = self.e3(b)
        d = self.d1(torch.cat([self.up1(c), b], dim=1))
        return self.mask(self.d2(torch.cat([self.up2(d), a], dim=1)))

    input_shape = (1, 3, 32, 32)


class RecurrentKws(nn.Module):
    """A recurrent keyword spotter: 49 frames of 10 MFCC coefficients
    (batch first), one GRU or LSTM layer of 32 units, its last hidden state
    into a 12-class linear layer, a softmax head."""

    cell = nn.GRU

    def __init__(self):
        super().__init__()
        self.rnn = self.cell(10, 32, batch_first=True)
        self.fc = nn.Linear(32, 12)
        self.head = nn.Softmax(dim=1)

    def forward(self, x):
        _, h = self.rnn(x)
        h = h[0] if isinstance(h, tuple) else h      # the LSTM's (h, c)
        return self.head(self.fc(h[-1]))

    input_shape = (1, 49, 10)


class GruKws(RecurrentKws):
    cell = nn.GRU


class LstmKws(RecurrentKws):
    cell = nn.LSTM


class DetectHeads(nn.Module):
    """A small detector as PyTorch writes one: LeakyReLU, a ShuffleNet
    channel shuffle (view, transpose, reshape), a clip written as
    torch.maximum / torch.minimum of constants, and NCHW heads permuted to
    NHWC and reshaped to [N, H * W * anchors, k], concatenated over two
    scales, the class scores through a softmax over k (all quantized)."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.LeakyReLU(0.1))
        self.block = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1, groups=8), nn.Conv2d(8, 8, 1), nn.LeakyReLU(0.1))
        self.down = nn.Sequential(nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.LeakyReLU(0.1))
        self.cls1, self.cls2 = nn.Conv2d(8, 2 * 2, 1), nn.Conv2d(16, 2 * 2, 1)
        self.box1, self.box2 = nn.Conv2d(8, 2 * 4, 1), nn.Conv2d(16, 2 * 4, 1)
        self.register_buffer("floor", torch.tensor(-0.75))
        self.register_buffer("ceil", torch.linspace(0.5, 1.5, 8).reshape(1, 8, 1, 1))

    def forward(self, x):
        x = self.stem(x)
        y = self.block(x)
        n, c, h, w = y.shape
        y = y.view(n, 2, c // 2, h, w).transpose(1, 2).reshape(n, c, h, w)
        y = torch.minimum(torch.maximum(y, self.floor), self.ceil)
        z = self.down(y)

        def head(conv, t, k):
            return conv(t).permute(0, 2, 3, 1).reshape(n, -1, k)
        scores = torch.cat([head(self.cls1, y, 2), head(self.cls2, z, 2)], dim=1)
        boxes = torch.cat([head(self.box1, y, 4), head(self.box2, z, 4)], dim=1)
        return torch.softmax(scores, dim=-1), boxes

    input_shape = (1, 3, 32, 32)
    outputs = ("scores", "boxes")
    float_head = False


MODELS = {"torch_audio1d_softmax": Audio1d, "torch_vision2d_sigmoid": Vision2d, "torch_detect_heads": DetectHeads,
          "torch_mbv3_small_se": MobileNetV3Small, "torch_tcn_dilated": DilatedTcn,
          "torch_segnet_resize_concat": SegNet, "torch_vision2d_qop_uint8": Vision2d,
          "torch_kws_gru": GruKws, "torch_kws_lstm": LstmKws}
# quantize_static leaves an LSTM or GRU node in float unless asked to
# quantize it: then it puts QuantizeLinear/DequantizeLinear on every input
# (sequence, weights, recurrence weights, bias, initial state) and output
RECURRENT = ("torch_kws_gru", "torch_kws_lstm")
# quantize_static's defaults otherwise: QOperator ops, uint8 activations
QOPERATOR_UINT8 = ("torch_vision2d_qop_uint8",)
# one fixed seed per model (the committed files were made with these)
SEEDS = {"torch_audio1d_softmax": 0, "torch_vision2d_sigmoid": 1, "torch_mbv3_small_se": 2,
         "torch_tcn_dilated": 3, "torch_segnet_resize_concat": 4, "torch_vision2d_qop_uint8": 1,
         "torch_detect_heads": 5, "torch_kws_gru": 5, "torch_kws_lstm": 6}


class Calibration(CalibrationDataReader):
    def __init__(self, name, shape, seed, count=16):
        rng = np.random.default_rng(seed)
        self.data = iter([{name: rng.standard_normal(shape).astype(np.float32)} for _ in range(count)])

    def get_next(self):
        return next(self.data, None)


def export(model, path):
    x = torch.randn(*model.input_shape)
    # the legacy exporter with a symbolic batch, as most tutorials show
    outputs = list(getattr(model, "outputs", ("output",)))
    torch.onnx.export(model, x, path, input_names=["input"], output_names=outputs, opset_version=17,
                      dynamic_axes={"input": {0: "N"}, **{o: {0: "N"} for o in outputs}}, dynamo=False)


def main(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    only = set(sys.argv[2:])
    for name, cls in sorted(MODELS.items()):
        if only and name not in only:
            continue
        i = SEEDS[name]
        torch.manual_seed(i)
        model = cls()
        for m in model.modules():            # non-trivial batch-norm statistics
            if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
        model.eval()
        path = os.path.join(out_dir, name + ".onnx")
        with tempfile.TemporaryDirectory() as tmp:
            f32 = os.path.join(tmp, "float.onnx")
            export(model, f32)
            heads = [n.name for n in onnx.load(f32).graph.node if n.op_type in ("Softmax", "Sigmoid")
                     and getattr(model, "float_head", True)]
            qop = name in QOPERATOR_UINT8
            ops = None
            if name in RECURRENT:
                ops = sorted({n.op_type for n in onnx.load(f32).graph.node} & {"GRU", "LSTM", "Gemm", "MatMul"})
            quantize_static(f32, path, Calibration("input", model.input_shape, seed=i),
                            quant_format=QuantFormat.QOperator if qop else QuantFormat.QDQ,
                            activation_type=QuantType.QUInt8 if qop else QuantType.QInt8,
                            weight_type=QuantType.QInt8, per_channel=True, nodes_to_exclude=heads,
                            op_types_to_quantize=ops)
        print(f"{path}: {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/corpus")

"""Corpus: small transformers exported from PyTorch and quantized with ONNX
Runtime's quantize_static (issue 27), as a user would make them.

- torch_kws_transformer: a keyword-spotting transformer in the manner of
  KWT (Berg et al., 2021) on MFCC-shaped input [1, 49, 10] (49 frames of 10
  coefficients, DS-CNN's input): each frame projected to 64 features, a
  learned positional embedding, two pre-norm encoder blocks (LayerNorm,
  4-head self-attention, LayerNorm, GELU MLP), the mean over the frames,
  a linear classifier to 12 keywords.
- torch_vit_tiny: a tiny vision transformer on 32x32 RGB images: 4x4
  patches by a strided convolution (64 tokens of 48 features), a learned
  positional embedding, two pre-norm blocks with 3 heads, the mean over
  the tokens, a linear classifier to 10 classes.

Seeded random weights (the graph form is what matters), exported by the
TorchScript exporter (opset 17: LayerNormalization and the Erf form of
GELU), batch 1; quantize_static with QDQ, int8 activations and per-channel
int8 weights, seeded random calibration data. Run in the converters'
environment (tests/corpus/README.md):

    /work/wt/convenv/bin/python tools/corpus/make_transformers.py tests/corpus [model ...]
"""

import math
import os
import sys
import tempfile

import onnx
import torch
from onnxruntime.quantization import QuantFormat, QuantType, quantize_static
from torch import nn

from make_torch import Calibration   # the same seeded calibration data as the other PyTorch exports


class Attention(nn.Module):
    """Multi-head self-attention as most PyTorch code writes it (timm's):
    one projection to Q, K and V, heads split by reshape and permute, scores
    scaled after Q.K^T, softmax over the keys, heads merged, an output
    projection."""

    def __init__(self, dim, heads):
        super().__init__()
        self.heads, self.scale = heads, (dim // heads) ** -0.5
        self.q, self.k, self.v = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q = self.q(x).reshape(b, t, self.heads, d // self.heads).permute(0, 2, 1, 3)
        k = self.k(x).reshape(b, t, self.heads, d // self.heads).permute(0, 2, 1, 3)
        v = self.v(x).reshape(b, t, self.heads, d // self.heads).permute(0, 2, 1, 3)
        attn = (q @ k.transpose(-2, -1)) * self.scale
        attn = attn.softmax(dim=-1)
        y = (attn @ v).permute(0, 2, 1, 3).reshape(b, t, d)
        return self.proj(y)


class Block(nn.Module):
    def __init__(self, dim, heads, hidden):
        super().__init__()
        self.norm1, self.attn = nn.LayerNorm(dim), Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class KwsTransformer(nn.Module):
    input_shape = (1, 49, 10)

    def __init__(self, dim=64, heads=4, depth=2, hidden=128, classes=12):
        super().__init__()
        frames, coeffs = self.input_shape[1:]
        self.embed = nn.Linear(coeffs, dim)
        self.pos = nn.Parameter(torch.randn(1, frames, dim) * 0.5)
        self.blocks = nn.Sequential(*(Block(dim, heads, hidden) for _ in range(depth)))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        x = self.blocks(self.embed(x) + self.pos)
        return self.head(self.norm(x).mean(dim=1))


class VitTiny(nn.Module):
    input_shape = (1, 3, 32, 32)

    def __init__(self, dim=48, heads=3, depth=2, hidden=96, classes=10, patch=4):
        super().__init__()
        self.embed = nn.Conv2d(3, dim, patch, stride=patch)
        self.pos = nn.Parameter(torch.randn(1, (32 // patch) ** 2, dim) * 0.5)
        self.blocks = nn.Sequential(*(Block(dim, heads, hidden) for _ in range(depth)))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        x = self.embed(x).flatten(2).transpose(1, 2)
        x = self.blocks(x + self.pos)
        return self.head(self.norm(x).mean(dim=1))


MODELS = {"torch_kws_transformer": KwsTransformer, "torch_vit_tiny": VitTiny}
SEEDS = {"torch_kws_transformer": 27, "torch_vit_tiny": 28}


def randomize(model):
    """Seeded weights with some spread in the norms (an untrained LayerNorm
    is the identity)."""
    for m in model.modules():
        if isinstance(m, nn.LayerNorm):
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.3, 0.3)
        elif isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=1.0 / math.sqrt(m.in_features))
            nn.init.uniform_(m.bias, -0.2, 0.2)


def main(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    only = set(sys.argv[2:])
    for name, cls in sorted(MODELS.items()):
        if only and name not in only:
            continue
        seed = SEEDS[name]
        torch.manual_seed(seed)
        model = cls()
        randomize(model)
        model.eval()
        path = os.path.join(out_dir, name + ".onnx")
        with tempfile.TemporaryDirectory() as tmp:
            f32 = os.path.join(tmp, "float.onnx")
            x = torch.randn(*model.input_shape)
            torch.onnx.export(model, x, f32, input_names=["input"], output_names=["output"], opset_version=17,
                              dynamo=False)
            quantize_static(f32, path, Calibration("input", model.input_shape, seed=seed),
                            quant_format=QuantFormat.QDQ, activation_type=QuantType.QInt8,
                            weight_type=QuantType.QInt8, per_channel=True)
        m = onnx.load(path)
        ops = sorted({n.op_type for n in m.graph.node})
        print(f"{path}: {os.path.getsize(path)} bytes, {len(m.graph.node)} nodes: {', '.join(ops)}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/corpus")

"""tessera.zoo: generators of the bundled quantized models.

    from tessera.zoo import build_model, ARCHITECTURES
    build_model(generator, quantization, out_path)

A model is made the way a user would make one with standard tools: a float
ONNX graph (opset 13, written with onnx.helper; random weights with the
batch-norm already folded, see net.py), then ONNX Runtime's static
quantization (quantize.py). Same arguments -> same bytes.

generator keys (validated, see params.py):
    arch        one of ARCHITECTURES (required)
    width       width multiplier, default 1.0
    resolution  int or [H, W]; default 224 (MobileNets), [49, 10] (dscnn),
                16 (tiny)
    channels    input channels; default 3, dscnn 1
    classes     default 1000 (MobileNets), 12 (dscnn), 10 (tiny)
    seed        weights come from numpy default_rng(seed); default 0
quantization keys:
    calibration_samples  default 8 standard-normal inputs
    seed                 of the calibration inputs, default 0
    per_channel          per-output-channel weight scales, default true

Input "input" float32 [1, channels, H, W]; output "output" float32
[1, classes] (logits).

What the QDQ graph looks like (ONNX Runtime 1.31, opset 13, IR 7)
-----------------------------------------------------------------
* Activations: "input" goes through QuantizeLinear -> DequantizeLinear;
  every Conv, Add, GlobalAveragePool, MaxPool, Flatten and Gemm output is
  followed by a QuantizeLinear -> DequantizeLinear pair, and each consumer
  reads the DequantizeLinear output ("<tensor>_DequantizeLinear_Output").
  Activation scales are float32 scalars, zero points int8 scalars
  (asymmetric, MinMax-calibrated): -128 for every ReLU/ReLU6 output, some
  small value for signed tensors (input, MobileNetV2 projections, Add
  outputs, logits).
* Relu and Clip are gone. ORT removes a "removable" activation whose input
  is quantized and hands its output name to the Conv: the Conv node `L`
  now writes tensor `L` directly, and the ReLU survives only as the
  output's quantization range [0, max] with zero point -128 (ReLU6: the
  upper clamp is the calibrated max, <= 6). A frontend lowering Conv ->
  QuantizeLinear gets the activation for free from the int8 saturation.
* MaxPool and Flatten re-quantize with their input's scale and zero point
  (same initializer names); GlobalAveragePool and Add get their own. The
  two Add inputs generally have different scales and zero points.
* Weights: int8 initializer "<L>.weight_quantized" -> DequantizeLinear with
  per-channel float32 scales "<L>.weight_scale" and int8 zero points
  "<L>.weight_zero_point" (all 0: symmetric, range -127..127, each channel
  reaches +-127), attribute axis=0 -- for Conv (depthwise too) and for the
  Gemm (transB=1, weight [classes, features]). With per_channel: false the
  scale and zero point are scalars and there is no axis.
* Biases: int32 "<L>.bias_quantized" -> DequantizeLinear (axis 0), scale =
  input scale * weight scale per channel, zero point int32 0.
* The Gemm's output is quantized too: Gemm -> QuantizeLinear ->
  DequantizeLinear, whose output is "output".
* Weight/bias DequantizeLinear nodes come first in the node list, then the
  activation chain in order. ORT's "onnx.infer" metadata and value_info
  for the intermediate tensors are kept.
"""

import numpy as np

from tessera.util import canon

from .archs import build_net
from .params import ARCHITECTURES, generator_params, quantization_params
from .quantize import normalize, quantize, random_inputs
from .stats import model_stats

__all__ = ["ARCHITECTURES", "build_model", "build_float_model", "model_stats", "random_inputs"]


def build_float_model(generator, with_health=False):
    """The float ONNX model (ModelProto) for a generator dict.

    with_health=True returns (model, health): the per-activation records of
    the probe pass (zero_fraction, clipped_fraction, dead_channels, ...; see
    net.Net._record).
    """
    p = generator_params(generator)
    net = build_net(p, np.random.default_rng(p["seed"]))
    model = net.model(p["arch"])
    return (model, net.health) if with_health else model


def build_model(generator, quantization, out_path):
    """Build the float model, quantize it, write the QDQ model to out_path.

    Raises ConfigError for bad generator/quantization dicts (before any
    work). The file appears atomically; equal arguments give equal bytes.
    """
    g = generator_params(generator)
    q = quantization_params(quantization)
    model = quantize(build_float_model(g), q)
    normalize(model, {"tessera.zoo.generator": canon.dumps(g), "tessera.zoo.quantization": canon.dumps(q)})
    canon.write_atomic(out_path, model.SerializeToString())

"""A tiny graph builder that writes an ONNX float model and runs it as it goes.

Every op appended to a `Net` is also evaluated eagerly (in float64 numpy) on
a small batch of seeded random "probe" inputs. That buys three things:

* shapes are known at every step, so a resolution too small for the
  architecture fails here with a ConfigError instead of deep inside ONNX;
* the batch-norm that a trained network would have folded into each conv can
  be simulated: the random He-normal weights of a conv are rescaled (and its
  bias set) so that every output channel has a chosen mean and spread on the
  probe inputs, exactly what folding a batch-norm with those statistics
  does. Pure He init (small random biases, no fold) keeps the *average*
  second moment right but not each channel: ReLU outputs have a positive
  mean that random filters turn into large per-channel offsets. Measured
  with this builder: MobileNetV1 1.0/128 then has 658 of 11968 channels
  dead on the probes, MobileNetV2 539 dead and a layer with 26% of its
  values clipped at 6. With the fold: none dead, < 0.1% clipped;
* the health of every activation (fraction of zeros, of values clipped at
  6, dead channels) is recorded in `Net.health` for tests and reports.

Weights come from numpy default_rng(seed): first the probe batch (8
standard-normal inputs), then, layer by layer, the He-normal weights and the
batch-norm gamma/beta. The probe pass runs in float64 and only per-channel
statistics of it reach the float32 weights: a BLAS rounding difference
(another thread count or CPU) flips a weight bit only if a weight lands
within ~1e-16 of a float32 rounding boundary. Byte-identical output is
promised for the same machine and packages (ORT's calibration is not
specified bit-exactly across CPUs either).
"""

import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tessera.errors import ConfigError

# The float model's opset: the oldest one where ORT's QDQ quantizer supports
# per-channel weights (QuantizeLinear/DequantizeLinear `axis`), and where Clip
# takes its bounds as inputs.
OPSET = 13
# IR version 7 is the one opset 13 shipped with (onnx 1.8); a newer default
# would only narrow the set of runtimes that load the file.
IR_VERSION = 7


def same_pads(size, kernel, stride):
    """TensorFlow 'SAME' padding for one axis: (begin, end), end >= begin.

    Output size is ceil(size / stride); when the total padding is odd TF puts
    the extra row/column at the end, which is what this returns.
    """
    out = -(-size // stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


def _conv_forward(x, w, stride, pads, group):
    """Reference convolution, NCHW, float64. pads = [top, left, bottom, right]."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    sh, sw = stride
    top, left, bottom, right = pads
    if any(pads):
        x = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)))
    ho = (h + top + bottom - kh) // sh + 1
    wo = (wd + left + right - kw) // sw + 1
    if group == 1 and kh == kw == 1:
        xs = x[:, :, : (ho - 1) * sh + 1 : sh, : (wo - 1) * sw + 1 : sw]
        return np.matmul(w.reshape(o, c), xs.reshape(n, c, ho * wo)).reshape(n, o, ho, wo)

    def tap(i, j):
        return x[:, :, i : i + (ho - 1) * sh + 1 : sh, j : j + (wo - 1) * sw + 1 : sw]

    if group == 1:
        cols = np.stack([tap(i, j) for i in range(kh) for j in range(kw)], axis=2)
        cols = cols.reshape(n, c * kh * kw, ho * wo)
        return np.matmul(w.reshape(o, c * kh * kw), cols).reshape(n, o, ho, wo)
    if group == c == o:
        y = np.zeros((n, o, ho, wo))
        for i in range(kh):
            for j in range(kw):
                y += tap(i, j) * w[:, 0, i, j][None, :, None, None]
        return y
    raise NotImplementedError("only group=1 and depthwise convolutions are built")


class Net:
    """Builds an ONNX float graph op by op, evaluating each op on probe inputs.

    Tensor values are referred to by name. Naming: a layer `L` is a Conv node
    `L` with initializers `L.weight`, `L.bias`; if it has an activation, the
    conv output is `L.conv` and the activation is node `L.relu` or `L.relu6`
    with output `L` (the layer's output is always the tensor `L`).
    """

    def __init__(self, rng, channels, height, width, probes=8):
        self.rng = rng
        self.nodes = []
        self.initializers = []
        self.health = []
        # Probe inputs drawn from the same distribution as the calibration
        # data (standard normal), so the simulated batch-norm matches what the
        # quantizer will calibrate on.
        probe = rng.standard_normal((probes, channels, height, width), dtype=np.float32)
        self.values = {"input": probe.astype(np.float64)}
        self.input_shape = (1, channels, height, width)

    # -- helpers ---------------------------------------------------------------

    def channels(self, x):
        return self.values[x].shape[1]

    def spatial(self, x):
        return self.values[x].shape[2:]

    def _init(self, name, array):
        self.initializers.append(numpy_helper.from_array(np.asarray(array, dtype=np.float32), name))

    def _record(self, name, op, value, ceiling=None):
        """Remember how healthy an activation is on the probe inputs."""
        per_channel_max = np.abs(value).max(axis=tuple(i for i in range(value.ndim) if i != 1))
        self.health.append(
            {
                "name": name,
                "op": op,
                "zero_fraction": float(np.mean(value == 0)),
                "clipped_fraction": float(np.mean(value >= ceiling)) if ceiling else 0.0,
                "dead_channels": int(np.sum(per_channel_max == 0)),
                "channels": int(value.shape[1]),
                "std": float(value.std()),
            }
        )

    # -- ops -------------------------------------------------------------------

    def conv(self, x, name, out_channels, kernel, stride=1, pads=None, group=1, act=None):
        """Conv (+ folded batch-norm) (+ 'relu' or 'relu6' activation).

        kernel/stride: int or (h, w). pads: [top, left, bottom, right]; the
        default is symmetric (k-1)/2, i.e. [1,1,1,1] for 3x3 and 0 for 1x1.
        """
        kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
        sh, sw = (stride, stride) if isinstance(stride, int) else stride
        if pads is None:
            pads = [(kh - 1) // 2, (kw - 1) // 2, kh // 2, kw // 2]
        xv = self.values[x]
        cin = xv.shape[1]
        h, w = xv.shape[2:]
        ho = (h + pads[0] + pads[2] - kh) // sh + 1
        wo = (w + pads[1] + pads[3] - kw) // sw + 1
        if ho < 1 or wo < 1:
            raise ConfigError(
                "generator.resolution",
                f"the input is too small: layer {name} gets a {h}x{w} map and cannot apply a {kh}x{kw} kernel",
                "use a larger resolution",
            )
        fan_in = (cin // group) * kh * kw
        weight = self.rng.standard_normal((out_channels, cin // group, kh, kw)) * math.sqrt(2.0 / fan_in)
        y = _conv_forward(xv, weight, (sh, sw), pads, group)
        # Simulated batch-norm fold: per output channel, normalize the probe
        # pre-activations to mean `beta` and spread `gamma`.
        #
        # beta is centred on +1 (not 0) before a ReLU on purpose. A random
        # ReLU network whose channels are standardized is chaotic: with
        # beta = 0 a small perturbation of a layer's input grows by about
        # 1.2x per layer (half the units pass it, but the output is divided
        # by a spread that the ReLU has shrunk), so int8 rounding noise
        # swamps the signal after ~20 layers (MobileNetV1 float vs QDQ
        # logits: cosine ~0.5). With beta ~ 1 most units are in the linear
        # part of the ReLU, the gain is near 1, and the same comparison gives
        # cosine ~0.99 -- as for a trained network. Activations stay healthy:
        # about 15% zeros, almost nothing reaches 6. Linear layers (a
        # MobileNetV2 projection, the tiny net's residual branch) get a
        # signed output around 0.
        mean = y.mean(axis=(0, 2, 3))
        std = y.std(axis=(0, 2, 3))
        gamma = self.rng.uniform(0.5, 1.5, out_channels)
        beta = self.rng.normal(1.0 if act else 0.0, 0.2, out_channels)
        scale = gamma / np.where(std > 1e-12, std, 1.0)
        weight = (weight * scale[:, None, None, None]).astype(np.float32)
        bias = (beta - mean * scale).astype(np.float32)
        y = y * scale[None, :, None, None] + (beta - mean * scale)[None, :, None, None]

        self._init(f"{name}.weight", weight)
        self._init(f"{name}.bias", bias)
        conv_out = f"{name}.conv" if act else name
        self.nodes.append(
            helper.make_node(
                "Conv",
                [x, f"{name}.weight", f"{name}.bias"],
                [conv_out],
                name=name,
                kernel_shape=[kh, kw],
                strides=[sh, sw],
                pads=list(pads),
                dilations=[1, 1],
                group=group,
            )
        )
        self.values[conv_out] = y
        if act is None:
            self._record(name, "Conv", y)
            return name
        return self._activation(conv_out, name, act)

    def _activation(self, x, name, act):
        y = np.maximum(self.values[x], 0.0)
        if act == "relu":
            self.nodes.append(helper.make_node("Relu", [x], [name], name=f"{name}.relu"))
            self._record(name, "Relu", y)
        elif act == "relu6":
            # opset >= 11 Clip takes its bounds as (shared) scalar inputs.
            if not any(i.name == "relu6.min" for i in self.initializers):
                self._init("relu6.min", np.array(0.0))
                self._init("relu6.max", np.array(6.0))
            self.nodes.append(helper.make_node("Clip", [x, "relu6.min", "relu6.max"], [name], name=f"{name}.relu6"))
            y = np.minimum(y, 6.0)
            self._record(name, "Clip", y, ceiling=6.0)
        else:
            raise ValueError(act)
        self.values[name] = y
        return name

    def add(self, a, b, name):
        self.nodes.append(helper.make_node("Add", [a, b], [name], name=name))
        self.values[name] = self.values[a] + self.values[b]
        self._record(name, "Add", self.values[name])
        return name

    def maxpool(self, x, name, kernel=2, stride=2):
        xv = self.values[x]
        h, w = xv.shape[2:]
        ho, wo = (h - kernel) // stride + 1, (w - kernel) // stride + 1
        if ho < 1 or wo < 1:
            raise ConfigError(
                "generator.resolution",
                f"the input is too small: layer {name} gets a {h}x{w} map",
                "use a larger resolution",
            )
        y = np.full(xv.shape[:2] + (ho, wo), -np.inf)
        for i in range(kernel):
            for j in range(kernel):
                y = np.maximum(y, xv[:, :, i : i + (ho - 1) * stride + 1 : stride, j : j + (wo - 1) * stride + 1 : stride])
        self.nodes.append(
            helper.make_node(
                "MaxPool", [x], [name], name=name, kernel_shape=[kernel, kernel], strides=[stride, stride], pads=[0, 0, 0, 0]
            )
        )
        self.values[name] = y
        self._record(name, "MaxPool", y)
        return name

    def global_avgpool(self, x, name):
        self.nodes.append(helper.make_node("GlobalAveragePool", [x], [name], name=name))
        self.values[name] = self.values[x].mean(axis=(2, 3), keepdims=True)
        self._record(name, "GlobalAveragePool", self.values[name])
        return name

    def flatten(self, x, name):
        self.nodes.append(helper.make_node("Flatten", [x], [name], name=name, axis=1))
        v = self.values[x]
        self.values[name] = v.reshape(v.shape[0], -1)
        return name

    def classifier(self, x, name, classes, output="output"):
        """Gemm (transB=1, weight [classes, features]) producing the logits.

        A trained classifier's logits depend on the input; random weights on
        pooled features mostly give a constant vector instead (every pooled
        feature has a large input-independent mean). So the bias cancels the
        mean logit over the probe inputs and one shared factor scales the
        logits to unit spread: the output then moves with the input, which
        is what makes the float-vs-quantized comparison a real test.
        """
        xv = self.values[x]
        features = xv.shape[1]
        weight = self.rng.standard_normal((classes, features)) * math.sqrt(1.0 / features)
        logits = xv @ weight.T
        mean = logits.mean(axis=0)
        spread = (logits - mean).std()
        scale = 1.0 / spread if spread > 1e-12 else 1.0
        bias = -mean * scale + self.rng.normal(0.0, 0.1, classes)
        weight = weight * scale
        self._init(f"{name}.weight", weight)
        self._init(f"{name}.bias", bias)
        self.nodes.append(
            helper.make_node("Gemm", [x, f"{name}.weight", f"{name}.bias"], [output], name=name, transB=1)
        )
        self.values[output] = xv @ weight.T + bias
        return output

    # -- result ----------------------------------------------------------------

    def model(self, graph_name, output="output"):
        """The float ModelProto (opset 13, batch 1, "input" -> "output")."""
        classes = self.values[output].shape[1]
        graph = helper.make_graph(
            self.nodes,
            graph_name,
            [helper.make_tensor_value_info("input", TensorProto.FLOAT, list(self.input_shape))],
            [helper.make_tensor_value_info(output, TensorProto.FLOAT, [1, classes])],
            self.initializers,
        )
        model = helper.make_model(
            graph,
            opset_imports=[helper.make_opsetid("", OPSET)],
            producer_name="tessera.zoo",
            ir_version=IR_VERSION,
        )
        onnx.checker.check_model(model)
        return model

"""Corpus: TFLite files as the converters users use write them (issue 26).

Each model is a small network with seeded random weights; what matters is
the converter's graph form:

- tflite_uint8_detector: Keras -> TFLiteConverter, int8 body with uint8
  input and output (a camera pipeline's), LEAKY_RELU, a SPLIT of channels,
  a ShuffleNet channel shuffle (RESHAPE -> TRANSPOSE -> RESHAPE), a clip
  written as tf.maximum of a constant, RESIZE_NEAREST_NEIGHBOR, a PAD before
  a max pool; also converted by tf2onnx (tf2onnx_uint8_detector.onnx: the
  same graph as ONNX QDQ, its transposes in the middle);
- tflite_kws_flat: a flat KWS input viewed as a spectrogram (RESHAPE that
  changes the image), MEAN over one axis, a TRANSPOSE before it, a dynamic
  flatten (SHAPE -> STRIDED_SLICE -> PACK -> RESHAPE) and ARG_MAX at the
  output;
- tflite_tf1_uint8_qat: a TF1-style quantization-aware graph (fake-quant
  nodes, tf.compat.v1's converter, inference_type uint8): uint8 activations
  and asymmetric uint8 weights throughout, uint8 SOFTMAX.

Run in the converters' environment (tests/corpus/README.md):

    /work/wt/convenv/bin/python tools/corpus/make_tflite_files.py tests/corpus [model ...]
"""

import os
import sys
import tempfile

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import tensorflow as tf  # noqa: E402

L = tf.keras.layers
BIAS = {"bias_initializer": "random_normal"}


def _shuffle(x, groups=2):
    h, w, c = x.shape[1:]
    x = L.Reshape((h, w, groups, c // groups))(x)
    x = L.Permute((1, 2, 4, 3))(x)
    return L.Reshape((h, w, c))(x)


def uint8_detector():
    x = inp = L.Input((24, 24, 3), batch_size=1)
    x = L.Conv2D(16, 3, strides=2, padding="same", **BIAS)(x)
    x = L.LeakyReLU(negative_slope=0.1)(x)
    a, b = L.Lambda(lambda t: tf.split(t, 2, axis=-1))(x)
    b = L.DepthwiseConv2D(3, padding="same", **BIAS)(b)
    b = L.Conv2D(8, 1, activation="relu", **BIAS)(b)
    x = L.Concatenate()([a, b])
    x = _shuffle(x)
    y = L.Conv2D(16, 3, strides=2, padding="same", **BIAS)(x)
    y = L.LeakyReLU(negative_slope=0.2)(y)
    y = L.Lambda(lambda t: tf.maximum(t, -0.5))(y)
    # Keras 3's UpSampling2D writes TILE version 3, which ai-edge-litert 2.3 cannot run
    y = L.Lambda(lambda t: tf.image.resize(t, (12, 12), method="nearest"))(y)
    x = L.Concatenate()([x, y])
    x = L.ZeroPadding2D(((1, 0), (1, 0)))(x)
    x = L.MaxPooling2D(2)(x)
    x = L.Conv2D(12, 1, **BIAS)(x)
    return tf.keras.Model(inp, x)


def kws_flat():
    x = inp = L.Input((490,), batch_size=1)
    x = L.Reshape((49, 10, 1))(x)
    x = L.Conv2D(8, (5, 3), strides=(2, 1), padding="same", activation="relu", **BIAS)(x)
    x = L.DepthwiseConv2D(3, padding="same", activation="relu", **BIAS)(x)
    x = L.Conv2D(12, 1, activation="relu", **BIAS)(x)
    x = L.Lambda(lambda t: tf.reduce_mean(t, axis=2, keepdims=True))(x)     # over the 10 features
    x = L.Permute((3, 1, 2))(x)                                               # [12, 25, 1]
    x = L.Lambda(lambda t: tf.reshape(t, [tf.shape(t)[0], -1]))(x)           # dynamic flatten
    x = L.Dense(6, **BIAS)(x)
    x = L.Lambda(lambda t: tf.argmax(t, axis=-1))(x)
    return tf.keras.Model(inp, x)


def _int8(model, seed, io=tf.int8, calibration_shape=None):
    rng = np.random.default_rng(seed)
    shape = calibration_shape or [1] + list(model.input_shape[1:])

    def data():
        for _ in range(16):
            yield [rng.standard_normal(shape).astype(np.float32)]
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = data
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_input_type = io
    conv.inference_output_type = io
    return conv.convert()


def tf1_uint8_qat(seed):
    """Fake-quant nodes on every activation and weight (asymmetric weight
    ranges: uint8 weights with zero points far from 128), converted by
    tf.compat.v1's TFLiteConverter with inference_type uint8."""
    tf1 = tf.compat.v1
    rng = np.random.default_rng(seed)
    g = tf1.Graph()

    def fq(t, lo, hi):
        return tf1.quantization.fake_quant_with_min_max_args(t, min=lo, max=hi, num_bits=8)

    def const(*shape, scale=0.3):
        return tf1.constant((rng.standard_normal(shape) * scale).astype(np.float32))
    with g.as_default():
        x = tf1.placeholder(tf.float32, [1, 16, 16, 3], name="input")
        h = fq(x, -1.0, 1.0)
        h = tf1.nn.conv2d(h, fq(const(3, 3, 3, 8), -0.6, 1.0), [1, 2, 2, 1], "SAME") + const(8, scale=0.1)
        h = fq(tf1.nn.relu6(h), 0.0, 6.0)
        h = tf1.nn.depthwise_conv2d(h, fq(const(3, 3, 8, 1), -1.2, 0.5), [1, 1, 1, 1], "SAME") + const(8, scale=0.1)
        h = fq(tf1.nn.relu6(h), 0.0, 6.0)
        h = tf1.nn.conv2d(h, fq(const(1, 1, 8, 12), -0.9, 0.7), [1, 1, 1, 1], "VALID") + const(12, scale=0.1)
        h = fq(tf1.nn.relu(h), 0.0, 4.0)
        h = fq(tf1.nn.avg_pool2d(h, 8, 8, "VALID"), 0.0, 4.0)
        h = tf1.reshape(h, [1, 12])
        h = fq(tf1.matmul(h, fq(const(12, 4), -0.8, 0.8)) + const(4, scale=0.1), -4.0, 4.0)
        out = fq(tf1.nn.softmax(h, name="output"), 0.0, 255.0 / 256.0)
        with tf1.Session(graph=g) as sess:
            conv = tf1.lite.TFLiteConverter.from_session(sess, [x], [out])
            conv.inference_type = tf.uint8
            conv.quantized_input_stats = {"input": (127.5, 127.5)}
            return conv.convert()


SEEDS = {"tflite_uint8_detector": 0, "tflite_kws_flat": 1, "tflite_tf1_uint8_qat": 2}
ONNX_TOO = {"tflite_uint8_detector": "tf2onnx_uint8_detector"}


def main(out_dir):
    import tf2onnx

    os.makedirs(out_dir, exist_ok=True)
    only = set(sys.argv[2:])
    for name, seed in sorted(SEEDS.items()):
        if only and name not in only:
            continue
        tf.keras.utils.set_random_seed(seed)
        if name == "tflite_tf1_uint8_qat":
            blob = tf1_uint8_qat(seed)
        elif name == "tflite_uint8_detector":
            blob = _int8(uint8_detector(), seed, io=tf.uint8)
        else:
            blob = _int8(kws_flat(), seed)
        path = os.path.join(out_dir, name + ".tflite")
        with open(path, "wb") as f:
            f.write(blob)
        print(f"{path}: {len(blob)} bytes")
        if name in ONNX_TOO:
            onnx_path = os.path.join(out_dir, ONNX_TOO[name] + ".onnx")
            with tempfile.TemporaryDirectory():
                # tf2onnx's defaults, as `python -m tf2onnx.convert --tflite`
                tf2onnx.convert.from_tflite(path, output_path=onnx_path)
            print(f"{onnx_path}: {os.path.getsize(onnx_path)} bytes")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/corpus")

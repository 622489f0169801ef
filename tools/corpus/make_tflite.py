"""Corpus: int8 TFLite models converted to ONNX with tf2onnx, as users do.

Each model is a small Keras network with seeded random weights, converted
by TensorFlow's TFLiteConverter to a fully int8 model (int8 input and
output, representative dataset of seeded random inputs), then by tf2onnx
with its default options. What matters is the converters' graph form, not
the weights. Run in a separate environment with the converters (they are
not tessera dependencies; see tests/corpus/README.md):

    /work/wt/convenv/bin/python tools/corpus/make_tflite.py tests/corpus [model ...]
"""

import os
import sys
import tempfile

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import tensorflow as tf  # noqa: E402
import tf2onnx  # noqa: E402

L = tf.keras.layers
# non-zero biases, so that the converters keep one bias per layer
BIAS = {"bias_initializer": "random_normal"}


def kws_ds_cnn():
    """A DS-CNN keyword spotter (49x10 MFCC, NHWC): ZeroPadding2D before
    the first conv and a pool, depthwise-separable blocks, Flatten, Dense."""
    x = inp = L.Input((49, 10, 1), batch_size=1)
    x = L.ZeroPadding2D(((2, 2), (1, 1)))(x)
    x = L.Conv2D(16, (5, 3), strides=(2, 2), activation="relu", **BIAS)(x)
    for _ in range(2):
        x = L.DepthwiseConv2D(3, padding="same", activation="relu", **BIAS)(x)
        x = L.Conv2D(16, 1, activation="relu", **BIAS)(x)
    x = L.ZeroPadding2D(((1, 0), (1, 0)))(x)
    x = L.AveragePooling2D((2, 2))(x)
    x = L.Flatten()(x)
    x = L.Dense(8, **BIAS)(x)
    return tf.keras.Model(inp, x)


def keras_permute():
    """A channel-first input permuted to channel-last (Keras Permute), zero
    padding chained twice, a residual add, max pooling, global pooling."""
    x = inp = L.Input((3, 16, 16), batch_size=1)
    x = L.Permute((2, 3, 1))(x)
    x = L.ZeroPadding2D(1)(x)
    x = L.ZeroPadding2D(((1, 0), (0, 1)))(x)
    x = L.Conv2D(8, 3, strides=2, activation="relu", **BIAS)(x)
    y = L.Conv2D(8, 3, padding="same", activation="relu", **BIAS)(x)
    x = L.Add()([x, y])
    x = L.MaxPooling2D(2)(x)
    x = L.Conv2D(16, 1, activation="relu6", **BIAS)(x)
    x = L.GlobalAveragePooling2D()(x)
    x = L.Dense(4, **BIAS)(x)
    return tf.keras.Model(inp, x)


def float_io_image():
    """An image classifier with float input and output around the int8
    network (TFLite's QUANTIZE and DEQUANTIZE at the ends): a float NHWC
    input permuted by tf2onnx, a final DequantizeLinear."""
    x = inp = L.Input((24, 24, 3), batch_size=1)
    x = L.Conv2D(8, 3, strides=2, padding="same", activation="relu", **BIAS)(x)
    x = L.DepthwiseConv2D(3, padding="same", activation="relu", **BIAS)(x)
    x = L.Conv2D(16, 1, activation="relu", **BIAS)(x)
    x = L.GlobalAveragePooling2D()(x)
    x = L.Dense(3, **BIAS)(x)
    return tf.keras.Model(inp, x)


def seg_se_hardswish():
    """TFLite's forms of the newer ops: hardswish, squeeze-and-excitation
    (global pool, dense, hard sigmoid, broadcast multiply), a dilated
    convolution, bilinear and nearest upsampling, concatenation on the
    channel axis, an int8 softmax over the channels of every pixel."""
    x = inp = L.Input((16, 16, 3), batch_size=1)
    a = L.Conv2D(8, 3, padding="same", **BIAS)(x)
    a = L.Activation("hard_swish")(a)
    b = L.Conv2D(16, 3, strides=2, padding="same", activation="relu", **BIAS)(a)
    se = L.GlobalAveragePooling2D(keepdims=True)(b)
    se = L.Conv2D(4, 1, activation="relu", **BIAS)(se)
    se = L.Conv2D(16, 1, activation="hard_sigmoid", **BIAS)(se)
    b = L.Multiply()([b, se])
    c = L.Conv2D(16, 3, dilation_rate=2, padding="same", activation="relu", **BIAS)(b)
    u = L.UpSampling2D(2, interpolation="bilinear")(c)
    m = L.Concatenate()([u, a])
    m = L.Conv2D(8, 3, padding="same", activation="relu", **BIAS)(m)
    n = L.UpSampling2D(1, interpolation="nearest")(m)
    y = L.Conv2D(4, 1, **BIAS)(n)
    y = L.Softmax()(y)
    return tf.keras.Model(inp, y)


MODELS = {"tflite_seg_se_hardswish": seg_se_hardswish, "tflite_kws_ds_cnn": kws_ds_cnn, "tflite_keras_permute": keras_permute,
          "tflite_float_io_image": float_io_image}
FLOAT_IO = ("tflite_float_io_image",)
# one fixed seed per model (the committed files were made with these)
SEEDS = {"tflite_seg_se_hardswish": 3, "tflite_float_io_image": 0, "tflite_keras_permute": 0, "tflite_kws_ds_cnn": 1}


def to_int8_tflite(model, seed, float_io=False):
    rng = np.random.default_rng(seed)
    shape = [1] + list(model.input_shape[1:])

    def data():
        for _ in range(16):
            yield [rng.standard_normal(shape).astype(np.float32)]
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = data
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    if not float_io:
        conv.inference_input_type = tf.int8
        conv.inference_output_type = tf.int8
    return conv.convert()


def main(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    only = set(sys.argv[2:])
    for name, make in sorted(MODELS.items()):
        if only and name not in only:
            continue
        i = SEEDS[name]
        tf.keras.utils.set_random_seed(i)
        model = make()
        blob = to_int8_tflite(model, seed=i, float_io=name in FLOAT_IO)
        with tempfile.TemporaryDirectory() as tmp:
            tfl = os.path.join(tmp, name + ".tflite")
            with open(tfl, "wb") as f:
                f.write(blob)
            path = os.path.join(out_dir, name + ".onnx")
            # tf2onnx's defaults (opset 15 in 1.17), as `python -m tf2onnx.convert --tflite`
            tf2onnx.convert.from_tflite(tfl, output_path=path)
        print(f"{path}: {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/corpus")

#!/usr/bin/env python3
"""Make small int8 .tflite models with TensorFlow's converter, covering every
operator tessera's TFLite import lowers (not run by the tests; the tests use
the committed files in tests/data/tflite/).

TensorFlow is not a tessera dependency: run this with a separate venv, e.g.

    python3 -m venv /work/wt/tfenv && /work/wt/tfenv/bin/pip install tensorflow-cpu==2.20.0
    /work/wt/tfenv/bin/python tools/tflite_models.py tests/data/tflite

Weights and the calibration data are seeded; full integer quantization
(per-channel convolution weights, per-tensor dense weights, as the
converter does by default).
"""

import os
import sys

import numpy as np


def build(tf, name):
    L = tf.keras.layers
    if name == "convs":
        # float input and output: QUANTIZE and DEQUANTIZE at the edges
        x = inp = L.Input((16, 16, 3), batch_size=1)
        x = L.Conv2D(8, 3, strides=2, padding="same", activation="relu")(x)         # CONV_2D, SAME, RELU
        x = L.DepthwiseConv2D(3, padding="same", activation="relu6")(x)             # DEPTHWISE, RELU6
        x = L.DepthwiseConv2D(3, depth_multiplier=2, padding="valid")(x)            # multiplier 2
        x = L.Conv2D(12, 1)(x)                                                      # 1x1 (pointwise)
        x = L.ZeroPadding2D(((1, 0), (0, 1)))(x)                                    # PAD (folded)
        x = L.Conv2D(8, 3, padding="valid", activation="relu")(x)
        x = L.AveragePooling2D(2)(x)                                                # AVERAGE_POOL_2D
        x = L.Flatten()(x)                                                          # RESHAPE
        x = L.Dense(16, activation="relu")(x)                                       # FULLY_CONNECTED
        x = L.Dense(5)(x)
        return tf.keras.Model(inp, x), False
    if name == "residual":
        # int8 input and output; ADD of two differently scaled branches
        x = inp = L.Input((12, 12, 4), batch_size=1)
        x = L.Conv2D(8, 3, padding="same", activation="relu")(x)
        a = L.Conv2D(8, 3, padding="same")(x)
        b = L.Conv2D(8, 1)(x)
        x = L.Add()([a, b])                                                         # ADD
        x = L.ReLU()(x)
        x = L.MaxPooling2D(2, strides=2, padding="valid")(x)                        # MAX_POOL_2D
        y = L.Conv2D(8, 3, padding="same")(x)
        x = L.Add()([x, y])
        x = L.AveragePooling2D(6)(x)
        x = L.Reshape((8,))(x)                                                      # RESHAPE
        x = L.Dense(3)(x)
        return tf.keras.Model(inp, x), True
    if name == "pad_pool":
        # a PAD that is not folded (a max pool reads it), SAME max pooling
        x = inp = L.Input((10, 10, 6), batch_size=1)
        x = L.Conv2D(6, 3, padding="same")(x)
        x = L.ZeroPadding2D(1)(x)                                                   # PAD -> depthwise identity
        x = L.MaxPooling2D(3, strides=2, padding="same")(x)                         # SAME max pool
        x = L.DepthwiseConv2D(3, strides=2, padding="same", activation="relu")(x)   # strided depthwise
        x = L.Flatten()(x)
        x = L.Dense(4)(x)
        return tf.keras.Model(inp, x), True
    if name.startswith(("logistic", "hard_swish", "tanh")):
        # one activation on all 256 int8 inputs (16x16): its table is
        # compared with the interpreter; _wide: calibrated on 4x the range
        x = inp = L.Input((16, 16, 1), batch_size=1)
        x = L.Activation({"logistic": "sigmoid", "hard_swish": "hard_swish", "tanh": "tanh"}[name.split("_w")[0]])(x)
        return tf.keras.Model(inp, x), True
    if name == "issue10_ops":
        # MUL (same shape and squeeze-and-excitation broadcast), CONCATENATION,
        # LOGISTIC, HARD_SWISH: lowered onto issue 10's IR ops
        x = inp = L.Input((6, 6, 4), batch_size=1)
        x = L.Conv2D(8, 3, padding="same")(x)
        a = L.Activation("hard_swish")(x)
        g = L.AveragePooling2D(6)(a)
        g = L.Conv2D(8, 1, activation="sigmoid")(g)
        x = L.Multiply()([a, g])
        b = L.Conv2D(4, 1)(x)
        x = L.Concatenate(axis=-1)([x, b])
        x = L.Multiply()([x, x])
        return tf.keras.Model(inp, x), True
    if name == "mean":
        # GlobalAveragePooling2D converts to MEAN (rescaled), reduce_mean with keepdims too
        x = inp = L.Input((7, 5, 6), batch_size=1)
        x = L.Conv2D(8, 3, padding="same")(x)
        a = L.GlobalAveragePooling2D()(x)
        b = L.Lambda(lambda t: tf.reduce_mean(t, axis=[1, 2], keepdims=True))(L.ReLU()(x))
        b = L.Reshape((8,))(b)
        x = L.Add()([a, b])
        x = L.Dense(3)(x)
        return tf.keras.Model(inp, x), True
    if name == "softmax":
        # a SOFTMAX over 10 values, its recipe checked against the interpreter
        x = inp = L.Input((1, 1, 10), batch_size=1)
        x = L.Softmax()(x)
        return tf.keras.Model(inp, x), True
    if name in ("unsupported_float", "unsupported_int16"):
        x = inp = L.Input((4, 4, 2), batch_size=1)
        x = L.Conv2D(4, 3, padding="same", activation="relu")(x)
        return tf.keras.Model(inp, x), True
    if name == "unsupported_transpose":
        # TRANSPOSE: tessera names it in one line
        x = inp = L.Input((4, 6, 4), batch_size=1)
        x = L.Conv2D(4, 1)(x)
        x = L.Lambda(lambda t: tf.transpose(t, [0, 2, 1, 3]))(x)
        return tf.keras.Model(inp, x), True
    if name == "dilated":
        # dilated CONV_2D (VALID, and SAME on the dilated extent) and DEPTHWISE_CONV_2D
        x = inp = L.Input((11, 9, 3), batch_size=1)
        x = L.Conv2D(6, 3, dilation_rate=2, activation="relu")(x)
        x = L.Conv2D(6, 3, dilation_rate=(2, 3), padding="same")(x)
        x = L.DepthwiseConv2D(3, dilation_rate=2, padding="same", activation="relu6")(x)
        return tf.keras.Model(inp, x), True
    if name == "const_image_mul":
        # MUL by constants that vary over the image (MoveNet's centre
        # weighting, [H, W, 1]; and one of the activation's whole shape)
        x = inp = L.Input((12, 10, 3), batch_size=1)
        x = L.Conv2D(4, 3, padding="same", activation="relu")(x)
        rng = np.random.default_rng(7)
        centre = tf.constant(rng.uniform(0.1, 1.0, (12, 10, 1)).astype(np.float32))
        whole = tf.constant(rng.uniform(-2.0, 2.0, (1, 12, 10, 4)).astype(np.float32))
        x = L.Lambda(lambda t: t * centre)(x)
        x = L.Lambda(lambda t: t * whole)(x)
        x = L.Conv2D(2, 1)(x)
        return tf.keras.Model(inp, x), True
    raise SystemExit(f"unknown model {name}")


# the first three cover every supported operator; the tables of the next
# four are checked; then two errors; the last needs issue 10's IR ops
MODELS = ("convs", "residual", "pad_pool", "logistic", "logistic_wide", "hard_swish", "hard_swish_wide",
          "unsupported_transpose", "dilated", "issue10_ops", "mean", "softmax",
          "unsupported_float", "unsupported_int16", "tanh", "tanh_wide", "const_image_mul")


def convert(tf, model, int8_io, seed, spread=1.0, kind="int8"):
    rng = np.random.default_rng(seed)
    shape = [1] + list(model.input_shape[1:])

    def data():
        for _ in range(16):
            yield [(spread * rng.standard_normal(shape)).astype(np.float32)]

    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    if kind == "float":
        return conv.convert()
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = data
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    if kind == "int16":
        conv.target_spec.supported_ops = [tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8]
        return conv.convert()
    if int8_io:
        conv.inference_input_type = tf.int8
        conv.inference_output_type = tf.int8
    return conv.convert()


def main(argv):
    if len(argv) < 2:
        print("usage: tflite_models.py OUTDIR [NAME ...]", file=sys.stderr)
        return 2
    import tensorflow as tf

    os.makedirs(argv[1], exist_ok=True)
    only = set(argv[2:])
    for i, name in enumerate(MODELS):
        if only and name not in only:
            continue
        tf.keras.utils.set_random_seed(i)
        model, int8_io = build(tf, name)
        kind = {"unsupported_float": "float", "unsupported_int16": "int16"}.get(name, "int8")
        blob = convert(tf, model, int8_io, seed=i, spread=4.0 if name.endswith("_wide") else 1.0, kind=kind)
        path = os.path.join(argv[1], name + ".tflite")
        with open(path, "wb") as f:
            f.write(blob)
        print(f"{path}: {len(blob)} bytes (TensorFlow {tf.__version__})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""The bad-input corpus as data: each case writes a target YAML, a model
YAML (and the files it names) into a scratch folder and says which words
the one error line must hold besides the file's path.

    TARGET_CASES: (id, edit of targets/host.yaml's data, words)
    RAW_TARGET_CASES / RAW_MODEL_CASES: (id, YAML text, words)
    MODEL_CASES: (id, model YAML data with {onnx} for the ONNX file, words)
    ONNX_CASES: (id, edit of tiny's ONNX ModelProto, words)
    REFERENCE_CASES: (id, {file name: text} of a DORY folder, words)
"""


def _set(path, value):
    """An edit that sets the dotted key `path` (a[0] indexes a list)."""
    def edit(data):
        node = data
        keys = path.split(".")
        for k in keys[:-1]:
            node = node[int(k)] if isinstance(node, list) else node[k]
        last = keys[-1]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value
        return data
    return edit


def _drop(path):
    def edit(data):
        node = data
        keys = path.split(".")
        for k in keys[:-1]:
            node = node[int(k)] if isinstance(node, list) else node[k]
        del node[keys[-1]]
        return data
    return edit


TARGET_CASES = [
    ("l1-1e30", _set("memory.L1.size", 10 ** 30), ["memory.L1.size"]),
    ("l2-2pow63", _set("memory.L2.size", 2 ** 63), ["memory.L2.size"]),
    ("l2-2pow32", _set("memory.L2.size", 2 ** 32 + 1), ["memory.L2.size"]),
    ("l1-float", _set("memory.L1.size", 1e30), ["memory.L1.size", "integer"]),
    ("l1-zero", _set("memory.L1.size", 0), ["memory.L1.size"]),
    ("l1-negative", _set("memory.L1.size", -5), ["memory.L1.size"]),
    ("l1-string", _set("memory.L1.size", "64k"), ["memory.L1.size"]),
    ("l1-bool", _set("memory.L1.size", True), ["memory.L1.size"]),
    ("l1-null", _set("memory.L1.size", None), ["memory.L1.size"]),
    ("l1-nan", _set("memory.L1.size", float("nan")), ["memory.L1.size"]),
    ("address-beyond", _set("memory.L2.address", 2 ** 32 - 16), ["memory.L2"]),
    ("address-negative", _set("memory.L2.address", -1), ["memory.L2.address"]),
    ("reserved-all", _set("memory.L1.reserved", {"stacks": 64000}), ["memory.L1.reserved"]),
    ("reserved-negative", _set("memory.L1.reserved", {"stacks": -1}), ["memory.L1.reserved.stacks"]),
    ("reserved-list", _set("memory.L1.reserved", [1, 2]), ["memory.L1.reserved"]),
    ("kind-unknown", _set("memory.L1.kind", "cache"), ["memory.L1.kind", "cache"]),
    ("writable-string", _set("memory.L1.writable", "yes"), ["memory.L1.writable"]),
    ("memory-empty", _set("memory", {}), ["memory"]),
    ("memory-list", _set("memory", ["L1"]), ["memory"]),
    ("level-unknown-key", _set("memory.L1.bytes", 10), ["memory.L1.bytes", "unknown key"]),
    ("cores-0", _set("cores", 0), ["cores"]),
    ("cores-4-cortexm-host", _set("cores", 1000), ["cores"]),
    ("cores-float", _set("cores", 2.5), ["cores"]),
    ("cores-missing", _drop("cores"), ["cores", "missing"]),
    ("platform-unknown", _set("platform", "esp32"), ["platform", "esp32"]),
    ("platform-int", _set("platform", 3), ["platform"]),
    ("kernels-unknown", _set("kernels", "tflm"), ["kernels", "tflm"]),
    ("kernels-missing", _drop("kernels"), ["kernels"]),
    ("kernels-path", _set("kernels", "../../etc"), ["kernels"]),
    ("place-tiles-unknown", _set("place.tiles", "L4"), ["place.tiles", "L4"]),
    ("place-acts-unknown", _set("place.activations", "LL2"), ["place.activations", "LL2"]),
    ("place-weights-unknown", _set("place.weights", "rom"), ["place.weights", "rom"]),
    ("place-tiles-readonly", _set("place.tiles", "flash"), ["place.tiles", "flash"]),
    ("place-acts-readonly", _set("place.activations", "flash"), ["place.activations", "flash"]),
    ("place-missing", _drop("place"), ["place"]),
    ("place-extra", _set("place.code", "L2"), ["place.code"]),
    ("dma-src-unknown", _set("dma.0.src", "L9"), ["dma[0].src", "L9"]),
    ("dma-dst-unknown", _set("dma.1.dst", "L9"), ["dma[1].dst", "L9"]),
    ("dma-dims-4", _set("dma.0.dims", 4), ["dma[0].dims"]),
    ("dma-bandwidth-neg", _set("dma.0.bandwidth", -1), ["dma[0].bandwidth"]),
    ("dma-bandwidth-nan", _set("dma.0.bandwidth", float("nan")), ["dma[0].bandwidth"]),
    ("dma-bandwidth-inf", _set("dma.0.bandwidth", float("inf")), ["dma[0].bandwidth"]),
    ("dma-not-list", _set("dma", {"name": "x"}), ["dma"]),
    ("dma-name-missing", _drop("dma.0.name"), ["dma[0].name"]),
    ("toolchain-kind", _set("toolchain.kind", "msvc"), ["toolchain.kind", "msvc"]),
    ("cc-empty", _set("toolchain.cc", ""), ["toolchain.cc"]),
    ("cc-blank", _set("toolchain.cc", "   "), ["toolchain.cc"]),
    ("cc-missing", _drop("toolchain.cc"), ["toolchain.cc"]),
    ("cc-list", _set("toolchain.cc", ["gcc"]), ["toolchain.cc"]),
    ("ar-empty", _set("toolchain.ar", ""), ["toolchain.ar"]),
    ("cflags-string", _set("toolchain.cflags", "-O2"), ["toolchain.cflags"]),
    ("cflags-int", _set("toolchain.cflags", [2]), ["toolchain.cflags[0]"]),
    ("cflags-empty-item", _set("toolchain.cflags", ["-O2", ""]), ["toolchain.cflags[1]"]),
    ("isa-unknown", _set("toolchain.isa", ["rvv"]), ["toolchain.isa[0]", "rvv"]),
    ("isa-xpulp-host", _set("toolchain.isa", ["xpulpv2"]), ["toolchain.isa"]),
    ("runner-kind", _set("runner.kind", "renode"), ["runner.kind", "renode"]),
    ("runner-timeout-0", _set("runner.timeout", 0), ["runner.timeout"]),
    ("runner-qemu-no-program", _set("runner.kind", "qemu"), ["runner.program"]),
    ("runner-counts", _set("runner.counts", "cycles"), ["runner.counts"]),
    ("description-missing", _drop("description"), ["description"]),
    ("unknown-top-key", _set("clock", 100), ["clock", "unknown key"]),
    ("flash-1000", _set("memory.flash.size", 1000), ["flash", "1,000 B"]),
]

ALIAS_BOMB = "\n".join(["a: &a [x, x, x, x, x, x, x, x, x, x]"] +
                       [f"{chr(98 + i)}: &{chr(98 + i)} [" + ", ".join([f"*{chr(97 + i)}"] * 10) + "]"
                        for i in range(8)]) + "\n"

RAW_TARGET_CASES = [
    ("empty-file", "", ["mapping"]),
    ("only-comment", "# nothing\n", ["mapping"]),
    ("a-list", "- a\n- b\n", ["mapping"]),
    ("a-scalar", "42\n", ["mapping"]),
    ("bad-indent", "memory:\n  L1:\n size: 3\n", ["invalid YAML"]),
    ("tab", "memory:\n\tL1: 1\n", ["invalid YAML"]),
    ("unclosed-quote", "description: \"abc\n", ["invalid YAML"]),
    ("unclosed-bracket", "cores: [1, 2\n", ["invalid YAML"]),
    ("duplicate-key", "cores: 1\ncores: 2\n", ["duplicate key", "cores"]),
    ("python-tag", "cores: !!python/object:os.system [ls]\n", ["line"]),
    ("unknown-tag", "cores: !foo 3\n", ["line"]),
    ("alias-bomb", ALIAS_BOMB, ["unknown key"]),
    ("undefined-alias", "cores: *nothing\n", ["invalid YAML"]),
    ("nul-byte", "cores: 1\x00\n", ["YAML"]),
    ("binary", "\x89PNG\r\n\x1a\n", ["YAML"]),
]

RAW_MODEL_CASES = [
    ("empty", "", ["mapping"]),
    ("no-source", "description: x\n", ["onnx", "generator"]),
    ("two-sources", "description: x\nonnx: a.onnx\ngenerator: {arch: tiny, resolution: 8, classes: 2}\n",
     ["exactly one"]),
    ("onnx-missing-file", "description: x\nonnx: nowhere.onnx\n", ["onnx", "nowhere.onnx"]),
    ("onnx-int", "description: x\nonnx: 3\n", ["onnx"]),
    ("tflite-missing-file", "description: x\ntflite: nowhere.tflite\n", ["tflite", "nowhere.tflite"]),
    ("gen-arch-unknown", "description: x\ngenerator: {arch: resnet, resolution: 8, classes: 2}\n", ["arch", "resnet"]),
    ("gen-resolution-0", "description: x\ngenerator: {arch: tiny, resolution: 0, classes: 2}\n",
     ["generator.resolution"]),
    ("gen-resolution-3d", "description: x\ngenerator: {arch: tiny, resolution: [8, 8, 8], classes: 2}\n",
     ["generator.resolution"]),
    ("gen-resolution-str", "description: x\ngenerator: {arch: tiny, resolution: big, classes: 2}\n",
     ["generator.resolution"]),
    ("gen-classes-0", "description: x\ngenerator: {arch: tiny, resolution: 8, classes: 0}\n",
     ["generator.classes"]),
    ("gen-width-0", "description: x\ngenerator: {arch: tiny, width: 0, resolution: 8, classes: 2}\n",
     ["generator.width"]),
    ("gen-width-nan", "description: x\ngenerator: {arch: tiny, width: .nan, resolution: 8, classes: 2}\n",
     ["generator.width"]),
    ("gen-width-inf", "description: x\ngenerator: {arch: tiny, width: .inf, resolution: 8, classes: 2}\n",
     ["generator.width"]),
    ("gen-seed-neg", "description: x\ngenerator: {arch: tiny, resolution: 8, classes: 2, seed: -1}\n",
     ["generator.seed"]),
    ("gen-unknown-key", "description: x\ngenerator: {arch: tiny, resolution: 8, classes: 2, depth: 3}\n",
     ["generator.depth"]),
    ("quant-samples-0", "description: x\ngenerator: {arch: tiny, resolution: 8, classes: 2}\n"
     "quantization: {calibration_samples: 0}\n", ["quantization.calibration_samples"]),
    ("input-seed-str", "description: x\ngenerator: {arch: tiny, resolution: 8, classes: 2}\ninput: {seed: a}\n",
     ["input.seed"]),
    ("ort-check-bad", "description: x\ngenerator: {arch: tiny, resolution: 8, classes: 2}\nort_check: maybe\n",
     ["ort_check"]),
    ("reference-with-generator", "description: x\ngenerator: {arch: tiny, resolution: 8, classes: 2}\n"
     "reference: {kind: dory, dir: .}\n", ["reference"]),
    ("reference-kind", "description: x\nonnx: net.onnx\nreference: {kind: tvm, dir: .}\n", ["reference.kind"]),
    ("reference-dir-missing", "description: x\nonnx: net.onnx\nreference: {kind: dory, dir: nowhere}\n",
     ["reference.dir"]),
    ("input-shape-generator", "description: x\ngenerator: {arch: tiny, resolution: 8, classes: 2}\n"
     "input_shape: [1, 3, 8, 8]\n", ["input_shape"]),
    ("input-shape-zero", "description: x\nonnx: net.onnx\ninput_shape: [1, 3, 0, 8]\n", ["input_shape"]),
    ("input-shape-str", "description: x\nonnx: net.onnx\ninput_shape: big\n", ["input_shape"]),
    ("description-missing", "onnx: net.onnx\n", ["description"]),
    ("merge-key-bad", "base: &b {arch: tiny}\ndescription: x\ngenerator:\n  <<: *b\n  resolution: 8\n"
     "  classes: 2\n", ["base", "unknown key"]),
]


# ---- ONNX: edits of the tiny QDQ network's ModelProto -----------------------

def _init(m, name):
    return next(i for i in m.graph.initializer if i.name == name)


def _node(m, name):
    return next(n for n in m.graph.node if n.name == name)


def _float_init(name, values):
    def edit(m):
        import numpy as np
        from onnx import numpy_helper
        old = _init(m, name)
        old.CopyFrom(numpy_helper.from_array(np.asarray(values, dtype=np.float32).reshape(tuple(old.dims)), name))
        return m
    return edit


def _input_dim(i, value):
    def edit(m):
        d = m.graph.input[0].type.tensor_type.shape.dim[i]
        if isinstance(value, str):
            d.dim_param = value
        else:
            d.dim_value = value
        return m
    return edit


def _opset(v):
    def edit(m):
        m.opset_import[0].version = v
        return m
    return edit


def _input_type(t):
    def edit(m):
        m.graph.input[0].type.tensor_type.elem_type = t
        return m
    return edit


def _attr(node, name, value):
    def edit(m):
        from onnx import helper
        n = _node(m, node)
        for a in list(n.attribute):
            if a.name == name:
                n.attribute.remove(a)
        n.attribute.append(helper.make_attribute(name, value))
        return m
    return edit


def _scale_len(name, n):
    def edit(m):
        import numpy as np
        from onnx import numpy_helper
        i = _init(m, name)
        arr = numpy_helper.to_array(i)
        i.CopyFrom(numpy_helper.from_array(np.resize(arr, n).astype(arr.dtype), name))
        return m
    return edit


def _raw(name, data):
    def edit(m):
        i = _init(m, name)
        i.raw_data = data
        return m
    return edit


def _float16_scale(name):
    def edit(m):
        import numpy as np
        from onnx import numpy_helper
        i = _init(m, name)
        arr = numpy_helper.to_array(i).astype(np.float16)
        i.CopyFrom(numpy_helper.from_array(arr, name))
        return m
    return edit


def _two_producers(m):
    a, b = [n for n in m.graph.node if n.op_type == "QuantizeLinear"][:2]
    b.output[0] = a.output[0]
    return m


def _drop_init(name):
    def edit(m):
        m.graph.initializer.remove(_init(m, name))
        return m
    return edit


def _external(m):
    i = _init(m, "conv0.weight_quantized")
    i.ClearField("raw_data")
    i.data_location = 1   # EXTERNAL
    e = i.external_data.add()
    e.key, e.value = "location", "weights.bin"
    return m


def _sigmoid_after_first_conv(m):
    from onnx import helper
    conv = next(n for n in m.graph.node if n.op_type == "Conv")
    out = conv.output[0]
    conv.output[0] = out + "_pre"
    m.graph.node.insert(list(m.graph.node).index(conv) + 1,
                        helper.make_node("Sigmoid", [out + "_pre"], [out], name="the_sigmoid"))
    return m


NAN, INF = float("nan"), float("inf")

ONNX_CASES = [
    ("input-scale-nan", _float_init("input_scale", NAN), ["input_scale"]),
    ("input-scale-inf", _float_init("input_scale", INF), ["input_scale"]),
    ("input-scale-zero", _float_init("input_scale", 0.0), ["input_scale"]),
    ("input-scale-negative", _float_init("input_scale", -0.5), ["input_scale"]),
    ("weight-scale-nan", _float_init("conv0.weight_scale", [NAN] * 8), ["conv0.weight_scale"]),
    ("weight-scale-inf", _float_init("conv0.weight_scale", [INF] * 8), ["conv0.weight_scale"]),
    ("output-scale-nan", _float_init("conv0_scale", NAN), ["conv0_scale"]),
    ("scale-length", _scale_len("conv0.weight_scale", 5), ["conv0"]),
    ("zero-point-length", _scale_len("conv0.weight_zero_point", 5), ["conv0"]),
    ("float16-scale", _float16_scale("input_scale"), ["input_QuantizeLinear", "float16"]),
    ("dim-zero", _input_dim(2, 0), ["conv0"]),
    ("dim-zero-channels", _input_dim(1, 0), ["input"]),
    ("dim-wrong-channels", _input_dim(1, 4), ["conv0", "4-channel input"]),
    ("dim-negative", _input_dim(3, -1), ["conv0"]),
    ("opset-99", _opset(99), ["opset"]),
    ("opset-1", _opset(1), ["opset"]),
    ("input-string", _input_type(8), ["input"]),
    ("input-int16", _input_type(5), ["input"]),
    ("input-undefined", _input_type(0), ["input"]),
    ("short-raw-data", _raw("conv0.weight_quantized", b"\x01\x02\x03"), ["conv0.weight_quantized"]),
    ("long-raw-data", _raw("conv0.weight_quantized", b"\x01" * 1000), ["conv0.weight_quantized"]),
    ("dq-axis-out-of-range", _attr("conv0.weight_DequantizeLinear", "axis", 7), ["conv0.weight_DequantizeLinear", "axis"]),
    ("auto-pad", lambda m: _attr(next(n.name for n in m.graph.node if n.op_type == "Conv"),
                                 "auto_pad", "SAME_UPPER")(m), ["auto_pad"]),
    ("two-producers", _two_producers, ["output"]),
    ("missing-initializer", _drop_init("conv0.weight_scale"), ["conv0.weight_scale"]),
    ("external-data-missing", _external, ["weights.bin"]),
    ("unsupported-sigmoid", _sigmoid_after_first_conv, ["Sigmoid"]),
]

# raw bytes written as the .onnx file
ONNX_BYTES_CASES = [
    ("garbage", b"this is not a protobuf \xff\xfe\x00\x01", ["ONNX"]),
    ("empty", b"", ["ONNX"]),
    ("yaml-as-onnx", b"description: x\n", ["ONNX"]),
    ("zeros", b"\x00" * 64, ["ONNX"]),
]

# ---- DORY reference folders: {file: text} ------------------------------------

_HDR = "# input (shape [1, 3, 16, 16]),\n"
DORY_CASES = [
    ("nan", {"input.txt": _HDR + "nan,\n" * 768}, ["input.txt", "nan"]),
    ("inf", {"input.txt": _HDR + "inf,\n" * 768}, ["input.txt", "inf"]),
    ("text", {"input.txt": _HDR + "abc,\n" * 768}, ["input.txt", "abc"]),
    ("fraction", {"input.txt": _HDR + "0.5,\n" * 768}, ["input.txt", "0.5"]),
    ("bad-header", {"input.txt": "# input shape 1x3\n" + "1,\n" * 768}, ["input.txt", "header"]),
    ("no-header", {"input.txt": "1,\n" * 768}, ["input.txt", "header"]),
    ("shape-mismatch", {"input.txt": _HDR + "1,\n" * 10}, ["input.txt", "values"]),
    ("header-dim-zero", {"input.txt": "# input (shape [1, 0, 16, 16]),\n1,\n"}, ["input.txt", "dimension"]),
    ("huge-int", {"input.txt": _HDR + "1e400,\n" * 768}, ["input.txt"]),
    ("out-of-int8", {"input.txt": _HDR + "1000,\n" * 768}, ["input.txt"]),
    ("empty-file", {"input.txt": ""}, ["input.txt"]),
    ("not-utf8", {"input.txt": _HDR + "1,\udcc4\n" * 768}, ["input.txt", "not UTF-8"]),   # the fuzzer's byte flip
    ("no-input", {}, ["input.txt"]),
    ("layer-gap", {"input.txt": _HDR + "1,\n" * 768, "out_layer1.txt": "# x (shape [1]),\n1,\n"},
     ["out_layer"]),
    ("binary", {"input.txt": "\x00\xff\xfe garbage"}, ["input.txt"]),
]

# ---- TFLite: in-place edits of tests/data/tflite/residual.tflite ------------------
# (tests/tflite_edit.py; residual's tensors: 0 the int8 input, 9 the first
# CONV_2D's weights, 5 its bias, 10 its output, 11 the second CONV_2D's
# output, 14 MAX_POOL_2D's output, 18 the FULLY_CONNECTED output; operator
# 0 the first CONV_2D)

TFLITE_BASE = "residual"
FLOAT32, FLOAT16, INT32, UINT8, INT16, INT8 = 0, 1, 2, 3, 7, 9

TFLITE_CASES = [
    ("activation-int16", lambda f: f.tensor_type(10, INT16), ["operator 0 (CONV_2D)", "int16"]),
    ("activation-float", lambda f: f.tensor_type(10, FLOAT32), ["operator 0 (CONV_2D)", "float"]),
    ("activation-uint8", lambda f: f.tensor_type(10, UINT8), ["tensor 10", "zero point -128", "uint8"]),
    ("input-int16", lambda f: f.tensor_type(0, INT16), ["graph input", "int16"]),
    ("input-float16", lambda f: f.tensor_type(0, FLOAT16), ["float16"]),
    ("weights-int16", lambda f: f.tensor_type(9, INT16), ["Tensor 9"]),
    ("weights-int32", lambda f: f.tensor_type(9, INT32), ["Tensor 9"]),
    ("bias-int8", lambda f: f.tensor_type(5, INT8), ["tensor 5", "bytes"]),
    # the fuzzer's: the interpreter's reference kernels run both; XNNPACK refuses the first,
    # and the second reads a tensor no operator has computed yet
    ("bias-zero-point", lambda f: f.zero_point(5, 300), ["operator 0 (CONV_2D)", "bias zero point 300"]),
    ("weight-scale-past-the-delegate", lambda f: f.scale(9, 255.0, 4), ["operator 0 (CONV_2D)", "channel 4", "256"]),
    ("operator-version-99", lambda f: f.opcode_version(0, 99), ["interpreter cannot read", "version"]),
    ("operator-out-of-order", lambda f: f.op_input(1, 0, 12), ["conv_2d_1", "'t12' before any layer makes it"]),
    ("scale-nan", lambda f: f.scale(10, NAN), ["tensor 10", "scale nan"]),
    ("scale-inf", lambda f: f.scale(10, INF), ["tensor 10", "scale inf"]),
    ("scale-zero", lambda f: f.scale(10, 0.0), ["tensor 10", "scale 0.0"]),
    ("scale-negative", lambda f: f.scale(10, -0.5), ["tensor 10", "scale -0.5"]),
    ("input-scale-nan", lambda f: f.scale(0, NAN), ["tensor 0", "scale nan"]),
    ("weight-scale-zero", lambda f: f.scale(9, 0.0, 3), ["tensor 9", "scale 0.0"]),
    ("weight-scale-nan", lambda f: f.scale(9, NAN, 5), ["tensor 9", "scale nan"]),
    ("zero-point-300", lambda f: f.zero_point(10, 300), ["tensor 10", "zero point 300"]),
    ("input-zero-point-huge", lambda f: f.zero_point(0, 1 << 40), ["tensor 0", "zero point"]),
    ("weight-zero-point", lambda f: f.zero_point(9, 1), ["operator 0 (CONV_2D)", "zero point"]),
    ("no-quantization", lambda f: f.drop_scales(11), ["tensor 11", "no quantization"]),
    ("pool-output-shape", lambda f: f.shape_dim(14, 1, 7), ["MAX_POOL_2D", "[7, 6, 8]"]),
    ("fc-output-shape", lambda f: f.shape_dim(18, 1, 4), ["FULLY_CONNECTED", "4"]),
    ("input-shape", lambda f: f.shape_dim(0, 1, 13), ["13"]),
    ("buffer-out-of-range", lambda f: f.tensor_buffer(9, 999), ["buffer 999"]),
    ("operator-input-out-of-range", lambda f: f.op_input(0, 1, 77), ["tensor index 77"]),
    ("fused-tanh", lambda f: f.conv_option(0, 10, "b", 4), ["operator 0 (CONV_2D)", "TANH"]),
    ("stride-zero", lambda f: f.conv_option(0, 8, "i", 0), ["CONV_2D", "stride"]),
    ("stride-negative", lambda f: f.conv_option(0, 8, "i", -1), ["operator 0 (CONV_2D)", "stride -1x1"]),
    ("unsupported-svdf", lambda f: f.opcode_builtin(0, 27), ["operator 0 (SVDF)", "not supported"]),
    ("opcode-999", lambda f: f.opcode_builtin(0, 999), ["999"]),
]

# raw bytes written as the .tflite file (base: the unedited residual.tflite's bytes)
TFLITE_BYTES_CASES = [
    ("empty", lambda base: b"", ["TFL3"]),
    ("garbage", lambda base: b"this is not a flatbuffer \xff\xfe\x00\x01", ["TFL3"]),
    ("onnx-bytes", lambda base: b"\x08\x07\x12\x07pytorch\x1a\x032.1", ["TFL3"]),
    ("identifier-then-zeros", lambda base: base[:8] + b"\x00" * 64, ["cannot read the model"]),
    ("truncated-half", lambda base: base[:len(base) // 2], ["cannot read the model"]),
    ("truncated-tail", lambda base: base[:-16], ["cannot read the model"]),
    ("root-offset-beyond", lambda base: b"\xff\xff\x00\x00" + base[4:], ["cannot read the model"]),
]

# converted files of tests/data/tflite that tessera must refuse in one line
TFLITE_FILE_CASES = [
    ("drop-softmax-without-softmax", "residual", ["drop_final_softmax", "no SOFTMAX"]),
    ("int16x8", "unsupported_int16", ["int16"]),
    ("float", "unsupported_float", ["float"]),
]

RAW_MODEL_CASES += [
    ("tflite-input-shape", "description: x\ntflite: net.onnx\ninput_shape: [1, 3, 8, 8]\n", ["input_shape"]),
    ("tflite-reference", "description: x\ntflite: net.onnx\nreference: {kind: deeploy, dir: .}\n", ["reference"]),
    ("tflite-and-onnx", "description: x\ntflite: net.onnx\nonnx: net.onnx\n", ["exactly one"]),
    ("tflite-drop-softmax-str", "description: x\ntflite: net.onnx\ndrop_final_softmax: maybe\n",
     ["drop_final_softmax"]),
    ("tflite-int", "description: x\ntflite: 7\n", ["tflite"]),
]

# ---- Deeploy reference folders: inputs.npz / outputs.npz ---------------------------
# Each case maps the valid folder {file: bytes} (test_bad_input_corpus's
# QuantLib Conv -> RequantShift graph, input `input` [1, 2, 4, 4], output
# `out`) to a damaged one; a file mapped to None is left out.


def _npz(**arrays):
    import io

    import numpy as np
    buf = io.BytesIO()
    np.savez(buf, **{k: np.asarray(v) for k, v in arrays.items()})
    return buf.getvalue()


def _npy(array):
    import io

    import numpy as np
    buf = io.BytesIO()
    np.save(buf, np.asarray(array))
    return buf.getvalue()


def _with(name, data):
    return lambda files, good: {**files, name: data(good) if callable(data) else data}


def _input(f):
    """inputs.npz with the good input changed by f."""
    return _with("inputs.npz", lambda good: _npz(input=f(good["input"])))


def _output(f):
    return _with("outputs.npz", lambda good: _npz(out=f(good["out"])))


def _nan_at_0(a):
    import numpy as np
    a = a.astype(np.float64)
    a.reshape(-1)[0] = np.nan
    return a


def _inf_at_0(a):
    import numpy as np
    a = a.astype(np.float64)
    a.reshape(-1)[0] = np.inf
    return a


DEEPLOY_CASES = [
    ("inputs-missing", _with("inputs.npz", None), ["inputs.npz", "not found"]),
    ("outputs-missing", _with("outputs.npz", None), ["outputs.npz", "not found"]),
    ("inputs-empty-file", _with("inputs.npz", b""), ["inputs.npz", "npz"]),
    ("inputs-text", _with("inputs.npz", b"1, 2, 3\n"), ["inputs.npz", "npz"]),
    ("inputs-npy", _with("inputs.npz", lambda good: _npy(good["input"])), ["inputs.npz", ".npy"]),
    ("inputs-truncated-zip", _with("inputs.npz", lambda good: _npz(input=good["input"])[:60]), ["inputs.npz"]),
    ("outputs-truncated-zip", _with("outputs.npz", lambda good: _npz(out=good["out"])[:-30]), ["outputs.npz"]),
    ("inputs-pickled-object", _input(lambda a: __import__("numpy").array([{"x": 1}], dtype=object)),
     ["inputs.npz"]),
    ("inputs-no-entries", _with("inputs.npz", lambda good: _npz()), ["inputs.npz", "no entry", "input"]),
    ("outputs-no-entries", _with("outputs.npz", lambda good: _npz()), ["outputs.npz", "no entry", "out"]),
    ("inputs-fraction", _input(lambda a: a + 0.5), ["inputs.npz", "not an integer"]),
    ("inputs-nan", _input(_nan_at_0), ["inputs.npz", "nan"]),
    ("inputs-inf", _input(_inf_at_0), ["inputs.npz", "inf"]),
    ("outputs-nan", _output(_nan_at_0), ["outputs.npz", "nan"]),
    ("outputs-inf", _output(_inf_at_0), ["outputs.npz", "inf"]),
    ("inputs-strings", _input(lambda a: a.astype(str)), ["inputs.npz", "dtype"]),
    ("inputs-complex", _input(lambda a: a + 1j), ["inputs.npz", "dtype"]),
    ("inputs-huge", _input(lambda a: a * 0 + 1e30), ["inputs.npz", "32 bits"]),
    ("inputs-wrong-size", _input(lambda a: a.reshape(-1)[:5]), ["inputs.npz", "5 values"]),
    ("inputs-too-many", _input(lambda a: __import__("numpy").concatenate([a.reshape(-1)] * 2)),
     ["inputs.npz", "64 values"]),
    ("outputs-wrong-size", _output(lambda a: a.reshape(-1)[:3]), ["3 values"]),
    ("outputs-differ", _output(lambda a: a + 1), ["deeploy reference", "differ"]),
]

# unknown or invalid keys at every level of both YAML kinds
RAW_MODEL_CASES += [
    ("unknown-top-key", "description: x\nonnx: net.onnx\noverlap: 0\n", ["overlap", "unknown key"]),
    ("fusion-unknown", "description: x\nonnx: net.onnx\nfusion: fastest\n", ["fusion", "fastest"]),
    ("reference-unknown-key", "description: x\nonnx: net.onnx\nreference: {kind: dory, dir: ., layout: hwc}\n",
     ["reference.layout", "unknown key"]),
    ("input-unknown-key", "description: x\nonnx: net.onnx\ninput: {seed: 1, path: x.npy}\n",
     ["input.path", "unknown key"]),
    ("input-file-missing", "description: x\nonnx: net.onnx\ninput: {file: x.npy}\n",
     ["input.file", "file not found", "relative to the model YAML"]),
    ("quantization-unknown-key", "description: x\ngenerator: {arch: tiny, resolution: 8, classes: 2}\n"
     "quantization: {method: minmax}\n", ["quantization.method", "unknown key"]),
]
TARGET_CASES += [
    ("toolchain-unknown-key", _set("toolchain.opt", "-O3"), ["toolchain.opt", "unknown key"]),
    ("runner-unknown-key", _set("runner.cycles", True), ["runner.cycles", "unknown key"]),
    ("dma-unknown-key", _set("dma.0.latency", 3), ["dma[0].latency", "unknown key"]),
    ("place-unknown-key", _set("place.stack", "L2"), ["place.stack"]),
]

# the model YAML's input_shape: against the ONNX graph (tiny: input [1, 3, 16, 16],
# all fixed); the line names the ONNX file and input_shape
INPUT_SHAPE_CASES = [
    ("input-shape-fixed-dim", "description: x\nonnx: net.onnx\ninput_shape: [1, 3, 8, 8]\n",
     ["input_shape [1, 3, 8, 8]", "fixed dimension 16"]),
    ("input-shape-rank", "description: x\nonnx: net.onnx\ninput_shape: [1, 3, 16]\n", ["3 dimensions"]),
    ("input-shape-batch-2", "description: x\nonnx: net.onnx\ninput_shape: [2, 3, 16, 16]\n", ["fixed dimension 1"]),
    ("input-shape-unknown-input", "description: x\nonnx: net.onnx\ninput_shape: {nope: [1, 3, 16, 16]}\n",
     ["input_shape.nope", "no graph input"]),
]

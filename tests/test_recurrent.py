"""The recurrent step (IR op lstm): gemmlowp's 16-bit logistic and tanh in C
against their NumPy form on every input, the kernels' steps against the
golden model on random LSTMs (with and without input gate, peephole,
projection, clips; one core and several), and the golden model against the
TFLite interpreter on TFLite Micro's trained_lstm_int8.tflite."""

import ctypes
import os
import shutil
import subprocess
from ctypes import POINTER, c_int, c_int8, c_int16, c_int32

import numpy as np
import pytest

from tessera.golden import fixed16, recurrent
from tessera.frontend.tflite import quantize_multiplier

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INCLUDE = os.path.join(ROOT, "kernels", "include")
PUBLIC = os.path.join(ROOT, "..", "shared", "public_models")
CFLAGS = ["-std=c99", "-O2", "-Wall", "-Wextra", "-Wpedantic", "-Werror"]

# A test harness around a library's tsr_lstm_step / tsr_lstm_project: runs T
# steps as the generated code does (each step forked over ncores, the cores
# in turn, hidden states in ping-pong buffers).
HARNESS = r"""
#include <string.h>
#include "tessera/fixed16.h"
#include "tessera/kernels.h"
void STEP(const tsr_lstm_args_t *a, int core, int ncores);
void PROJECT(const tsr_lstm_args_t *a, int core, int ncores);
int32_t t_sigmoid(int32_t a) { return tsr_sigmoid16(a); }
int32_t t_tanh(int32_t a, int32_t bits) { return tsr_tanh16(a, bits); }
void t_lstm(const int8_t *x, int32_t steps, int8_t *out, int32_t ncores,
            const int8_t *w_in, const int8_t *w_rec, const int32_t *b_in, const int32_t *b_rec,
            const int16_t *w_peep, const int8_t *w_proj, const int32_t *b_proj,
            int32_t n_input, int32_t n_cell, int32_t n_output, int32_t cifg,
            const int32_t *mul_in, const int8_t *shift_in, const int32_t *mul_rec, const int8_t *shift_rec,
            const int32_t *mul_peep, const int8_t *shift_peep, const int8_t *peep,
            const int32_t *scalars, int16_t *c, int8_t *h0, int8_t *hid, int16_t *pre)
{
    tsr_lstm_args_t a;
    memset(&a, 0, sizeof a);
    a.w_in = w_in; a.w_rec = w_rec; a.b_in = b_in; a.b_rec = b_rec; a.w_peep = w_peep;
    a.w_proj = w_proj; a.b_proj = b_proj; a.hid = hid; a.c = c; a.pre = pre;
    a.n_input = n_input; a.n_cell = n_cell; a.n_output = n_output; a.cifg = cifg;
    for (int k = 0; k < 4; k++) {
        a.mul_in[k] = mul_in[k]; a.shift_in[k] = shift_in[k];
        a.mul_rec[k] = mul_rec[k]; a.shift_rec[k] = shift_rec[k];
        a.mul_peep[k] = mul_peep[k]; a.shift_peep[k] = shift_peep[k]; a.peep[k] = peep[k];
    }
    a.hidden_mul = scalars[0]; a.hidden_shift = scalars[1]; a.hidden_zp = scalars[2];
    a.proj_mul = scalars[3]; a.proj_shift = scalars[4]; a.state_zp = scalars[5]; a.proj_clip = scalars[6];
    a.cell_exp = scalars[7]; a.cell_clip = scalars[8];
    for (int32_t t = 0; t < steps; t++) {
        a.x = x + t * n_input;
        a.h_prev = t ? out + (t - 1) * n_output : h0;
        a.h_next = out + t * n_output;
        for (int k = 0; k < ncores; k++)
            STEP(&a, k, ncores);
        if (w_proj)
            for (int k = 0; k < ncores; k++)
                PROJECT(&a, k, ncores);
    }
}
"""

# library: (sources, include folders, step and projection functions); the
# optimized ones built for the host with their portable equivalents of the
# DSP / Xpulp instructions (the cross builds run the real ones)
LIBRARIES = {"reference": (["kernels/reference/recurrent.c"], [], ("tsr_lstm_step", "tsr_lstm_project")),
             "cmsis_nn": (["kernels/cmsis_nn/recurrent.c"], ["kernels/cmsis_nn"],
                          ("tsr_cmsis_lstm_step", "tsr_cmsis_lstm_project")),
             "pulp_nn": (["kernels/pulp_nn/recurrent.c"], ["kernels/pulp_nn"], ("pnn_lstm_step", "pnn_lstm_project"))}


def _build(tmp, name, sources, includes, functions):
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("no host gcc")
    harness = tmp / "harness.c"
    harness.write_text(HARNESS)
    so = tmp / f"lib{name}.so"
    step, project = functions
    cmd = [gcc, *CFLAGS, f"-DSTEP={step}", f"-DPROJECT={project}", "-shared", "-fPIC", "-I", INCLUDE,
           *(f"-I{os.path.join(ROOT, d)}" for d in includes),
           *(os.path.join(ROOT, s) for s in sources), str(harness), "-o", str(so)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    return ctypes.CDLL(str(so))


@pytest.fixture(scope="module", params=sorted(LIBRARIES))
def lib(request, tmp_path_factory):
    return _build(tmp_path_factory.mktemp(request.param), request.param, *LIBRARIES[request.param])


@pytest.fixture(scope="module")
def ref_lib(tmp_path_factory):
    return _build(tmp_path_factory.mktemp("fixed16"), "fixed16", *LIBRARIES["reference"])


def test_sigmoid_and_tanh_match_gemmlowp_on_every_input(ref_lib):
    lib = ref_lib
    lib.t_sigmoid.restype = c_int32
    lib.t_tanh.restype = c_int32
    xs = range(-32768, 32768)
    got = np.array([lib.t_sigmoid(v) for v in xs])
    assert np.array_equal(got, fixed16.sigmoid_table())
    for bits in (0, 3, 6):
        got = np.array([lib.t_tanh(v, bits) for v in xs])
        assert np.array_equal(got, fixed16.tanh_table(bits)), bits


def test_fixed16_known_values():
    # independent anchors: logistic(0) = 1/2, tanh(0) = 0, and the float
    # functions within the recipes' accuracy (a few units of 2^-15)
    x = np.arange(-32768, 32768)
    sig = fixed16.sigmoid_table().astype(np.float64) / 32768
    assert abs(sig[32768] - 0.5) == 0
    assert np.abs(sig - 1 / (1 + np.exp(-x / 4096))).max() < 4e-4
    for bits in (0, 3, 6):
        th = fixed16.tanh_table(bits).astype(np.float64) / 32768
        assert np.abs(th - np.tanh(x / 2.0 ** (15 - bits))).max() < 4e-4


def _p(arr, ctype):
    return arr.ctypes.data_as(POINTER(ctype)) if arr is not None else None


def random_lstm(rng, cifg, peephole, projection, clip):
    gates = "fgo" if cifg else "ifgo"
    n_input, n_cell = int(rng.integers(1, 13)), int(rng.integers(1, 11))
    n_output = int(rng.integers(1, 9)) if projection else n_cell
    G = len(gates)
    arrays = {"w_input": rng.integers(-127, 128, (G * n_cell, n_input)).astype(np.int8),
              "w_recurrent": rng.integers(-127, 128, (G * n_cell, n_output)).astype(np.int8),
              "b_input": rng.integers(-20000, 20000, G * n_cell).astype(np.int32),
              "b_recurrent": rng.integers(-20000, 20000, G * n_cell).astype(np.int32)}

    def mq(lo, hi, n):
        pairs = [quantize_multiplier(float(r)) for r in np.exp(rng.uniform(np.log(lo), np.log(hi), n))]
        return [int(m) for m, _ in pairs], [int(s) for _, s in pairs]

    mul, shift = {}, {}
    # gate pre-activations in Q3.12, hidden values of 2^-30 * o * tanh(c) at scales 1/256 .. 1/32
    mul["input"], shift["input"] = mq(0.02, 1.0, G)
    mul["recurrent"], shift["recurrent"] = mq(0.02, 1.0, G)
    mul["hidden"], shift["hidden"] = (v[0] for v in mq(2 ** -25, 2 ** -22, 1))
    peep = "".join(g for g in "ifo" if g in gates) if peephole else ""
    if peep:
        mul["peephole"], shift["peephole"] = mq(1e-5, 1e-3, len(peep))
        arrays["w_peephole"] = rng.integers(-32768, 32768, (len(peep), n_cell)).astype(np.int16)
    if projection:
        mul["projection"], shift["projection"] = (v[0] for v in mq(0.003, 0.03, 1))
        arrays["w_projection"] = rng.integers(-127, 128, (n_output, n_cell)).astype(np.int8)
        arrays["b_projection"] = rng.integers(-2000, 2000, n_output).astype(np.int32)
    rnn = {"cell": "lstm", "steps": int(rng.integers(1, 9)), "n_input": n_input, "n_cell": n_cell,
           "n_output": n_output, "gates": gates, "peephole": peep, "projection": projection,
           "mul": mul, "shift": shift, "cell_exp": int(rng.integers(-15, -8)),
           "hidden_zp": int(rng.integers(-10, 11)), "state_zp": int(rng.integers(-10, 11)),
           "cell_clip": int(rng.integers(100, 30000)) if clip else 0,
           "proj_clip": int(rng.integers(10, 120)) if clip and projection else 0}
    return rnn, arrays


def run_kernel(lib, rnn, arrays, x, ncores):
    G = len(rnn["gates"])
    T, no, nc = rnn["steps"], rnn["n_output"], rnn["n_cell"]
    out = np.zeros((T, no), np.int8)
    m, s = rnn["mul"], rnn["shift"]

    def four(values, dtype):
        return np.array(list(values) + [0] * (4 - len(values)), dtype)

    peep = rnn["peephole"]
    peep_of = four([peep.index(g) if g in peep else -1 for g in rnn["gates"]], np.int8)
    peep_mul = four([m["peephole"][peep.index(g)] if g in peep else 0 for g in rnn["gates"]], np.int32)
    peep_shift = four([s["peephole"][peep.index(g)] if g in peep else 0 for g in rnn["gates"]], np.int8)
    scalars = np.array([m["hidden"], s["hidden"], rnn["hidden_zp"], m.get("projection", 0),
                        s.get("projection", 0), rnn["state_zp"], rnn["proj_clip"], rnn["cell_exp"],
                        rnn["cell_clip"]], np.int32)
    c = np.zeros(nc, np.int16)
    h0 = np.full(no, rnn["state_zp"], np.int8)
    hid = np.zeros(nc, np.int8)
    pre = np.zeros(G * nc, np.int16)
    xs = np.ascontiguousarray(x, np.int8)
    lib.t_lstm(_p(xs, c_int8), c_int32(T), _p(out, c_int8), c_int32(ncores),
               _p(arrays["w_input"], c_int8), _p(arrays["w_recurrent"], c_int8),
               _p(arrays["b_input"], c_int32), _p(arrays["b_recurrent"], c_int32),
               _p(arrays.get("w_peephole"), c_int16), _p(arrays.get("w_projection"), c_int8),
               _p(arrays.get("b_projection"), c_int32), c_int32(rnn["n_input"]), c_int32(nc), c_int32(no),
               c_int32(G == 3), _p(four(m["input"], np.int32), c_int32), _p(four(s["input"], np.int8), c_int8),
               _p(four(m["recurrent"], np.int32), c_int32), _p(four(s["recurrent"], np.int8), c_int8),
               _p(peep_mul, c_int32), _p(peep_shift, c_int8), _p(peep_of, c_int8), _p(scalars, c_int32),
               _p(c, c_int16), _p(h0, c_int8), _p(hid, c_int8), _p(pre, c_int16))
    return out


@pytest.mark.parametrize("cifg", [False, True])
@pytest.mark.parametrize("peephole", [False, True])
@pytest.mark.parametrize("projection", [False, True])
def test_lstm_step_matches_golden(lib, cifg, peephole, projection):
    rng = np.random.default_rng(hash((cifg, peephole, projection)) % 2 ** 32)
    lib.t_lstm.restype = None
    varied = 0
    for case in range(12):
        rnn, arrays = random_lstm(rng, cifg, peephole, projection, clip=case % 3 == 2)
        x = rng.integers(-128, 128, (rnn["steps"], rnn["n_input"])).astype(np.int8)
        want = recurrent.lstm(x, rnn, arrays)
        varied += len(np.unique(want)) > 2
        for ncores in (1, 3):
            got = run_kernel(lib, rnn, arrays, x, ncores)
            assert np.array_equal(got, want), (case, ncores, rnn)
    assert varied >= 6, "most cases must exercise more than a saturated output"


def test_trained_lstm_equals_the_interpreter():
    path = os.path.join(PUBLIC, "tflm", "trained_lstm_int8.tflite")
    if not os.path.exists(path):
        pytest.skip("../shared/public_models is not there")
    from tessera import golden
    from tessera.frontend.tflite import import_tflite
    from tessera.golden import tflitecheck
    graph, weights = import_tflite(path, "trained_lstm")
    assert [layer.op for layer in graph.layers] == ["lstm", "linear", "softmax"]
    rng = np.random.default_rng(3)
    for _ in range(3):
        inputs = {n: rng.integers(-128, 128, graph.tensor(n).shape).astype(np.int8) for n in graph.inputs}
        values = golden.run(graph, weights, inputs)
        result = tflitecheck.compare(path, graph, values, inputs)
        assert result["equal"], [r for r in result["compared"] if not r["equal"]][:1]
        assert len(np.unique(values[graph.layers[0].output])) > 50


@pytest.mark.parametrize("cifg, peephole, projection, time_major, clip", [
    (False, False, False, False, False), (True, False, False, True, False), (False, True, False, False, True),
    (False, False, True, False, True), (True, True, True, True, True), (False, True, True, True, False)])
def test_lstm_options_equal_the_interpreter(tmp_path, cifg, peephole, projection, time_major, clip):
    """tessera.zoo.tflite_lstm's models (TFLite's int8 LSTM with and without
    input gate, peephole, projection, clips, time-major) against the
    interpreter on every tensor: the options the public models lack."""
    from tessera import golden
    from tessera.frontend.tflite import import_tflite
    from tessera.golden import tflitecheck
    from tessera.zoo import tflite_lstm

    path = str(tmp_path / "lstm.tflite")
    tflite_lstm.write(path, steps=6, inputs=7, cells=9, outputs=5, cifg=cifg, peephole=peephole,
                      projection=projection, time_major=time_major, cell_clip=0.9 if clip else 0.0,
                      proj_clip=0.6 if clip and projection else 0.0, seed=3)
    graph, weights = import_tflite(path, "lstm")
    rnn = graph.layers[0].rnn
    assert (rnn["gates"], bool(rnn["peephole"]), rnn["projection"]) == ("fgo" if cifg else "ifgo", peephole,
                                                                         projection)
    rng = np.random.default_rng(0)
    for _ in range(3):
        inputs = {n: rng.integers(-128, 128, graph.tensor(n).shape).astype(np.int8) for n in graph.inputs}
        values = golden.run(graph, weights, inputs)
        result = tflitecheck.compare(path, graph, values, inputs, weights)
        assert result["equal"], [r for r in result["compared"] if not r["equal"]][:1]
        assert len(np.unique(values[graph.layers[0].output])) > 10


@pytest.mark.parametrize("name", ["torch_kws_gru", "torch_kws_lstm"])
def test_onnx_recurrences_within_one_lsb_of_onnx_runtime(name):
    """PyTorch's GRU and LSTM exported to ONNX and quantized by ONNX
    Runtime (tools/corpus/make_torch.py, in tests/corpus/): ONNX Runtime runs the node in
    float between QuantizeLinear and DequantizeLinear; the integer step
    (golden.recurrent.onnx_cell, frontend.onnx_rnn) is within 1 LSB of its
    quantized last hidden state, fed ONNX Runtime's own int8 sequence."""
    import onnx
    import onnxruntime as ort
    from onnx import helper, numpy_helper

    from tessera.frontend.onnx_rnn import recurrent_params

    path = os.path.join(ROOT, "tests", "corpus", f"{name}.onnx")
    model = onnx.load(path)
    g = model.graph
    inits = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    producer = {o: n for n in g.node for o in n.output}
    users = {}
    for n in g.node:
        for i in n.input:
            users.setdefault(i, []).append(n)

    node = next(n for n in g.node if n.op_type in ("GRU", "LSTM"))
    # the initial state is computed (ConstantOfShape of the input's batch): its value from ONNX Runtime
    h0 = producer[node.input[5]].input[0]
    probe = onnx.load(path)
    probe.graph.output.extend([helper.make_tensor_value_info(h0, onnx.TensorProto.INT8, None)])
    consts = {h0: ort.InferenceSession(probe.SerializeToString()).run(
        [h0], {g.input[0].name: np.zeros((1, 49, 10), np.float32)})[0]}

    def quantized(tensor):
        dq = producer[tensor]
        assert dq.op_type == "DequantizeLinear"
        src = inits.get(dq.input[0], consts.get(dq.input[0]))
        return src, float(inits[dq.input[1]]), int(inits[dq.input[2]])

    q_y = users[node.output[1]][0]
    rnn, arrays = recurrent_params(node, quantized, float(inits[q_y.input[1]]), int(inits[q_y.input[2]]))
    x_q = producer[node.input[0]].input[0]
    model.graph.output.extend([helper.make_tensor_value_info(x_q, onnx.TensorProto.INT8, None),
                               helper.make_tensor_value_info(q_y.output[0], onnx.TensorProto.INT8, None)])
    sess = ort.InferenceSession(model.SerializeToString())
    feed = sess.get_inputs()[0]
    differ, total = 0, 0
    for seed in range(8):
        x = np.random.default_rng(seed).standard_normal((1, 49, 10)).astype(np.float32) * (1 + seed % 3)
        xq, yq = sess.run([x_q, q_y.output[0]], {feed.name: x})
        seq = xq.reshape(-1, rnn["n_input"])
        got = recurrent.onnx_cell(seq, dict(rnn, steps=seq.shape[0], sequence=False), arrays)
        d = np.abs(got.reshape(-1) - yq.reshape(-1).astype(np.int64))
        assert d.max() <= 1, (seed, d.max())
        differ += int((d > 0).sum())
        total += d.size
        assert len(np.unique(yq)) > 8
    assert differ < total // 20    # a rounding tie now and then, not a drift


ONNX_HARNESS = r"""
#include <string.h>
#include "tessera/fixed32.h"
#include "tessera/kernels.h"
int32_t t_sigmoid32(int32_t a) { return tsr_sigmoid32(a, 8); }
int32_t t_tanh32(int32_t a) { return tsr_tanh32(a, 8); }
void t_onnx(const int8_t *x, int32_t steps, int8_t *y, int32_t ncores, const int8_t *w_in, const int8_t *w_rec,
            const int32_t *b_in, const int32_t *b_rec, const int32_t *p, int16_t *h, int32_t *c,
            const int32_t *w_sums)
{
    tsr_onnx_rnn_args_t a;
    memset(&a, 0, sizeof a);
    a.w_in = w_in; a.w_rec = w_rec; a.b_in = b_in; a.b_rec = b_rec; a.c = c; a.w_sums = w_sums;
    a.n_input = p[0]; a.n_cell = p[1]; a.gru = p[2]; a.zp_x = p[3]; a.zp_w = p[4]; a.zp_r = p[5]; a.zp_y = p[6];
    a.mul_x = p[7]; a.shift_x = p[8]; a.mul_h = p[9]; a.shift_h = p[10]; a.mul_y = p[11]; a.shift_y = p[12];
    for (int32_t t = 0; t < steps; t++) {
        a.x = x + t * a.n_input;
        a.h_prev = h + (t & 1) * a.n_cell;
        a.h_next = h + ((t + 1) & 1) * a.n_cell;
        a.y = t == steps - 1 ? y : NULL;
        for (int k = 0; k < ncores; k++)
            ONNX_STEP(&a, k, ncores);
    }
}
"""


# library: (sources, include folders, its ONNX step)
ONNX_LIBRARIES = {"reference": (["kernels/reference/recurrent.c"], [], "tsr_onnx_rnn_step"),
                  "cmsis_nn": (["kernels/cmsis_nn/recurrent.c"], ["kernels/cmsis_nn"], "tsr_cmsis_onnx_rnn_step"),
                  "pulp_nn": (["kernels/pulp_nn/recurrent.c"], ["kernels/pulp_nn"], "pnn_onnx_rnn_step")}


def _onnx_build(tmp_path_factory, name):
    sources, includes, step = ONNX_LIBRARIES[name]
    tmp = tmp_path_factory.mktemp("onnx_rnn_" + name)
    (tmp / "h.c").write_text(ONNX_HARNESS.replace("ONNX_STEP", step).replace(
        '#include "tessera/kernels.h"\n', '#include "tessera/kernels.h"\n'
        f"void {step}(const tsr_onnx_rnn_args_t *a, int core, int ncores);\n", 1))
    so = tmp / "libonnx.so"
    res = subprocess.run(["gcc", *CFLAGS, "-shared", "-fPIC", "-I", INCLUDE,
                          *(f"-I{os.path.join(ROOT, d)}" for d in includes),
                          *(os.path.join(ROOT, f) for f in sources), str(tmp / "h.c"), "-o", str(so)],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    return ctypes.CDLL(str(so))


@pytest.fixture(scope="module", params=sorted(ONNX_LIBRARIES))
def onnx_lib(request, tmp_path_factory):
    return _onnx_build(tmp_path_factory, request.param)


@pytest.fixture(scope="module")
def onnx_ref_lib(tmp_path_factory):
    return _onnx_build(tmp_path_factory, "reference")


def test_32bit_logistic_and_tanh_match_gemmlowp(onnx_ref_lib):
    onnx_lib = onnx_ref_lib
    from tessera.golden.gemmlowp import logistic32, tanh32

    onnx_lib.t_sigmoid32.restype = onnx_lib.t_tanh32.restype = c_int32
    rng = np.random.default_rng(0)
    xs = np.concatenate([rng.integers(-(1 << 31), 1 << 31, 4000), rng.integers(-(1 << 26), 1 << 26, 4000),
                         [0, 1, -1, (1 << 31) - 1, -(1 << 31)]])
    for v in xs:
        assert onnx_lib.t_sigmoid32(c_int32(int(v))) == logistic32(int(v), 8), v
        assert onnx_lib.t_tanh32(c_int32(int(v))) == tanh32(int(v), 8), v


@pytest.mark.parametrize("cell", ["onnx_gru", "onnx_lstm"])
def test_onnx_step_matches_golden(onnx_lib, cell):
    rng = np.random.default_rng(7)
    H, F, T = 13, 6, 9
    G = 3 if cell == "onnx_gru" else 4
    for case in range(4):
        arrays = {"w_input": rng.integers(-128, 128, (G * H, F)).astype(np.int8),
                  "w_recurrent": rng.integers(-128, 128, (G * H, H)).astype(np.int8),
                  "b_input": rng.integers(-(1 << 23), 1 << 23, G * H).astype(np.int32),
                  "b_recurrent": rng.integers(-(1 << 23), 1 << 23, G * H).astype(np.int32)}
        mul, shift = {}, {}
        for key, real in (("x", 0.02 * 0.004 * 2 ** 23), ("h", 0.004 * 2 ** 8), ("y", 2 ** -15 / 0.006)):
            mul[key], shift[key] = quantize_multiplier(real)
        rnn = {"cell": cell, "steps": T, "n_input": F, "n_cell": H, "n_output": H, "sequence": False,
               "zp": {"x": int(rng.integers(-9, 9)), "w": int(rng.integers(-3, 3)), "r": int(rng.integers(-3, 3))},
               "mul": mul, "shift": shift, "y_zp": int(rng.integers(-9, 9))}
        x = rng.integers(-128, 128, (T, F)).astype(np.int8)
        want = recurrent.onnx_cell(x, rnn, arrays).reshape(-1)
        p = np.array([F, H, int(cell == "onnx_gru"), rnn["zp"]["x"], rnn["zp"]["w"], rnn["zp"]["r"], rnn["y_zp"],
                      mul["x"], shift["x"], mul["h"], shift["h"], mul["y"], shift["y"]], np.int32)
        for ncores in (1, 4):
            y = np.zeros(H, np.int8)
            h = np.zeros(2 * H, np.int16)
            c = np.zeros(H, np.int32)
            onnx_lib.t_onnx(_p(x, c_int8), c_int32(T), _p(y, c_int8), c_int32(ncores),
                            _p(arrays["w_input"], c_int8), _p(arrays["w_recurrent"], c_int8),
                            _p(arrays["b_input"], c_int32), _p(arrays["b_recurrent"], c_int32), _p(p, c_int32),
                            _p(h, c_int16), _p(c, c_int32),
                            _p(arrays["w_input"].astype(np.int64).sum(axis=1).astype(np.int32), c_int32))
            assert np.array_equal(y, want), (case, ncores)
        assert len(np.unique(want)) > 3

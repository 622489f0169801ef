"""The peer networks (DORY and Deeploy test folders, read in place from
../shared/peer_tests) through tessera's whole build: import, tiling,
memory plan, generated C, compiled firmware, run, and the check against
both the golden model and the peer toolchain's own expected outputs.

Every network on the host; the whole models also on gap8 and stm32h7
under QEMU (marked qemu); the networks with parameters per element, a
product of activations and int32 accumulators also tiled on a host with
a tiny L1; a QuantLib graph written here whose pools and adds read int32
accumulators. And the errors a user sees from the command line for a
graph tessera cannot lower. All builds of a session share one output
folder (each network its own subfolder), -j2.
"""

import importlib.util
import json
import os
import shutil

import numpy as np
import pytest
import yaml

from helpers import ROOT, one_error, scons
from tessera.util import canon
from tessera.check import verdict as checker, runlog
from tessera.model import reference
from tessera import runners
from tessera.ir import Graph
from test_peer_frontend import const, helper, n, save

PEER = os.path.normpath(os.path.join(ROOT, "..", "shared", "peer_tests"))
needs_peer = pytest.mark.skipif(not os.path.isdir(PEER),
                                reason=f"peer networks not found at {PEER} (../shared/peer_tests)")

_spec = importlib.util.spec_from_file_location("peer_report", os.path.join(ROOT, "tools", "peer_report.py"))
peer_report = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(peer_report)

NETWORKS = {net["name"]: net for net in peer_report.networks(PEER)}
MODELS = peer_report.MODELS
# what only the reference kernels compute: tiled on a small L1 too
TILED = ("deeploy_GEMM_Regular", "deeploy_GEMM_Regular_RQPerRow", "deeploy_GEMM_TransB_RQ",
         "deeploy_MatMul_Regular_RQ", "deeploy_Add_Regular_RQ", "deeploy_Conv_DW_2D")


@pytest.fixture(scope="session")
def peer_out(tmp_path_factory):
    return str(tmp_path_factory.mktemp("peer_builds"))


def build_row(net_name, target, out):
    net = NETWORKS[net_name]
    rc, so, se, secs = peer_report.build(net, target, out, jobs=2)
    row = peer_report.summarize(net, target, out, rc, so, se, secs)
    assert rc == 0 and row["verdict"] == "pass", f"{net_name} on {target}: {row.get('error')} " \
                                                  f"{row.get('first_difference')}\n{so[-2000:]}\n{se[-2000:]}"
    return row


def _folder(out, target, name):
    return os.path.join(out, os.path.splitext(os.path.basename(target))[0], name)


def test_the_table_prints_an_error_with_brackets():
    """GVSoC's messages name components in brackets ('[/chip/cluster/pe1/
    prefetcher ]'): the table prints them as text, not as rich markup."""
    from rich.console import Console

    console = Console(width=200, record=True)
    row = {"kind": "deeploy", "short": "CNN_Linear1", "verdict": "error",
           "error": "run on GVSoC: [/chip/cluster/pe1/prefetcher ] Invalid fetch request (addr: 0x0)"}
    peer_report.render([row], "pulp_open", console=console)
    assert "[/chip/cluster/pe1/prefetcher ] Invalid fetch request" in console.export_text()


@needs_peer
def test_all_peer_networks_are_found():
    assert len(NETWORKS) == 30
    assert all(m in NETWORKS for m in MODELS)
    assert sum(n["kind"] == "dory" for n in NETWORKS.values()) == 2


@needs_peer
@pytest.mark.parametrize("name", sorted(NETWORKS) or ["none"])
def test_peer_network_on_host(name, peer_out):
    """Bit-exact against the golden model layer by layer and against the
    reference (DORY: every out_layerN by checksum; Deeploy: every output
    element), both in verdict.json and report.json."""
    row = build_row(name, "host", peer_out)
    assert row["verdict_golden"] == row["verdict_reference"] == "pass"
    folder = _folder(peer_out, "host", name)
    verdict = json.load(open(os.path.join(folder, "verdict.json")))
    report = json.load(open(os.path.join(folder, "report.json")))
    ref = verdict["reference"]
    assert report["reference"] == ref and report["verdict_golden"] == "pass"
    if NETWORKS[name]["kind"] == "dory":
        assert len(ref["compared"]) == len(verdict["layers"]) == len(row["layers"])
        assert all(l["reference_match"] for l in report["layers"])
    else:
        graph = json.load(open(os.path.join(folder, "graph.json")))
        assert [r["name"] for r in ref["compared"]] == graph["outputs"]
    assert all(r["equal"] for r in ref["compared"])


def _need_qemu(target):
    from tessera import config
    t = config.load_target(os.path.join(ROOT, "targets", target + ".yaml"), target)
    missing = [p for p in (t["toolchain"]["cc"], t["runner"]["program"]) if shutil.which(p) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed")


@needs_peer
@pytest.mark.qemu
@pytest.mark.parametrize("target", ["gap8", "stm32h7"])
@pytest.mark.parametrize("name", MODELS)
def test_peer_model_under_qemu(name, target, peer_out):
    _need_qemu(target)
    row = build_row(name, target, peer_out)
    assert row["verdict_reference"] == "pass"
    report = json.load(open(os.path.join(_folder(peer_out, target, name), "report.json")))
    assert report["counts"]["method"] == "qemu-instructions" and report["totals"]["instructions"] > 0


@pytest.fixture(scope="session")
def tiny_l1(tmp_path_factory):
    """The host target with 6000 bytes of L1: these networks' layers tile
    along rows, columns and channels."""
    data = yaml.safe_load(open(os.path.join(ROOT, "targets", "host.yaml")))
    data["memory"]["L1"]["size"] = 6000
    data["description"] = "host with a tiny L1"
    path = tmp_path_factory.mktemp("targets") / "host_l1_6000.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


@needs_peer
@pytest.mark.parametrize("name", TILED)
def test_peer_network_tiled(name, peer_out, tiny_l1):
    build_row(name, tiny_l1, peer_out)
    report = json.load(open(os.path.join(_folder(peer_out, tiny_l1, name), "report.json")))
    assert max(l["n_tiles"] for l in report["layers"]) > 1


# ---- a QuantLib graph whose pools and adds read int32 accumulators -----------

def int32_graph(tmp_path):
    """Conv -> MaxPool -> RequantShift (a requantization of int32 values on
    its own: a 1x1 avgpool); two Convs -> Add -> RequantShift (an add of
    accumulators); a Conv -> RequantShift per row kept as a second output."""
    rng = np.random.default_rng(5)

    def w(*shape):
        return rng.integers(-20, 21, shape).astype(np.float32)

    def rqs(x, y, name, mul, add, div):
        return helper.make_node("RequantShift", [x, mul, add], [y], name=name, domain="PACTOps",
                                div=float(div), n_levels=256.0, signed=1.0)
    nodes = [n("Conv", ["input", "w1"], ["a1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             n("MaxPool", ["a1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
             rqs("p1", "y1", "rq1", "m1", "b1", 2 ** 12),
             n("Conv", ["y1", "w2"], ["a2"], kernel_shape=[1, 1]),
             n("Conv", ["y1", "w3"], ["a3"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             n("Add", ["a2", "a3"], ["s"]),
             rqs("s", "y2", "rq2", "m2", "b2", 2 ** 14),
             n("Conv", ["y2", "w4"], ["a4"], kernel_shape=[1, 1]),
             rqs("a4", "y3", "rq3", "m3", "b3", 2 ** 13)]
    inits = {"w1": w(8, 3, 3, 3), "w2": w(8, 8, 1, 1), "w3": w(8, 8, 3, 3), "w4": w(6, 8, 1, 1),
             "m1": rng.integers(20, 80, (8, 1, 1)), "b1": rng.integers(-2000, 2000, (8, 1, 1)),
             "m2": np.array(40.0), "b2": np.array(100.0),
             # per row and channel: a Requant.shape, planes per channel
             "m3": rng.integers(10, 60, (6, 4, 1)), "b3": rng.integers(-500, 500, (1, 4, 1))}
    path = save(tmp_path, "quantlib_int32", nodes, inits, [("input", [1, 3, 8, 8])],
                [("y2", [1, 8, 4, 4]), ("y3", [1, 6, 4, 4])], opset=11, domains=("PACTOps",))
    model = tmp_path / "ql_int32.yaml"
    model.write_text(f"description: int32 accumulators into pools and adds\nonnx: {path}\ninput: {{seed: 3}}\n")
    return str(model)


def test_int32_accumulators_into_pools_and_adds(tmp_path):
    from tessera.frontend import import_onnx
    model = int32_graph(tmp_path)
    graph, _ = import_onnx(str(tmp_path / "quantlib_int32.onnx"), "x")
    reads = {l.name: [graph.tensor(i).dtype for i in l.inputs] for l in graph.layers}
    assert reads == {"a1_node": ["int8"], "p1_node": ["int32"], "rq1": ["int32"], "a2_node": ["int8"],
                     "a3_node": ["int8"], "s_node": ["int32", "int32"], "a4_node": ["int8"]}
    assert graph.layer("rq1").op == "avgpool" and graph.layer("a4_node").requant.shape == [4, 1, 6]
    res = scons("target=host", f"model={model}", "-j2", out=tmp_path / "out", check=True)
    assert "Traceback" not in res.stderr


@pytest.mark.qemu
@pytest.mark.parametrize("target", ["gap8", "stm32h7"])
def test_int32_accumulators_under_qemu(tmp_path, target):
    _need_qemu(target)
    scons(f"target={target}", f"model={int32_graph(tmp_path)}", "-j2", out=tmp_path / "out", check=True)


# ---- the check against a reference, when the firmware differs ----------------

def _copy_reference(src, dst):
    shutil.copytree(src, dst)
    return str(dst)


@needs_peer
def test_reference_check_names_the_first_differing_element(tmp_path, peer_out):
    """The firmware's outputs against a reference that differs in one
    element: DORY by layer checksum, the element named from a dump; Deeploy
    by element, at its index in the ONNX layout."""
    name = "dory_Residual_connection_test_1"
    build_row(name, "host", peer_out)
    folder = _folder(peer_out, "host", name)
    graph = Graph.from_json(canon.read_json(os.path.join(folder, "graph.json")))
    run = runlog.parse(open(os.path.join(folder, "run.log")).read(), "run.log")
    fake = _copy_reference(NETWORKS[name]["dir"], tmp_path / "dory")
    layer_file = os.path.join(fake, "out_layer3.txt")
    lines = open(layer_file).read().splitlines(keepends=True)
    t = graph.tensor(graph.layers[3].output)
    h, w, c = 2, 5, 7
    row = 1 + (h * t.shape[1] + w) * t.shape[2] + c       # after the header line
    value = int(float(lines[row].split(",")[0]))
    lines[row] = lines[row].replace(str(value), str(value + 1), 1)
    open(layer_file, "w").writelines(lines)
    ref = reference.load({"kind": "dory", "dir": fake})
    result = checker.compare_reference(graph, ref, run)
    assert result["verdict"] == "fail" and [r["equal"] for r in result["compared"]].count(False) == 1
    i = checker.first_reference_mismatch(graph, result)
    assert i == 3
    runner = {"kind": "host", "timeout": 600}
    dump = runlog.parse(runners.run(runner, os.path.join(folder, "firmware"), [f"dump={i}"]), "dump")
    result = checker.locate_reference(result, graph, ref, i, dump["dumps"][i])
    first = result["compared"][3]["first"]
    assert first == {"index": [h, w, c], "got": value, "expected": value + 1, "mismatches": 1}
    verdict = checker.with_reference({"verdict": "pass", "golden": "pass"}, result)
    line = checker.describe(verdict, "net on host")
    assert verdict["verdict"] == "fail" and "out_layer3" in line and "[2, 5, 7]" in line and "\n" not in line

    name = "deeploy_Conv_Regular_2D_RQ"
    build_row(name, "host", peer_out)
    folder = _folder(peer_out, "host", name)
    graph = Graph.from_json(canon.read_json(os.path.join(folder, "graph.json")))
    run = runlog.parse(open(os.path.join(folder, "run.log")).read(), "run.log")
    fake = _copy_reference(NETWORKS[name]["dir"], tmp_path / "deeploy")
    with np.load(os.path.join(fake, "outputs.npz")) as z:
        outputs = {k: z[k].copy() for k in z.files}
    key = sorted(outputs)[0]
    outputs[key][0, 1, 2, 3] += 1
    np.savez(os.path.join(fake, "outputs.npz"), **outputs)
    result = checker.compare_reference(graph, reference.load({"kind": "deeploy", "dir": fake}), run)
    (row,) = result["compared"]
    assert result["verdict"] == "fail" and row["first"]["index"] == [0, 1, 2, 3] and row["first"]["mismatches"] == 1


# ---- errors from the command line ---------------------------------------------

def nemo_tanh_graph(tmp_path):
    """Conv -> NEMO's requantization chain -> Tanh (outside the dialect), a
    valid ONNX graph (the float divisor: the validity gate refuses a Div of
    float by int64 before the dialect is read). Its own generator:
    test_peer_frontend's shared one must not move."""
    rng = np.random.default_rng(11)
    nodes = [n("Conv", ["input", "w"], ["c"], kernel_shape=[1, 1]), n("Mul", ["k", "c"], ["a"]),
             n("Add", ["a", "l"], ["b"]), const("q", 2 ** 12, np.float32), n("Div", ["b", "q"], ["d"]),
             n("Floor", ["d"], ["f"]), n("Clip", ["f"], ["r"], min=0.0, max=255.0), n("Tanh", ["r"], ["out"])]
    inits = {"w": rng.integers(-20, 21, (2, 2, 1, 1)), "k": rng.integers(1, 16, (1, 2, 1, 1)),
             "l": rng.integers(-5000, 5000, (1, 2, 1, 1))}
    return save(tmp_path, "nemo_tanh", nodes, inits, [("input", [1, 2, 4, 4])], [("out", [1, 2, 4, 4])])


def rqs_div3_graph(tmp_path):
    nodes = [n("Conv", ["input", "w"], ["c"], kernel_shape=[1, 1]),
             helper.make_node("RequantShift", ["c", "mul", "add"], ["out"], name="rqs_bad", domain="PACTOps",
                              div=3.0, n_levels=256.0, signed=1.0)]
    inits = {"w": np.arange(4).reshape(2, 2, 1, 1) - 2, "mul": np.array([3.0, 5.0]).reshape(2, 1, 1),
             "add": np.zeros((2, 1, 1))}
    return save(tmp_path, "rqs_div3", nodes, inits, [("input", [1, 2, 4, 4])], [("out", [1, 2, 4, 4])],
                opset=11, domains=("PACTOps",))


def _model(tmp_path, onnx_path):
    path = tmp_path / "bad.yaml"
    path.write_text(f"description: a graph tessera cannot lower\nonnx: {onnx_path}\n")
    return str(path)


def test_nemo_op_outside_the_dialect_from_the_command_line(tmp_path):
    onnx_path = nemo_tanh_graph(tmp_path)
    line = one_error(scons("target=host", f"model={_model(tmp_path, onnx_path)}", out=tmp_path / "out"))
    assert "nemo_tanh.onnx" in line and "'out_node' (Tanh)" in line and "outside the nemo dialect" in line
    assert "tessera lowers NEMO/DORY graphs" in line        # what to use instead
    assert not (tmp_path / "out" / "host" / "bad" / "graph.json").exists()


def test_requantshift_div_not_a_power_of_two_from_the_command_line(tmp_path):
    onnx_path = rqs_div3_graph(tmp_path)
    line = one_error(scons("target=host", f"model={_model(tmp_path, onnx_path)}", out=tmp_path / "out"))
    assert "rqs_div3.onnx" in line and "'rqs_bad' (RequantShift)" in line
    assert "div=3 is not a power of two" in line and "div = 2**s" in line

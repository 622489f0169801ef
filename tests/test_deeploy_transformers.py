"""Deeploy's integer transformer test graphs (issue 27): EEGFormer, CCT
(ICCT with ITAMax, ICCT_ITA with ITAPartialMax), its Attention kernel test
and its iSoftmax tests, read from a snapshot of github.com/pulp-platform/
Deeploy (tools/peer_report.py: a checkout, read in place, or its git
directory, whose files are written once into a cache outside the
repository). The golden model against Deeploy's expected outputs; the
whole build on the host, and the models under QEMU (gap8, stm32h7), bit-exact
against both. Without a snapshot every test skips and says where to get one.
"""

import json
import os

import pytest

from helpers import ROOT
from test_peer_build import _folder, _need_qemu, peer_report
from tessera import golden
from tessera.model import reference
from tessera.frontend import import_onnx, input_names

SNAPSHOT = peer_report.deeploy_snapshot()
needs_snapshot = pytest.mark.skipif(SNAPSHOT is None, reason=f"no Deeploy snapshot: {peer_report.DEEPLOY_HOWTO}")
NAMES = ["deeploy_" + "".join(c if c.isalnum() else "_" for c in r.replace("Kernels/Integer/", "")
                              .replace("Models/", "").replace("CCT/Int/", ""))
         for r in peer_report.DEEPLOY_TRANSFORMERS]
MODELS = ("deeploy_EEGFormer", "deeploy_ICCT", "deeploy_ICCT_ITA")


@pytest.fixture(scope="session")
def nets(tmp_path_factory):
    if SNAPSHOT is None:
        pytest.skip(f"no Deeploy snapshot: {peer_report.DEEPLOY_HOWTO}")
    cache = os.environ.get("TESSERA_DEEPLOY_CACHE") or str(tmp_path_factory.mktemp("deeploy"))
    return {n["name"]: n for n in peer_report.deeploy_networks(SNAPSHOT, cache)}


@pytest.fixture(scope="session")
def out(tmp_path_factory):
    return str(tmp_path_factory.mktemp("deeploy_builds"))


def test_names_match_the_report():
    assert len(NAMES) == len(set(NAMES)) == len(peer_report.DEEPLOY_TRANSFORMERS)
    assert not ROOT.startswith(str(SNAPSHOT)) if SNAPSHOT else True


@needs_snapshot
@pytest.mark.parametrize("name", NAMES)
def test_golden_equals_deeploy_outputs(nets, name):
    net = nets[name]
    assert not os.path.commonpath([net["dir"], ROOT]) == ROOT, "read in place or from a cache, never the repository"
    ref = reference.load({"kind": "deeploy", "dir": net["dir"]})
    graph, weights = import_onnx(net["onnx"], "peer", ref.input_types(input_names(net["onnx"])))
    rows = ref.compare(graph, golden.run(graph, weights, ref.golden_inputs(graph)))
    assert rows and all(r["equal"] for r in rows), rows
    ops = {layer.op for layer in graph.layers}
    assert "softmax" in ops or "matmul" in ops


def _build(nets, name, target, out):
    net = nets[name]
    rc, so, se, secs = peer_report.build(net, target, out, jobs=2)
    row = peer_report.summarize(net, target, out, rc, so, se, secs)
    assert rc == 0 and row["verdict"] == "pass", f"{name} on {target}: {row.get('error')} " \
                                                  f"{row.get('first_difference')}\n{so[-2000:]}\n{se[-2000:]}"
    assert row["verdict_reference"] == "pass"
    return row


@needs_snapshot
@pytest.mark.parametrize("name", NAMES)
def test_host_build_is_bit_exact(nets, name, out):
    row = _build(nets, name, "host", out)
    ops = [layer["op"] for layer in row["layers"]]
    if name == "deeploy_ICCT":
        # tokenizer conv, head split/merge, layer norms, the attention products, ITAMax, the GELU table
        assert {"transpose", "layernorm", "matmul", "softmax", "lut"} <= set(ops) and len(ops) == 25


@needs_snapshot
@pytest.mark.qemu
@pytest.mark.parametrize("target", ["gap8", "stm32h7"])
@pytest.mark.parametrize("name", MODELS)
def test_model_under_qemu(nets, name, target, out):
    _need_qemu(target)
    _build(nets, name, target, out)
    report = json.load(open(os.path.join(_folder(out, target, name), "report.json")))
    assert report["counts"]["method"] == "qemu-instructions" and report["totals"]["instructions"] > 0

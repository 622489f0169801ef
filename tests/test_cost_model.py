"""The cost model: its features against what a real run measured, the
fit against data with known coefficients, and report.json carrying the
estimate next to the measured count, labeled."""

import json
import os

import numpy as np
import pytest

from helpers import scons
from tessera.cost import fit, model
from tessera.cost.features import FEATURES


@pytest.fixture(scope="module")
def gap8_tiny(tmp_path_factory):
    out = tmp_path_factory.mktemp("gap8")
    # fusion=none: these tests compare each layer's features and estimate
    # with what that layer alone moved and counted
    scons("target=gap8", "model=tiny", "fusion=none", out=out, check=True)
    return os.path.join(out, "gap8", "tiny")


def test_dma_features_are_the_bytes_the_run_moved(gap8_tiny):
    # computed from the tiling before anything runs; measured by the
    # firmware's DMA byte counters on the engine into L1
    rep = json.load(open(os.path.join(gap8_tiny, "report.json")))
    for layer in rep["layers"]:
        f = layer["cost"]["features"]
        assert f["act_bytes"] + f["w_bytes"] == layer["dma_bytes"]["cluster_dma"], layer["name"]


def test_report_has_estimate_beside_measured_and_labels(gap8_tiny):
    rep = json.load(open(os.path.join(gap8_tiny, "report.json")))
    assert "estimated before running" in rep["counts"]["cost"]["estimate"]
    assert "QEMU" in rep["counts"]["cost"]["measured"]
    for layer in rep["layers"]:
        c = layer["cost"]
        assert c["measured"] == layer["instructions"]
        assert c["estimate"] > 0
        assert c["error"] == round((c["estimate"] - c["measured"]) / c["measured"], 4)
    tot = rep["totals"]["cost"]
    assert tot["measured"] == sum(layer["instructions"] for layer in rep["layers"])
    assert tot["estimate"] == sum(layer["cost"]["estimate"] for layer in rep["layers"])


def _synthetic(truth, ops, n=60):
    rng = np.random.default_rng(0)
    samples = []
    for i in range(n):
        op = ops[i % len(ops)]
        # the features the truth prices; the rest 0 (a growing feature list
        # must not change what these tests draw)
        used = sorted((set(truth["default"]) | set(truth["dma"])) - {"layer"})
        feats = dict(dict.fromkeys(FEATURES, 0), **{k: int(rng.integers(1, 100000)) for k in used})
        feats["tiles"] = int(rng.integers(1, 40))
        samples.append((op, feats, model.compute_part(truth, op, feats) + model.dma_part(truth, feats)))
    return samples


def test_fit_recovers_known_coefficients():
    shared = {"macs": 3.0, "out_elems": 20.0, "in_elems": 0.0, "tiles": 900.0, "layer": 5000.0}
    truth = {"ops": {}, "default": shared, "combine": "sum",
             "dma": {"act_bytes": 1.5, "act_xfers": 40.0, "w_bytes": 0.75, "w_xfers": 60.0,
                     "stream_bytes": 2.0, "stream_xfers": 100.0}}
    got = fit.fit(_synthetic(truth, ["conv2d", "add"]))
    for op in ("conv2d", "add"):
        for k, v in shared.items():
            assert got["ops"][op][k] == pytest.approx(v, rel=1e-4, abs=1e-6), (op, k)
    for k, v in truth["dma"].items():
        assert got["dma"][k] == pytest.approx(v, rel=1e-4), k


def test_fit_gives_an_op_its_own_cost():
    # conv2d layers cost twice the shared compute: with many layers of it the
    # per-op stage moves its multipliers there (the ridge pulls towards 1 only a little)
    shared = {"macs": 3.0, "out_elems": 20.0, "in_elems": 0.0, "tiles": 900.0, "layer": 5000.0}
    truth = {"ops": {"conv2d": {k: 2 * v for k, v in shared.items()}}, "default": shared, "combine": "sum",
             "dma": {"act_bytes": 1.5, "act_xfers": 40.0, "w_bytes": 0.75, "w_xfers": 60.0,
                     "stream_bytes": 2.0, "stream_xfers": 100.0}}
    samples = _synthetic(truth, ["conv2d", "add"], n=200)
    got = fit.fit(samples)
    errs = [abs(model.estimate(got, op, f) - m) / m for op, f, m in samples]
    shared_only = [abs(model.estimate(dict(got, ops={}), op, f) - m) / m for op, f, m in samples]
    # the shared stage's DMA terms absorb part of conv2d's extra cost: close, not exact
    assert np.median(errs) < 0.02 and max(errs) < 0.1
    assert np.median(errs) < np.median(shared_only) / 3
    assert all(v >= 0 for c in got["ops"].values() for v in c.values())


def test_overlap_fit_recovers_compute_with_the_yaml_dma():
    target = {"place": {"tiles": "L1", "activations": "L2", "weights": "L2"},
              "dma": [{"name": "d", "src": "L2", "dst": "L1", "dims": 2, "bandwidth": 8, "setup": 400}]}
    dma = fit.yaml_dma(target)
    # weights already in the activation level: nothing streams
    assert dma == {"act_bytes": 0.125, "act_xfers": 400.0, "w_bytes": 0.125, "w_xfers": 400.0,
                   "stream_bytes": 0.0, "stream_xfers": 0.0}
    shared = {"macs": 0.5, "out_elems": 4.0, "in_elems": 0.0, "tiles": 300.0, "layer": 3000.0}
    truth = {"ops": {}, "default": shared, "dma": dma, "combine": "overlap"}
    rng = np.random.default_rng(1)
    samples = []
    for i in range(80):
        feats = {k: int(rng.integers(1, 20000)) for k in FEATURES}
        feats.update(macs=int(rng.integers(10000, 2000000)), tiles=int(rng.integers(1, 30)))
        feats.update(act_xfers=2 * feats["tiles"], w_xfers=int(rng.integers(0, 3)))
        samples.append((("conv2d", "pointwise")[i % 2], feats, model.estimate(truth, "conv2d", feats)))
    got = fit.fit_overlap(samples, target)
    assert got["combine"] == "overlap" and got["dma"] == dma
    errs = [abs(model.estimate(got, op, f) - m) / m for op, f, m in samples]
    assert max(errs) < 1e-3


def test_overlap_hides_the_shorter_of_dma_and_compute():
    coefs = {"ops": {"conv2d": {"macs": 1.0}}, "default": {}, "dma": {"act_bytes": 1.0}, "combine": "overlap"}
    feats = dict.fromkeys(FEATURES, 0)
    feats.update(macs=1000, act_bytes=400, tiles=4)
    # compute dominates; the first tile's load (400 / 4) is not hidden
    assert model.estimate(coefs, "conv2d", feats) == 1000 + 100
    assert model.estimate(coefs, "conv2d", feats, buffering=1) == 1400
    assert model.estimate(dict(coefs, combine="sum"), "conv2d", feats) == 1400


# ---- report.html (rendered in a real browser: tests/test_report.py) ---------

def test_report_html_highlights_the_failed_layer(gap8_tiny):
    from tessera.report.html import render_html

    rep = json.load(open(os.path.join(gap8_tiny, "report.json")))
    rep["verdict"] = "fail"
    rep["layers"][3]["match"] = False
    rep["first_mismatch"] = {"layer": rep["layers"][3]["name"], "index": 3,
                             "element": {"index": [1, 2, 3], "got": 5, "want": 7}}
    text = render_html(rep, {})
    assert 'class="fail"' in text and "(1, 2, 3): got 5, expected 7" in text
    # its step's row in the step table, and in every bar chart (MACs, weights, two counts, DMA, L1)
    step = next(s["step"] for s in rep["steps"] if rep["layers"][3]["name"] in s["layers"])
    assert text.count('<tr class="bad">') == 1 and f'<tr class="bad"><td>' in text and f">{step}</a>" in text
    assert text.count('fill="#fde0dc"') == text.count("<div class=\"chart\">") == 5


def _build_inputs(netdir, target_name):
    import yaml

    from tessera.util import canon
    from tessera import config
    from tessera.config import views
    from tessera.ir import Graph

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    tname, tpath = config.resolve("target", target_name, root)
    tcfg = config.load_target(tpath, tname)
    graph = Graph.from_json(canon.read_json(os.path.join(netdir, "graph.json")))
    tilings = {l.name: canon.read_json(os.path.join(netdir, "tiling", f"{l.name}.json")) for l in graph.layers}
    with open(os.path.join(root, "kernels", tcfg["kernels"], "library.yaml")) as f:
        tgt = views.tiler_target(tcfg, yaml.safe_load(f))
    return tcfg, graph, tilings, tgt


def test_api_estimates_what_the_report_carries(gap8_tiny):
    from tessera import cost

    tcfg, graph, tilings, _ = _build_inputs(gap8_tiny, "gap8")
    rep = json.load(open(os.path.join(gap8_tiny, "report.json")))
    plan = json.load(open(os.path.join(gap8_tiny, "memplan.json")))
    for layer, entry in zip(graph.layers, rep["layers"]):
        assert cost.estimate_layer(tcfg, layer, graph, tilings[layer.name], plan=plan) == entry["cost"]["estimate"], \
            layer.name


def test_api_group_moves_the_fused_bands_not_the_intermediate(gap8_tiny):
    # the group's activation bytes are the fused step's bands, as the fusion
    # module counts them from its own tiling, independently of the cost model
    from tessera import cost, fusion
    from tessera.fusion.transfer import fused_transfer

    tcfg, graph, tilings, tgt = _build_inputs(gap8_tiny, "gap8")
    pair = fusion.pair_view(graph, "dw1", "pw1")
    fused = fusion.solve_dw_pw(pair, tgt)
    parts = cost.explain_group(tcfg, ["dw1", "pw1"], graph, tilings, fused)
    assert parts["dma_features"]["act_bytes"] == fused_transfer(pair, fused)
    alone = [cost.explain_layer(tcfg, graph.layer(n), graph, tilings[n]) for n in ("dw1", "pw1")]
    moved_alone = sum(p["features"]["act_bytes"] for p in alone)
    dw_out = graph.tensor(graph.layer("dw1").output).nbytes
    # apart, the intermediate is written out by dw1 and read back by pw1
    assert moved_alone - parts["dma_features"]["act_bytes"] >= 2 * dw_out
    assert cost.estimate_group(tcfg, ["dw1", "pw1"], graph, tilings, fused) == parts["estimate"]
    if parts["saving"] is not None:
        # fitted fused terms (cost/fused_fit.py): the layers' own estimates
        # less what fusing saves
        apart = sum(p["estimate"] for p in alone)
        assert abs(parts["estimate"] - (apart - parts["saving"])) <= 0.5
    elif parts["why_not"] is None:
        # gap8 counts instructions, DMA copies included: compute plus DMA
        assert parts["estimate"] == round(parts["compute"] + parts["dma"])
    else:
        # a step the model cannot price (cost.fused.why_no_estimate) has no estimate
        assert parts["estimate"] is None and "row blocks" in parts["why_not"] or "fits no op" in parts["why_not"]


def test_view_features_equal_the_report_features(gap8_tiny):
    # what the tiler computes from a layer's view (tile_cost=model) is what
    # the report computes from the IR, on every tiled layer
    from tessera import cost
    from tessera.config import views
    from tessera.cost import features

    tcfg, graph, tilings, _ = _build_inputs(gap8_tiny, "gap8")
    tiled = [l for l in graph.layers if tilings[l.name]["tiled"] and not tilings[l.name].get("whole")]
    for layer in tiled:
        f = features.view_features(views.tiler_layer(layer, graph), tilings[layer.name], 2, tcfg["cores"],
                                   layer.input_offset)
        assert f == cost.api.layer_features(tcfg, layer, graph, tilings[layer.name]), layer.name


def test_tile_cost_model_picks_a_tile_no_costlier_than_the_library_one():
    # a MobileNet pointwise and depthwise layer on gap8's L1: the costed
    # choice fits, is deterministic, and by the model costs at most what the
    # library objective's tile costs
    from tessera import config, cost
    from tessera.config import views
    from tessera.cost import features
    from tessera.tiler import solve_layer
    import yaml

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    tname, tpath = config.resolve("target", "gap8", root)
    tcfg = config.load_target(tpath, tname)
    with open(os.path.join(root, "kernels", "pulp_nn", "library.yaml")) as f:
        tgt = views.tiler_target(tcfg, yaml.safe_load(f))
    coefs = cost.coefficients(tcfg)
    costed = dict(tgt, cost={"coefficients": coefs, "dims": 2})
    base = {"in_bytes": 1, "out_bytes": 1, "n_inputs": 1, "stride": [1, 1]}
    layers = [dict(base, name="pw", op="pointwise", **{"in": [32, 32, 64]}, out=[32, 32, 128], kernel=[1, 1],
                   pad=[0, 0, 0, 0], w_bytes_per_cout=64, param_bytes_per_cout=9),
              dict(base, name="dw", op="depthwise", **{"in": [64, 64, 32]}, out=[64, 64, 32], kernel=[3, 3],
                   pad=[1, 1, 1, 1], w_bytes_per_cout=9, param_bytes_per_cout=9)]
    for layer in layers:
        lib = solve_layer(layer, tgt)
        mine = solve_layer(layer, costed)
        assert mine == solve_layer(layer, costed)
        assert mine["tiled"] and mine["l1_bytes"]["total"] <= tgt["l1_budget"]
        est = [model.estimate(coefs, layer["op"], features.view_features(layer, t, 2, tcfg["cores"]))
               for t in (mine, lib)]
        assert est[0] <= est[1], (layer["name"], mine["tile"], lib["tile"], est)
    # a layer whose tensor lives on a storage level (gap8's mbv1_128) keeps
    # the tiler's constraints: every channel, whole rows (its weights have
    # one buffer; a cheaper-looking tile of fewer channels broke the plan)
    rows = dict(layers[0], rows=1)
    mine = solve_layer(rows, costed)
    assert (mine["tile"]["c"], mine["tile"]["w"]) == (128, 32) and mine["n_tiles"]["c"] == 1


def test_sweeps_are_written_byte_identically(tmp_path):
    # the microbenchmarks are build inputs: the same bytes every time, or
    # every refit would rebuild them all
    from tessera.cost import sweeps

    for d in ("a", "b"):
        for name in sweeps.SWEEPS:
            sweeps.write(name, str(tmp_path / d))
    files = sorted(os.listdir(tmp_path / "a"))
    assert len(files) == 2 * len(sweeps.SWEEPS)
    for f in files:
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f



def test_sweeps_left_out_name_real_targets_and_sweeps():
    # a typo in NOT_ON would silently fit a target on every sweep
    from tessera.cost import sweeps

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for target, names in sweeps.NOT_ON.items():
        assert os.path.exists(os.path.join(root, "targets", f"{target}.yaml")), target
        assert names <= set(sweeps.SWEEPS), names
        assert not names & set(sweeps.names_for(target))
    assert sweeps.names_for("stm32f4") == sorted(sweeps.SWEEPS)

def test_tile_cost_bad_value_and_no_coefficients_are_one_line(tmp_path):
    from helpers import one_error

    line = one_error(scons("target=host", "model=tiny", "tile_cost=fastest", out=tmp_path))
    assert "tile_cost=fastest" in line and "tile_cost=model" in line
    # host's runner counts nothing deterministic: no coefficients to tile by
    line = one_error(scons("target=host", "model=tiny", "tile_cost=model", out=tmp_path))
    assert "no cost model coefficients" in line and "tile_cost=library" in line


def test_stream_features_are_the_bytes_the_io_dma_moved(gap8_tiny):
    # gap8 streams every layer's weights L3 -> L2; a layer's window starts
    # the next chunk (often the next layer's), as the firmware's I/O DMA
    # byte counter saw it
    rep = json.load(open(os.path.join(gap8_tiny, "report.json")))
    streamed = [layer["cost"]["features"]["stream_bytes"] for layer in rep["layers"]]
    assert streamed == [layer["dma_bytes"]["io_dma"] for layer in rep["layers"]]
    assert sum(1 for s in streamed if s) >= 5


def test_split_follows_the_kernels():
    from tessera.cost.features import _split

    # as kernels/pulp_nn/pnn_common.h's pnn_split: (slowest core's share
    # times the cores, its channels, its pixels)
    # 4x4 output, 32 channels, 8 cores: pixels in pairs, every core all 32 channels
    assert _split("conv2d", 4, 4, 32, 8) == (1.0, 32, 2)
    # 1x1 output, 64 channels: channels in fours, 8 per core
    assert _split("pointwise", 1, 1, 64, 8) == (1.0, 8, 1)
    # 3x3 output, 16 channels: 2 pixels of 9 per core -> 5 cores; or 4 channels: 4 cores
    assert _split("conv2d", 3, 3, 16, 8) == (2 * 8 / 9, 16, 2)
    # DS-CNN's first layer, 25x5 by 64: 16 pixels (1024 MACs' worth) > 8 channels of 125 (1000): channels
    assert _split("conv2d", 25, 5, 64, 8) == (1.0, 8, 125)
    assert _split("depthwise", 4, 4, 12, 8) == (2 * 8 / 12, 2, 16)
    assert _split("conv2d", 4, 4, 32, 1) == (1.0, 32, 16)


def _copy_target(tmp_path, name, base, **changes):
    import yaml

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    data = yaml.safe_load(open(os.path.join(root, "targets", f"{base}.yaml")))
    for key, value in changes.items():
        *where, last = key.split(".")
        d = data
        for k in where:
            d = d[k]
        d[last] = value
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_renamed_target_uses_the_coefficients_of_its_cores(tmp_path):
    from tessera import config
    from tessera.cost import api

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    gap8 = model.load(model.path(root, "pulp_nn", "gap8"))
    # a copy of gap8 with a smaller L1 under another name: gap8's cores, gap8's coefficients
    t = config.load_target(_copy_target(tmp_path, "gap8_l1_48k", "gap8", **{"memory.L1.size": 48000}),
                           "gap8_l1_48k")
    file, why = model.source(root, t)
    assert file == model.path(root, "pulp_nn", "gap8") and "gap8" in why
    assert api.coefficients(t) == gap8
    # named explicitly: the same file; on pulp_open (GVSoC cycles, DMA engines
    # beside the cores) the DMA terms come from the copy's own YAML
    t = config.load_target(_copy_target(tmp_path, "po2", "pulp_open", cost_model="pulp_open",
                                        **{"dma": [{"name": "cluster_dma", "src": "L2", "dst": "L1", "dims": 2,
                                                    "bandwidth": 4, "setup": 50}]}), "po2")
    coefs = api.coefficients(t)
    po = model.load(model.path(root, "pulp_nn", "pulp_open"))
    assert coefs["ops"] == po["ops"] and coefs["dma"]["act_bytes"] == 0.25 and coefs["dma"]["act_xfers"] == 50
    # other cores (one instead of eight) and no name: no coefficients
    t = config.load_target(_copy_target(tmp_path, "gap8_1core", "gap8", cores=1), "gap8_1core")
    assert api.coefficients(t) is None


def test_renamed_target_build_reports_estimates(tmp_path):
    path = _copy_target(tmp_path, "gap8_l1_48k", "gap8", **{"memory.L1.size": 48000})
    scons(f"target={path}", "model=tiny", out=tmp_path / "out", check=True)
    rep = json.load(open(tmp_path / "out" / "gap8_l1_48k" / "tiny" / "report.json"))
    assert "kernels/pulp_nn/cost/gap8.yaml" in rep["counts"]["cost"]["estimate"]
    err = rep["totals"]["cost"]["error"]
    assert rep["totals"]["cost"]["estimate"] > 0 and abs(err) < 0.2


def test_bad_cost_model_name_is_one_line(tmp_path):
    from helpers import one_error

    path = _copy_target(tmp_path, "gap8_x", "gap8", cost_model="gap9")
    line = one_error(scons(f"target={path}", "model=tiny", out=tmp_path))
    assert "cost_model: 'gap9'" in line and "gap8" in line and "pulp_open" in line


def test_dma_fitted_apart_is_not_taken_for_compute():
    # untiled layers: act_bytes equals in_elems + out_elems, so from one count
    # the fit cannot tell a copied byte from an element's compute; given the
    # copies' own counts (as gap8's profile run prints them) it can
    dma = {"act_bytes": 6.0, "act_xfers": 50.0, "w_bytes": 6.0, "w_xfers": 150.0,
           "stream_bytes": 6.0, "stream_xfers": 50.0}
    shared = {"macs": 3.0, "out_elems": 20.0, "in_elems": 4.0, "layer": 5000.0}
    truth = {"ops": {}, "default": shared, "combine": "sum", "dma": dma}
    rng = np.random.default_rng(3)
    samples, copies = [], []
    for i in range(60):
        n_in, n_out = int(rng.integers(100, 50000)), int(rng.integers(100, 50000))
        f = dict.fromkeys(FEATURES, 0)
        f.update(macs=int(rng.integers(1000, 10 ** 6)), in_elems=n_in, out_elems=n_out, tiles=int(rng.integers(1, 6)),
                 act_bytes=n_in + n_out, act_xfers=int(rng.integers(2, 40)), w_bytes=int(rng.integers(0, 9000)),
                 w_xfers=int(rng.integers(0, 4)),
                 stream_bytes=int(rng.integers(0, 9000)), stream_xfers=int(rng.integers(0, 5)))
        samples.append((("add", "pointwise")[i % 2], f, model.estimate(truth, "add", f)))
        copies.append((f, model.dma_part(truth, f)))
    # from the one count the least squares lands somewhere else
    assert fit.fit(samples)["dma"]["act_bytes"] != pytest.approx(dma["act_bytes"], rel=0.05)
    got = fit.fit(samples, dma=fit.fit_dma(copies))
    for k, v in dma.items():
        assert got["dma"][k] == pytest.approx(v, rel=1e-4), k
    for k, v in shared.items():
        assert got["default"][k] == pytest.approx(v, rel=1e-3, abs=1e-6), k


def test_layers_in_place_move_nothing(tmp_path):
    # stm32f4 runs layers in place (direct: flat): the features say no DMA
    # where the firmware's DMA counters saw none, and the tiling's bytes elsewhere
    scons("target=stm32f4", "model=tiny", out=tmp_path, check=True)
    rep = json.load(open(tmp_path / "stm32f4" / "tiny" / "report.json"))
    in_place = [layer for layer in rep["layers"] if layer.get("in_place")]
    assert in_place
    for layer in rep["layers"]:
        f = layer["cost"]["features"]
        moved = sum(layer["dma_bytes"].values())
        if layer.get("in_place"):
            assert moved == 0 and f["act_bytes"] == f["w_bytes"] == f["act_xfers"] == f["w_xfers"] == 0
        else:
            assert f["act_bytes"] > 0, layer["name"]


def _dw_view(h, w, c, stride):
    return {"name": "dw", "op": "depthwise", "in": [h, w, c], "out": [h // stride, w // stride, c],
            "kernel": [3, 3], "stride": [stride, stride], "pad": [1, 1, 1, 1] if stride == 1 else [0, 0, 1, 1],
            "in_bytes": 1, "out_bytes": 1, "n_inputs": 1, "w_bytes_per_cout": 9, "param_bytes_per_cout": 9}


def test_depthwise_features_count_the_halo_and_the_busiest_core():
    # pulp_nn's depthwise gathers each channel's plane out of the tile, halo
    # rows included, on the core that computes it: row bands gather the
    # halo again, and 51 channels on 8 cores leave 7 on the busiest
    from tessera.cost import features
    from tessera.tiles import geometry

    view = _dw_view(32, 32, 102, 2)
    whole = {"tiled": False, "tile": {"h": 16, "w": 16, "c": 102}}
    bands = {"tiled": True, "buffering": 2, "tile": {"h": 2, "w": 16, "c": 51},
             "n_tiles": {"h": 8, "w": 1, "c": 2}}
    f = features.view_features(view, bands, 2, 8)
    got = [(t["ih"], t["iw"], t["oh"], t["oc"]) for t in geometry.tiles(view, bands)]
    assert len(got) == 16 and all(oc == 51 for _, _, _, oc in got)
    # 2 output rows at stride 2 read 5 input rows (the last band 4): 39 of 32, the halo again
    assert sum(ih for ih, _, _, _ in got) == 2 * 39
    assert f["core_chans"] == 16 * 7 * 8 and f["chans"] == 16 * 51
    assert f["gathered"] == sum(7 * 8 * ih * iw for ih, iw, _, _ in got) == 7 * 8 * 2 * 39 * 32
    assert f["plane_rows"] == sum(7 * 8 * (ih + oh) for ih, _, oh, _ in got)
    one = features.view_features(view, whole, 2, 8)
    assert one["core_chans"] == 13 * 8 and one["gathered"] == 13 * 8 * 32 * 32
    # one core: every channel; other ops: none
    assert features.view_features(view, whole, 2, 1)["core_chans"] == 102
    pw = dict(view, op="pointwise", kernel=[1, 1], stride=[1, 1], pad=[0, 0, 0, 0], out=[32, 32, 102])
    assert features.view_features(pw, whole, 2, 8)["gathered"] == 0


def test_depthwise_pair_outs_are_the_outputs_outside_the_2x2_blocks():
    # pulp_nn's 3x3 depthwise computes stride-1 planes of 64 outputs or more
    # with an even width two rows at a time (DW_QUADS); odd widths, small
    # planes and stride 2 a row at a time: mbv1_128's dw1 in 10x35 column
    # tiles (35 and 29 wide) against 5x64 bands
    from tessera.cost import features

    view = _dw_view(64, 64, 32, 1)
    cols = {"tiled": True, "buffering": 2, "tile": {"h": 10, "w": 35, "c": 32}, "n_tiles": {"h": 7, "w": 2, "c": 1}}
    bands = {"tiled": True, "buffering": 2, "tile": {"h": 5, "w": 64, "c": 32}, "n_tiles": {"h": 13, "w": 1, "c": 1}}
    assert features.view_features(view, cols, 2, 8)["pair_outs"] == 64 * 64 * 32
    # the last band's 4 rows in blocks too; of 5 rows the fifth in pairs: 12 bands x 64
    assert features.view_features(view, bands, 2, 8)["pair_outs"] == 12 * 64 * 32
    # stride 2 and a 4x4 plane: every output; one core (Cortex-M's kernels): no feature
    assert features.view_features(_dw_view(32, 32, 16, 2), {"tiled": False, "tile": {"h": 16, "w": 16, "c": 16}},
                                  2, 8)["pair_outs"] == 16 * 16 * 16
    assert features.view_features(_dw_view(4, 4, 64, 1), {"tiled": False, "tile": {"h": 4, "w": 4, "c": 64}},
                                  2, 8)["pair_outs"] == 4 * 4 * 64
    assert "pair_outs" not in features.view_features(view, bands, 2, 1)


def test_tile_cost_model_takes_even_widths_for_the_2x2_blocks():
    # pulp_open's coefficients price pair_outs: mbv1_128's dw1 (64x64x32,
    # 3x3/1) is not cut in odd-width column tiles (10x35x32 measured 326.5 k
    # cycles, 5x64x32 307.8 k)
    from tessera import config, cost
    from tessera.config import views
    from tessera.tiler import solve_layer
    import yaml

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "kernels", "pulp_nn", "library.yaml")) as f:
        lib = yaml.safe_load(f)
    tname, tpath = config.resolve("target", "pulp_open", root)
    tcfg = config.load_target(tpath, tname)
    coefs = cost.coefficients(tcfg)
    assert coefs["ops"]["depthwise"].get("pair_outs", 0) > 0
    tgt = dict(views.tiler_target(tcfg, lib), cost={"coefficients": coefs, "dims": 2})
    got = solve_layer(_dw_view(64, 64, 32, 1), tgt)
    assert got["tiled"] and got["tile"]["w"] % 2 == 0


def test_depthwise_fit_on_its_own_terms_recovers_known_coefficients():
    # --ops depthwise (fit.fit_ops): the busiest core's MACs, gathered bytes,
    # plane rows and channels, per tile and per layer, from counts made with
    # known coefficients (overlap: each count holds the first tile's load)
    from tessera.cost import features

    true = {"split_macs": 0.19, "gathered": 0.31, "plane_rows": 0.5, "core_chans": 10.0, "tiles": 2600.0,
            "layer": 800.0}
    coefs = {"combine": "overlap", "dma": {"act_bytes": 0.125, "act_xfers": 400.0, "w_bytes": 0.125,
                                           "w_xfers": 400.0}}
    samples = []
    for h, c, s in ((32, 32, 1), (16, 96, 2), (8, 512, 1), (4, 1024, 2), (48, 16, 1), (24, 64, 2), (12, 128, 1)):
        view = _dw_view(h, h, c, s)
        for tiling in ({"tiled": False, "tile": {"h": h // s, "w": h // s, "c": c}},
                       {"tiled": True, "buffering": 2, "tile": {"h": max(1, h // s // 4), "w": h // s, "c": c},
                        "n_tiles": {"h": 4, "w": 1, "c": 1}}):
            f = features.view_features(view, tiling, 2, 8)
            comp = sum(v * f.get(k, 1 if k == "layer" else 0) for k, v in true.items())
            dma = sum(coefs["dma"][k] * f[k] for k in coefs["dma"])
            samples.append(("depthwise", f, round(comp + (dma / f["tiles"] if f["tiles"] > 1 else dma))))
    got = fit.fit_ops(samples, coefs, ["depthwise"])["depthwise"]
    for k, v in true.items():
        assert abs(got[k] - v) <= 0.02 * v, (k, got[k], v)


def test_tile_cost_model_splits_depthwise_channels_evenly_over_the_cores():
    # pulp_open's depthwise coefficients price the busiest core's channels:
    # mbv1_128's dw5 (16x16x256) takes a tile of channels that is a multiple
    # of the 8 cores (it took 51: 7 channels on some cores, 6 on others);
    # gap8's file does not price them, so its candidates stay as they were
    from tessera import config, cost
    from tessera.config import views
    from tessera.tiler import solve_layer
    import yaml

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "kernels", "pulp_nn", "library.yaml")) as f:
        lib = yaml.safe_load(f)
    layer = _dw_view(16, 16, 256, 1)
    chosen = {}
    for name in ("pulp_open", "gap8"):
        tname, tpath = config.resolve("target", name, root)
        tcfg = config.load_target(tpath, tname)
        coefs = cost.coefficients(tcfg)
        assert bool(coefs["ops"]["depthwise"].get("core_chans")) == (name == "pulp_open")
        tgt = dict(views.tiler_target(tcfg, lib), cost={"coefficients": coefs, "dims": 2})
        chosen[name] = solve_layer(layer, tgt)
    assert chosen["pulp_open"]["tile"]["c"] % 8 == 0 and chosen["pulp_open"]["n_tiles"]["c"] > 1

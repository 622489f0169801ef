"""The fusion selector as SCons steps: fusion= on the command line, the
fused tilings and schedule.json as cached steps (an unchanged input reruns
nothing, a new L1 size reruns the selector), a bad policy as one line."""

import json
import os

import pytest
import yaml

from helpers import ROOT, one_error, scons, step_lines


def _target(tmp_path, l1):
    with open(os.path.join(ROOT, "targets", "host.yaml")) as f:
        data = yaml.safe_load(f)
    data["memory"]["L1"]["size"] = l1
    path = tmp_path / "fhost.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_schedule_is_a_cached_step(tmp_path):
    out = tmp_path / "out"
    target = _target(tmp_path, 64000)
    sched_path = out / "fhost" / "tiny" / "schedule.json"
    goal = str(sched_path)
    first = scons(f"target={target}", "model=tiny", "fusion=min_transfer", goal, out=out, check=True)
    assert "tessera: tile fused" in first.stdout and "tessera: select fusion" in first.stdout
    sched = json.loads(sched_path.read_text())
    assert sched["policy"] == "min_transfer"
    fused = [s for s in sched["steps"] if s["kind"] == "dw_pw"]
    assert [s["layers"] for s in fused] == [["dw1", "pw1"]]
    t = sched["totals"]
    assert t["activation_transfer_bytes"] < t["unfused_activation_transfer_bytes"]

    again = scons(f"target={target}", "model=tiny", "fusion=min_transfer", goal, out=out, check=True)
    assert step_lines(again.stdout) == []

    # fusion=none: every layer its own step, nothing fused is tiled
    none = scons(f"target={target}", "model=tiny", "fusion=none", goal, out=out, check=True)
    assert "tessera: tile fused" not in none.stdout
    sched = json.loads(sched_path.read_text())
    assert sched["policy"] == "none" and all(s["kind"] == "layer" for s in sched["steps"])

    # the default is min_latency; this renamed host target has no cost
    # model, so nothing is fused and no fused tiling is solved for nothing
    default = scons(f"target={target}", "model=tiny", goal, out=out, check=True)
    assert "tessera: tile fused" not in default.stdout
    sched = json.loads(sched_path.read_text())
    assert sched["policy"] == "min_latency" and all(s["kind"] == "layer" for s in sched["steps"])
    assert "no calibrated cost model" in sched["costs"]["none"]

    # a new L1 size: the tilers and the selector run again
    target = _target(tmp_path, 48000)
    l1 = scons(f"target={target}", "model=tiny", "fusion=min_transfer", goal, out=out, check=True)
    assert "tessera: tile fused" in l1.stdout and "tessera: select fusion" in l1.stdout


def test_unknown_policy_is_one_line(tmp_path):
    line = one_error(scons("target=host", "model=tiny", "fusion=fastest", out=tmp_path / "out"))
    assert "fusion=fastest" in line and "min_transfer" in line
    line = one_error(scons("target=host", "model=tiny", "fusion=min_latency", "fusion_cost=guess",
                           out=tmp_path / "out"))
    assert "fusion_cost=guess" in line and "measured" in line


def test_min_latency_without_a_cost_model_keeps_layers_apart(tmp_path):
    """The host counts wall time and has no calibrated cost model: min_latency
    cannot promise anything faster, keeps every layer apart and says why."""
    out = tmp_path / "out"
    sched_path = out / "host" / "tiny" / "schedule.json"
    scons("target=host", "model=tiny", "fusion=min_latency", str(sched_path), out=out, check=True)
    sched = json.loads(sched_path.read_text())
    assert all(s["kind"] == "layer" for s in sched["steps"])
    assert all("no calibrated cost model" in c["why_apart"] for c in sched["candidates"] if c["fusable"])


def test_fused_tiny_is_bit_exact_and_moves_what_the_selector_counted(tmp_path):
    """fusion=min_transfer on the host: the fused step runs (the depthwise's
    output never reaches L2), the network is bit-exact, and the activation
    bytes the firmware's DMA moved are the selector's count, step by step."""
    out = tmp_path / "out"
    scons("target=host", "model=tiny", "fusion=min_transfer", out=out, check=True)
    net = out / "host" / "tiny"
    verdict = json.loads((net / "verdict.json").read_text())
    sched = json.loads((net / "schedule.json").read_text())
    plan = json.loads((net / "memplan.json").read_text())
    assert verdict["verdict"] == "pass"
    assert [s["step"] for s in sched["steps"] if s["kind"] == "dw_pw"] == ["dw1+pw1"]
    graph = json.loads((net / "graph.json").read_text())
    mid = next(layer["output"] for layer in graph["layers"] if layer["name"] == "dw1")
    assert mid not in plan["activations"]["offsets"]
    moved = [d[0] for d in verdict["dma"]]      # the activation engine's bytes per layer
    assert moved[2] == 0                       # pw1 ran inside dw1's step
    # (and tiny's add inside branch's step: an add epilogue, test_add_epilogue.py)
    names = [layer["name"] for layer in graph["layers"]]
    inside = {n for s in sched["steps"] for n in s["layers"][1:]}
    assert inside == {"pw1", "add"}
    per_step = [s["activation_transfer_bytes"] for s in sched["steps"]]
    assert [m for n, m in zip(names, moved) if n not in inside] == per_step
    assert sum(moved) == sched["totals"]["activation_transfer_bytes"] < sched["totals"]["unfused_activation_transfer_bytes"]
    assert "fused step dw1+pw1" in (net / "src" / "dw1.c").read_text()


def test_l1_change_regenerates_only_changed_groups(tmp_path):
    """A new L1 size re-solves the fused tilings and reruns the selector; a
    fused step is generated again only when its decision changed or a file
    it reads changed (its band, its layers' plan slices or tilings), and
    some are not."""
    import re
    out = tmp_path / "out"
    net = out / "fhost" / "mbv1_025_128"
    goal = str(net / "src")

    def inputs(step):
        first, second = step.split("+")
        files = [net / "tiling" / f"{step}.fused.json", net / "tiling" / f"{first}.json",
                 net / "plan" / f"{first}.json", net / "plan" / f"{second}.json", net / "schedule" / f"{first}.json"]
        return [f.read_text() for f in files]

    def groups():
        sched = json.loads((net / "schedule.json").read_text())
        return sched, [s["step"] for s in sched["steps"] if s["kind"] != "layer"]
    # overlap=0: with segment overlap a new band moves its step's gap, and
    # so every address after it (a real change); this is about the selector
    scons(f"target={_target(tmp_path, 64000)}", "model=mbv1_025_128", "fusion=min_transfer", "overlap=0", goal, out=out,
          check=True)
    sched, steps = groups()
    # PW->DW pairs (the expansion into each depthwise) and DW->PW pairs compete in the chain
    assert {s["kind"] for s in sched["steps"]} >= {"pw_dw"} and len(steps) >= 12
    before = {s: inputs(s) for s in steps}
    second = scons(f"target={_target(tmp_path, 40000)}", "model=mbv1_025_128", "fusion=min_transfer", "overlap=0",
                   goal, out=out, check=True)
    assert "tessera: select fusion" in second.stdout and "tessera: tile fused" in second.stdout
    sched, kept_or_new = groups()
    kept = [s for s in kept_or_new if s in before]
    changed_decision = set(steps) ^ set(kept_or_new)
    assert changed_decision, "40000 bytes of L1 should change some decision"
    regenerated = set(re.findall(r"^tessera: generate .*/src/(\w+)\.c$", second.stdout, re.M))
    # a group taken or dropped: its first layer's file is another function now
    assert {s.split("+")[0] for s in changed_decision} <= regenerated
    redone = {s for s in kept if s.split("+")[0] in regenerated}
    changed = {s for s in kept if inputs(s) != before[s]}
    assert redone == changed
    assert 0 < len(kept) - len(redone)


@pytest.mark.qemu
def test_fused_on_gap8_under_qemu_is_bit_exact(tmp_path):
    """gap8 (PULP-NN kernels, weights streamed through L2, eight harts): the
    fused step runs pnn_dw_pw and the network stays bit-exact; the cluster
    DMA moves exactly the selector's saving fewer bytes than without fusion."""
    import shutil
    from tessera import config
    target = config.load_target(os.path.join(ROOT, "targets", "gap8.yaml"), "gap8")
    missing = [p for p in (target["toolchain"]["cc"], target["runner"]["program"]) if shutil.which(p) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed")
    moved = {}
    for policy in ("none", "min_transfer"):
        out = tmp_path / policy
        scons("target=gap8", "model=tiny", f"fusion={policy}", out=out, check=True)
        net = out / "gap8" / "tiny"
        verdict = json.loads((net / "verdict.json").read_text())
        assert verdict["verdict"] == "pass"
        moved[policy] = sum(d[0] for d in verdict["dma"])   # cluster DMA (activations and weights)
    sched = json.loads((net / "schedule.json").read_text())
    assert "pnn_dw_pw" in (net / "src" / "dw1.c").read_text()
    assert moved["none"] - moved["min_transfer"] == sched["totals"]["saved_bytes"] > 0


def test_fused_dory_network_matches_its_reference(tmp_path):
    """A NEMO/DORY network whose pointwise -> depthwise pairs run fused:
    bit-exact against the golden model and DORY's per-layer checksums, the
    fused intermediates' files listed as in L1 only (never written), not
    failed."""
    import importlib.util
    peer = os.path.normpath(os.path.join(ROOT, "..", "shared", "peer_tests"))
    if not os.path.isdir(peer):
        pytest.skip(f"peer networks not found at {peer}")
    spec = importlib.util.spec_from_file_location("peer_report", os.path.join(ROOT, "tools", "peer_report.py"))
    peer_report = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(peer_report)
    net = {n["name"]: n for n in peer_report.networks(peer)}["dory_dronet_2_0"]
    model = peer_report.write_model(net, str(tmp_path / "models"))
    out = tmp_path / "out"
    scons("target=host", f"model={model}", "fusion=min_transfer", out=out, check=True)
    verdict = json.loads((out / "host" / "dory_dronet_2_0" / "verdict.json").read_text())
    assert verdict["verdict"] == "pass"
    rows = verdict["reference"]["compared"]
    inside = [r for r in rows if "in_l1_only" in r]
    assert inside and all("equal" not in r for r in inside)
    assert all(r["equal"] for r in rows if "in_l1_only" not in r)


@pytest.mark.qemu
def test_fused_on_stm32h7_under_qemu_is_bit_exact(tmp_path):
    """stm32h7 (CMSIS-NN kernels): min_transfer fuses both kinds, the fused
    steps run the library's own fused kernels (kernels/cmsis_nn/fused.c), and
    the network stays bit-exact; min_latency, its layers in place by default,
    fuses nothing: no fused sweep pair ran faster than its layers in place
    (docs/fusion.md), so every group is held apart. mbv2_025_128: stride-2
    depthwise, residual adds around fused blocks, both kinds
    (benchmarks/fusion.py runs the other networks)."""
    import shutil
    from tessera import config
    target = config.load_target(os.path.join(ROOT, "targets", "stm32h7.yaml"), "stm32h7")
    missing = [p for p in (target["toolchain"]["cc"], target["runner"]["program"]) if shutil.which(p) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed")
    model = "mbv2_025_128"
    for policy in ("min_transfer", "min_latency"):
        out = tmp_path / policy
        scons("target=stm32h7", f"model={model}", f"fusion={policy}", out=out, check=True)
        net = out / "stm32h7" / model
        assert json.loads((net / "verdict.json").read_text())["verdict"] == "pass"
        sched = json.loads((net / "schedule.json").read_text())
        kinds = {s["kind"] for s in sched["steps"] if s["kind"] in ("dw_pw", "pw_dw")}
        assert kinds == ({"dw_pw", "pw_dw"} if policy == "min_transfer" else set()), (policy, kinds)
        if policy == "min_latency":
            held = [g for g in sched["candidates"] if g["kind"] in ("dw_pw", "pw_dw") and g.get("fusable")]
            # each kept apart by the estimate (not fewer than apart) or by the fit (none ran faster)
            assert held and all(not g.get("chosen") and ("ran faster than its layers" in g.get("why_apart", "")
                                                         or "not fewer than" in g.get("why_apart", ""))
                                for g in held)
        # (and every residual add runs as an epilogue: tests/test_add_epilogue.py)
        adds = {x["name"] for x in json.loads((net / "graph.json").read_text())["layers"] if x["op"] == "add"}
        inside = {n for s in sched["steps"] if s["kind"] in ("add", "dw_pw_add") for n in s["layers"]}
        assert policy != "min_transfer" or adds <= inside
        code = "".join(p.read_text() for p in (net / "src").glob("*.c"))
        assert all(f"tsr_cmsis_{kind}(" in code for kind in kinds)


_SMALL_MBV2 = ("description: 0.25-MobileNetV2 at 40x40 (fused PW->DW test)\n"
               "generator: {arch: mobilenet_v2, width: 0.25, resolution: 40, classes: 10, seed: 0}\n"
               "quantization: {calibration_samples: 4, seed: 0}\ninput: {seed: 0}\n")
# the same, its PW->DW steps row-wise (the shifted buffer) where that fits
_SMALL_MBV2_ROWS = _SMALL_MBV2 + "fusion_pw_dw: rows\n"


@pytest.mark.parametrize("name,l1,b2_layout,small", [
    pytest.param("gap8", 64000, "rows", 16000, marks=pytest.mark.qemu),
    pytest.param("pulp_open", 65536, None, 14000, marks=pytest.mark.gvsoc)])
def test_pulp_nn_pw_dw_steps_are_bit_exact(tmp_path, name, l1, b2_layout, small):
    """PULP-NN's PW->DW steps (the library's pointwise, then its depthwise,
    per block of channels or, row-wise, of rows over the shifted buffer;
    gap8 under QEMU with the portable code, pulp_open under GVSoC with
    Xpulp's): with L1 shrunk to `small` bytes the stride-2 pair runs in
    several bands of several blocks (gap8: row-wise, pulp_open: channel-wise;
    its tiler takes the fewest blocks, so one block per band when that fits
    at all: 14000 bytes leave room for 24 of the 48 channels), and the
    network stays bit-exact."""
    import shutil
    from tessera import config
    from tessera.runners import gvsoc
    target = config.load_target(os.path.join(ROOT, "targets", f"{name}.yaml"), name)
    tools = [target["toolchain"]["cc"]] + ([target["runner"]["program"]] if name == "gap8" else [])
    missing = [p for p in tools if shutil.which(p) is None]
    if missing or (name == "pulp_open" and gvsoc.locate() is None):
        pytest.skip(f"{', '.join(missing) or 'gvsoc'} not installed")
    with open(os.path.join(ROOT, "targets", f"{name}.yaml")) as f:
        text = f.read()
    assert f"    size: {l1}\n" in text
    tpath, mpath = tmp_path / f"{name}_small.yaml", tmp_path / "mbv2_small.yaml"
    tpath.write_text(text.replace(f"    size: {l1}\n", f"    size: {small}\n", 1))
    mpath.write_text(_SMALL_MBV2_ROWS if b2_layout == "rows" else _SMALL_MBV2)
    out = tmp_path / "out"
    scons(f"target={tpath}", f"model={mpath}", "fusion=min_transfer", out=out, check=True)
    net = out / f"{name}_small" / "mbv2_small"
    assert json.loads((net / "verdict.json").read_text())["verdict"] == "pass"
    sched = json.loads((net / "schedule.json").read_text())
    fused = [json.loads((net / "tiling" / f"{s['step']}.fused.json").read_text())
             for s in sched["steps"] if s.get("kind") == "pw_dw"]
    assert fused and all(f["scheme"] == "shared" for f in fused)
    for f in fused:
        src = (net / "src" / f"{f['layers'][0]}.c").read_text()
        assert ("pnn_pw_dw_rows_block" if f.get("layout") == "rows" else "pnn_pw_dw_block(") in src
        # PULP-open asks for the first band's input before the argument
        # set-up (docs/gvsoc.md, "session 12"); gap8's code is as it was
        first_in, args = src.index("tsr_tile_in(&in[0], "), src.index(" a = {0};")
        assert (first_in < args) == (name == "pulp_open")
    # a step of several bands and several blocks, over a stride-2 depthwise
    b2 = next(f for f in fused if f["group"] == "b2_expand+b2_dw")
    assert len(b2["bands"]) > 1 and b2.get("layout") == b2_layout
    assert b2["fd"] < (b2["band_h"] if b2_layout == "rows" else 48)


@pytest.mark.qemu
def test_cmsis_nn_pw_dw_row_wise_on_stm32h7_is_bit_exact(tmp_path):
    """CMSIS-NN's row-wise PW->DW steps (tsr_cmsis_pw_dw_rows: the library's
    1x1 convolution of each block's new rows into the shifted buffer, then
    its depthwise): with DTCM shrunk to 24000 bytes and fusion_pw_dw: rows,
    the stride-2 pair runs in several bands of several row blocks, and the
    network stays bit-exact under QEMU."""
    import shutil
    from tessera import config
    target = config.load_target(os.path.join(ROOT, "targets", "stm32h7.yaml"), "stm32h7")
    missing = [p for p in (target["toolchain"]["cc"], target["runner"]["program"]) if shutil.which(p) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed")
    with open(os.path.join(ROOT, "targets", "stm32h7.yaml")) as f:
        text = f.read()
    assert "    size: 131072\n" in text
    tpath, mpath = tmp_path / "stm32h7_small.yaml", tmp_path / "mbv2_small.yaml"
    tpath.write_text(text.replace("    size: 131072\n", "    size: 24000\n", 1))
    mpath.write_text(_SMALL_MBV2_ROWS)
    out = tmp_path / "out"
    scons(f"target={tpath}", f"model={mpath}", "fusion=min_transfer", out=out, check=True)
    net = out / "stm32h7_small" / "mbv2_small"
    assert json.loads((net / "verdict.json").read_text())["verdict"] == "pass"
    sched = json.loads((net / "schedule.json").read_text())
    fused = [json.loads((net / "tiling" / f"{s['step']}.fused.json").read_text())
             for s in sched["steps"] if s.get("kind") == "pw_dw"]
    rows = [f for f in fused if f.get("layout") == "rows"]
    assert rows and all(f["scheme"] == "layers" for f in fused)
    for f in rows:
        assert "tsr_cmsis_pw_dw_rows(" in (net / "src" / f"{f['layers'][0]}.c").read_text()
    b2 = next(f for f in rows if f["group"] == "b2_expand+b2_dw")
    assert len(b2["bands"]) > 1 and b2["fd"] < b2["band_h"]     # rows kept and shifted, several bands


def test_reference_pw_dw_row_wise_on_host_is_bit_exact(tmp_path):
    """The reference PW->DW kernels on the host (per core): with L1 at 16000
    bytes and fusion_pw_dw: rows the fused tiler takes the row-wise layout
    (the shifted buffer) for the pairs, tsr_pw_dw_rows runs them, and the
    network stays bit-exact."""
    tpath, mpath = tmp_path / "host_small.yaml", tmp_path / "mbv2_small.yaml"
    tpath.write_text(open(_target(tmp_path, 16000)).read())
    mpath.write_text(_SMALL_MBV2_ROWS)
    out = tmp_path / "out"
    scons(f"target={tpath}", f"model={mpath}", "fusion=min_transfer", out=out, check=True)
    net = out / "host_small" / "mbv2_small"
    assert json.loads((net / "verdict.json").read_text())["verdict"] == "pass"
    sched = json.loads((net / "schedule.json").read_text())
    fused = [json.loads((net / "tiling" / f"{s['step']}.fused.json").read_text())
             for s in sched["steps"] if s.get("kind") == "pw_dw"]
    rows = [f for f in fused if f.get("layout") == "rows"]
    assert rows and all(f["scheme"] == "per_core" for f in fused)
    assert any(f["fd"] < f["band_h"] for f in rows)      # several blocks: rows kept and shifted
    for f in rows:
        assert "tsr_pw_dw_rows(" in (net / "src" / f"{f['layers'][0]}.c").read_text()


def test_fused_steps_with_streamed_weights_on_gap8_are_bit_exact(tmp_path):
    """gap8 streams every layer's weights through L2 in two slots, each
    chunk loading while the previous one is used. A fused step reads its
    input while the next chunk loads, so that chunk must not land on the
    input even where segment overlap released it early (DS-CNN-like
    blocks: it did, and pw2 differed from row 11 on). Every variant
    (apart, all DW->PW fused, all PW->DW fused) is checked bit-exact."""
    import shutil
    from tessera import config
    from tessera.cost import fused_sweeps
    target = config.load_target(os.path.join(ROOT, "targets", "gap8.yaml"), "gap8")
    missing = [p for p in (target["toolchain"]["cc"], target["runner"]["program"]) if shutil.which(p) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed")
    model = fused_sweeps.write("fs_kws", str(tmp_path / "models"))
    out = tmp_path / "out"
    scons("target=gap8", f"model={model}", "fusion=min_latency", "fusion_cost=measured", out=out, check=True)
    net = out / "gap8" / "fs_kws"
    for variant in ("none", "all_dw_pw", "all_pw_dw"):
        verdict = json.loads((net / "variants" / variant / "verdict.json").read_text())
        assert verdict["verdict"] == "pass", variant
    sched = json.loads((net / "variants" / "all_dw_pw" / "schedule.json").read_text())
    assert [s["step"] for s in sched["steps"] if s["kind"] == "dw_pw"] == ["dw1+pw1", "dw2+pw2", "dw3+pw3",
                                                                          "dw4+pw4"]


def test_target_yaml_sets_the_default_policy_and_the_model_or_command_line_win(tmp_path):
    """fusion: in the target YAML is the default for its builds; a model's
    fusion: and the command line's fusion= win over it."""
    with open(os.path.join(ROOT, "targets", "host.yaml")) as f:
        data = yaml.safe_load(f)
    data["fusion"] = "min_transfer"
    target = tmp_path / "thost.yaml"
    target.write_text(yaml.safe_dump(data))
    with open(os.path.join(ROOT, "models", "tiny.yaml")) as f:
        model = yaml.safe_load(f)
    model["fusion"] = "none"
    model_path = tmp_path / "tiny_none.yaml"
    model_path.write_text(yaml.safe_dump(model))
    out = tmp_path / "out"

    def policy(model_arg, name, *extra):
        goal = out / "thost" / name / "schedule.json"
        scons(f"target={target}", f"model={model_arg}", *extra, str(goal), out=out, check=True)
        return json.loads(goal.read_text())["policy"]
    assert policy("tiny", "tiny") == "min_transfer"
    assert policy(model_path, "tiny_none") == "none"
    assert policy("tiny", "tiny", "fusion=min_latency") == "min_latency"

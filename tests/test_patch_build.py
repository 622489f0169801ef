"""Patched steps built and run: bit-exact on the host (several patches,
rows kept down the strips), on a Cortex-M (CMSIS-NN kernels, weights read
where they live) and on GAP8 (PULP-NN kernels on eight harts, weights
streamed from L3), with the activation peak below the layers apart; the
replay of the activation level catches a patched step's output placed over
input it still reads."""

import json
import os
import shutil

import pytest

from helpers import ROOT, scons
from tessera import config
from tessera.ir import Graph
from tessera.planning import hazard, memplan, overlap, rambudget
from tessera.util import canon


def _net(out, target, model):
    return out / target / model


def _patched(net):
    return [s for s in json.loads((net / "schedule.json").read_text())["steps"] if s["kind"] == "patch"]


def test_min_memory_patches_mbv2_on_the_host_bit_exact(tmp_path):
    """mbv2_035_128, fusion=min_memory: its first stages run patched, the
    activation peak is at most 0.45 of the tensor-level bound of the layers
    apart, and every layer matches the golden model."""
    scons("target=host", "model=mbv2_035_128", "fusion=min_memory", out=tmp_path, check=True)
    net = _net(tmp_path, "host", "mbv2_035_128")
    verdict = json.loads((net / "verdict.json").read_text())
    assert verdict["verdict"] == "pass"
    steps = _patched(net)
    assert steps and steps[0]["layers"][0] == "conv0" and steps[0]["patch"]["patches"] > 1
    graph = Graph.from_json(canon.read_json(str(net / "graph.json")))
    tensor_bound = max(overlap.step_floors(graph)[0])
    peak = json.loads((net / "memplan.json").read_text())["activations"]["peak"]
    assert peak <= 0.45 * tensor_bound
    # the intermediates never exist in the activation level: not compared, the step's output is
    inside = {r["name"] for r in verdict["layers"] if r.get("in_l1_only")}
    assert set(steps[0]["layers"][:-1]) <= inside
    report = json.loads((net / "report.json").read_text())
    assert report["fusion"]["patched"]["need"] == steps[0]["footprint"] or report["fusion"]["patched"]["need"] >= peak
    assert "Patched steps" in (net / "report.html").read_text()


@pytest.mark.qemu
@pytest.mark.parametrize("name", ["stm32f4", "gap8"])
def test_patched_tiny_under_qemu_is_bit_exact(tmp_path, name):
    """tiny with fusion=min_memory: on stm32f4 the CMSIS-NN kernels reading
    weights where they live (flash), on gap8 the PULP-NN kernels with
    weights streamed from L3 through L2 into the tile level."""
    target = config.load_target(os.path.join(ROOT, "targets", f"{name}.yaml"), name)
    missing = [p for p in (target["toolchain"]["cc"], target["runner"]["program"]) if shutil.which(p) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed")
    scons(f"target={name}", "model=tiny", "fusion=min_memory", out=tmp_path, check=True)
    net = _net(tmp_path, name, "tiny")
    assert json.loads((net / "verdict.json").read_text())["verdict"] == "pass"
    steps = _patched(net)
    assert steps
    src = (net / "src" / f"{steps[0]['layers'][0]}.c").read_text()
    assert "tsr_patch_op_t ops" in src
    assert ("tsr_wstream_next" in src) == (name == "gap8")
    assert steps[0]["patch"]["direct"] == (name == "stm32f4")
    # the report's row for it: one step, its count its layers' slots, its estimate the patch selector's
    rep = json.loads((net / "report.json").read_text())
    row = next(r for r in rep["steps"] if r["step"] == steps[0]["step"])
    slots = {l["name"]: l["instructions"] for l in rep["layers"]}
    assert row["layers"] == steps[0]["layers"] and row["instructions"] == sum(slots[n] for n in row["layers"])
    assert row["estimate"] == steps[0]["patch"]["estimate"] and row["n_tiles"] == steps[0]["patch"]["patches"]


@pytest.mark.slow
@pytest.mark.gvsoc
@pytest.mark.parametrize("model", ["tiny", "mbv1_025_128"])
def test_patched_on_pulp_open_eight_cores_is_bit_exact(tmp_path, model):
    """fusion=min_memory on pulp_open (GVSoC, 8 cores, weights in L2): the
    patched step's layer arguments no longer sit in core 0's 2 kB L1 stack
    all at once (with them, both networks faulted: a return address
    overwritten under the kernels' frames), and its depthwise layers take
    the build-time requantization cut as unpatched ones do."""
    from tessera.runners import gvsoc

    if gvsoc.locate() is None:
        pytest.skip("no GVSoC on PATH (docs/gvsoc.md)")
    scons("-j2", "target=pulp_open", f"model={model}", "fusion=min_memory", out=tmp_path, check=True)
    net = _net(tmp_path, "pulp_open", model)
    assert json.loads((net / "verdict.json").read_text())["verdict"] == "pass"
    steps = _patched(net)
    assert steps
    src = (net / "src" / f"{steps[0]['layers'][0]}.c").read_text()
    assert "tsr_patch_op_t ops" in src
    if model == "mbv1_025_128":
        # every depthwise of the step with its cut (pulp_nn.dw_split: all of MobileNetV1's have one)
        dws = [n for n in steps[0]["layers"] if n.startswith("dw")]
        assert dws and src.count(".split = ") == len(dws)


def _bottleneck():
    """x -> l0 -> a (16x16x8) -> [expand x6, dw 3x3, project] -> p -> l4 -> z."""
    from tessera.ir import Layer, Requant, Tensor

    def rq(c):
        return Requant(mul=[1 << 20] * c, add=[0], shift=[24] * c)
    t = {n: Tensor(n, s) for n, s in (("x", [16, 16, 8]), ("a", [16, 16, 8]), ("e", [16, 16, 48]),
                                       ("d", [16, 16, 48]), ("p", [16, 16, 8]), ("z", [16, 16, 8]))}
    pw = lambda n, i, o, c: Layer(n, "pointwise", [i], o, input_offset=0, weights=n + ".w",  # noqa: E731
                                  bias=n + ".b", requant=rq(c))
    layers = [pw("l0", "x", "a", 8), pw("expand", "a", "e", 48),
              Layer("dw", "depthwise", ["e"], "d", kernel=[3, 3], pad=[1, 1, 1, 1], input_offset=0, weights="dw.w",
                    bias="dw.b", requant=rq(48)),
              pw("project", "d", "p", 8), pw("l4", "p", "z", 8)]
    return Graph("g", "test", t, layers, ["x"], ["z"])


def test_the_replay_catches_a_patched_output_over_unread_input():
    """An inverted bottleneck patched in row bands, halos recomputed: its
    output may start `gap` bytes below its consumed input (vMCU's
    segment-level overlap, from the patches' loads and stores); the replay
    passes there and stops one byte closer, naming the patch."""
    from test_patch_select import CTX, _tilings

    from tessera.fusion import patch

    g = _bottleneck()
    tilings = _tilings(g)
    names = ["expand", "dw", "project"]
    opts = patch.Patcher(g, CTX).options(names)
    band = next(o for o in opts if o["tile"][1] == 16 and o["patches"] > 1 and o["policy"] == "recompute")
    step = {"step": patch.group_name(names), "kind": "patch", "layers": names,
            "patch": dict({k: band[k] for k in ("tile", "policy", "l1_bytes")}, align=4, direct=False)}
    sched = {"steps": [{"step": "l0", "kind": "layer", "layers": ["l0"]}, step,
                       {"step": "l4", "kind": "layer", "layers": ["l4"]}]}
    memory = {"levels": {"L1": {"size": 64000, "usable": 64000, "kind": "scratchpad", "writable": True},
                         "L2": {"size": 1 << 16, "usable": 1 << 16, "kind": "sram", "writable": True}},
              "place": {"tiles": "L1", "activations": "L2", "weights": "L2"}, "overlap": True}
    fused, memory = rambudget.with_fused(memory, sched, {}, g)
    the_plan = memplan.plan(g, tilings, memory, 4, "", fused)
    gap = next(c["gap"] for c in overlap.fused_candidates(g, fused) if c["below"] == "p")
    assert 0 < gap < g.tensor("p").nbytes
    for below, fails in ((gap, False), (gap - 1, True)):
        moved = json.loads(canon.dumps(the_plan))
        moved["activations"]["offsets"].update(x=0, a=20000, p=20000 - below, z=40000)
        moved["activations"]["arena"] = 1 << 16
        if fails:
            with pytest.raises(hazard.HazardError, match=r"patched step expand..project patch \d+: reads tensor 'a'"):
                hazard.check(g, tilings, moved, fused)
        else:
            hazard.check(g, tilings, moved, fused)

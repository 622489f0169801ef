"""ram_cap: the tile budget is the largest rung of the ladder whose whole
plan (tiled and planned as the build does) fits the cap; the build checks
the cap and says in one line when no rung fits."""

import json
import os

import pytest
import yaml

from helpers import one_error, scons
from tessera.planning import memplan, rambudget
from tessera.errors import TesseraError
from tessera.ir import Graph, Layer, Requant, Tensor
from tessera.tiler import solve_layer
from tessera.config.views import tiler_layer

with open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                       "kernels", "reference", "library.yaml")) as f:
    REF = yaml.safe_load(f)["tiler"]

# separate RAM levels: the tile arena counts in the total as the activations do
MEMORY = {"levels": {"L1": {"size": 16384, "usable": 16384, "kind": "scratchpad", "writable": True},
                     "L2": {"size": 65536, "usable": 61440, "kind": "sram", "writable": True},
                     "flash": {"size": 1 << 20, "usable": 1 << 20, "kind": "flash", "writable": False}},
          "place": {"tiles": "L1", "activations": "L2", "weights": "flash"}, "align": 4, "overlap": True}


def chain():
    rq = lambda n: Requant(mul=[3] * n, add=[0], shift=[9] * n)  # noqa: E731
    shapes = {"x": [16, 16, 8], "m": [16, 16, 16], "y": [16, 16, 16]}
    tensors = {k: Tensor(k, v) for k, v in shapes.items()}
    layers = [Layer("l0", "pointwise", ["x"], "m", input_offset=0, weights="l0.w", bias="l0.b", requant=rq(16)),
              Layer("l1", "depthwise", ["m"], "y", kernel=[3, 3], stride=[1, 1], pad=[1] * 4, input_offset=0,
                    weights="l1.w", bias="l1.b", requant=rq(16))]
    return Graph("g", "test", tensors, layers, ["x"], ["y"])


def ram_at(graph, views, budget):
    tgt = {"l1_budget": budget, "cores": 1, "buffering": 2, "kernels": REF}
    tilings = {n: solve_layer(v, tgt) for n, v in views.items()}
    return rambudget.total_ram(memplan.memory_report(memplan.plan(graph, tilings, MEMORY)))


def test_the_largest_rung_that_fits_the_cap_wins():
    graph = chain()
    views = {layer.name: tiler_layer(layer, graph) for layer in graph.layers}
    tgt = {"l1_budget": 16384, "cores": 1, "buffering": 2, "kernels": REF}
    rungs = rambudget.rungs(16384)
    assert rungs[0] == 16384 and rungs == sorted(rungs, reverse=True)
    rams = [ram_at(graph, views, b) for b in rungs]
    assert rams[0] > min(rams)       # a smaller tile arena takes less RAM
    # the cap just under the top rung's total: the first rung at or below it
    cap = rams[0] - 1
    want = next(i for i, r in enumerate(rams) if r <= cap)
    got = rambudget.choose(graph, views, tgt, MEMORY, cap, solve_layer)
    assert got["l1_budget"] == rungs[want] and got["ram"] == rams[want] <= cap
    assert [r for _, r in got["tried"]] == rams[:want + 1]
    # no rung fits: one line naming the cap and what each rung needs
    with pytest.raises(TesseraError) as err:
        rambudget.choose(graph, views, tgt, MEMORY, min(rams) - 1, solve_layer, "ram_cap of g")
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("ram_cap of g: no tile budget") and f"least is {min(rams)}" in msg


def test_ram_cap_on_the_command_line(tmp_path):
    plan = tmp_path / "stm32h7" / "tiny" / "memplan.json"
    scons("target=stm32h7", "model=tiny", "ram_cap=100000", str(plan), out=tmp_path, check=True)
    chosen = json.loads((plan.parent / "ram_budget.json").read_text())
    report = memplan.memory_report(json.loads(plan.read_text()))
    assert chosen["ram"] == rambudget.total_ram(report) <= 100000
    line = one_error(scons("target=stm32h7", "model=tiny", "ram_cap=1000", str(plan), out=tmp_path))
    assert "no tile budget makes the firmware fit ram_cap 1000 bytes" in line
    line = one_error(scons("target=stm32h7", "model=tiny", "ram_cap=lots", str(plan), out=tmp_path))
    assert line.startswith("tessera: error: ram_cap=lots: not a positive number of bytes")


def test_ram_cap_in_the_model_yaml(tmp_path):
    with open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "models", "tiny.yaml")) as f:
        data = yaml.safe_load(f)
    data["ram_cap"] = 1000
    yml = tmp_path / "capped.yaml"
    yml.write_text(yaml.safe_dump(data))
    plan = tmp_path / "stm32h7" / "capped" / "memplan.json"
    line = one_error(scons("target=stm32h7", f"model={yml}", str(plan), out=tmp_path))
    assert "ram_cap of capped on stm32h7: no tile budget makes the firmware fit ram_cap 1000 bytes" in line
    # the command line wins over the YAML
    scons("target=stm32h7", f"model={yml}", "ram_cap=100000", str(plan), out=tmp_path, check=True)
    assert json.loads((plan.parent / "ram_budget.json").read_text())["ram_cap"] == 100000


def test_fused_steps_are_tiled_within_the_capped_budget(tmp_path):
    """With fusion, the fused steps are tiled within the tile budget the cap
    chose, as the layers are (else a fused step's L1 would break the cap):
    mbv2_035_128 on stm32h7 with fusion=min_memory runs its first stages as a
    patched step (issue 29; before, b2's expansion and depthwise fused) and
    fits 0.9 x ST X-CUBE-AI's 258 KiB."""
    out = tmp_path / "stm32h7" / "mbv2_035_128"
    cap = int(0.9 * 258 * 1024)
    scons("target=stm32h7", "model=mbv2_035_128", "fusion=min_memory", f"ram_cap={cap}", str(out / "memplan.json"),
          out=tmp_path, check=True)
    chosen = json.loads((out / "ram_budget.json").read_text())
    budget = chosen["l1_budget"]
    fused = json.loads((out / "tiling" / "b2_expand+b2_dw.fused.json").read_text())
    assert fused["feasible"] and fused["l1_bytes"]["total"] <= budget
    steps = json.loads((out / "schedule.json").read_text())["steps"]
    groups = [s for s in steps if s["kind"] != "layer"]
    assert [s["step"] for s in groups] == chosen["fused"] and groups[0]["kind"] == "patch"
    assert all(s["patch"]["l1_bytes"]["total"] <= budget for s in groups if s["kind"] == "patch")
    the_plan = json.loads((out / "memplan.json").read_text())
    assert the_plan["tiles"]["arena"] <= budget
    # the budget step judged the plan the build made, fused step included:
    # the total it counted is the plan's, and every larger option it tried
    # (the top rung in place among them) was over the cap with that step
    assert chosen["ram"] == rambudget.total_ram(memplan.memory_report(the_plan)) <= cap
    assert all(isinstance(t[1], int) and t[1] > cap for t in chosen["tried"][:-1])


def test_each_rung_is_judged_with_the_fused_steps_the_build_runs():
    """With fusion the budget step judges each rung by the plan with that
    rung's fused steps (their tiles in the arena): on the chain, fusing l0+l1
    at the top rungs costs more RAM than the layers apart (a larger fused
    tile), so a cap the unfused top rung meets moves the choice down to the
    first rung whose fused plan fits."""
    from tessera import fusion
    from tessera.fusion import decide

    graph = chain()
    views = {layer.name: tiler_layer(layer, graph) for layer in graph.layers}
    cands = fusion.candidates(graph)
    pair = fusion.pair_view(graph, "l0", "l1")
    seen = {}

    def schedule(tilings, tgt):
        ft = fusion.solve_dw_pw(pair, dict(tgt, fused_scheme={}))
        sched = decide.schedule(graph, tilings, {"l0+l1": (pair, ft)}, {"policy": "min_transfer", "candidates": cands})
        seen[tgt["l1_budget"]] = (sched, ft)
        return sched, {"l0+l1": ft}

    def fused_ram(budget):
        # the plan with the fused step, built here from its tiling directly
        sched, ft = seen[budget]
        assert [s["step"] for s in sched["steps"]] == ["l0+l1"]
        tgt = {"l1_budget": budget, "cores": 1, "buffering": 2, "kernels": REF}
        tilings = {n: solve_layer(v, tgt) for n, v in views.items()}
        fused = {"l0+l1": {"layers": ["l0", "l1"], "l1_total": ft["l1_bytes"]["total"], "bands": ft["bands"]}}
        return rambudget.total_ram(memplan.memory_report(memplan.plan(graph, tilings, MEMORY, 4, "", fused)))

    tgt = {"l1_budget": 16384, "cores": 1, "buffering": 2, "kernels": REF}
    top = rambudget.rungs(16384)[0]
    cap = ram_at(graph, views, top) + 1
    # judged without fusion, the top rung meets the cap
    assert rambudget.choose(graph, views, tgt, MEMORY, cap, solve_layer)["l1_budget"] == top
    got = rambudget.choose(graph, views, tgt, MEMORY, cap, solve_layer, schedule=schedule)
    assert fused_ram(top) > cap            # with its fused step it does not
    assert got["l1_budget"] < top and got["fused"] == ["l0+l1"]
    assert got["ram"] == fused_ram(got["l1_budget"]) <= cap
    assert all(ram == fused_ram(b) > cap for b, ram in got["tried"][:-1])

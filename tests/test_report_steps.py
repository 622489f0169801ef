"""tessera.report.steps: a fused step's count is the sum of its layers'
slots and its kind names both ops, so per-kind figures never mix a fused
step into a kind of single layers (the benchmarks' per-type rows)."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "site_scons"))

from tessera.report.steps import by_kind, steps   # noqa: E402


def _old_report():
    # a report.json of before issue 31: counts per layer slot, the fused
    # step's whole count in its first layer's slot, 120 in the second's
    layers = [{"name": "conv0", "op": "conv2d", "macs": 1000, "instructions": 5000},
              {"name": "dw1", "op": "depthwise", "macs": 200, "instructions": 3000},
              {"name": "pw1", "op": "pointwise", "macs": 800, "instructions": 120},
              {"name": "dw2", "op": "depthwise", "macs": 100, "instructions": 900},
              {"name": "pw2", "op": "pointwise", "macs": 400, "instructions": 1600}]
    return {"counts": {"method": "qemu-instructions"}, "layers": layers,
            "fusion": {"groups": [{"step": "dw1+pw1", "layers": ["dw1", "pw1"]}]}}


def test_a_fused_step_is_one_step_with_its_layers_count():
    s = steps(_old_report())
    assert [x["step"] for x in s] == ["conv0", "dw1+pw1", "dw2", "pw2"]
    assert s[1]["instructions"] == 3120 and s[1]["macs"] == 1000 and s[1]["layers"] == ["dw1", "pw1"]
    assert sum(x["instructions"] for x in s) == 5000 + 3000 + 120 + 900 + 1600


def test_per_kind_figures_keep_fused_steps_apart():
    k = by_kind(_old_report())
    assert list(k) == ["conv2d", "depthwise+pointwise", "depthwise", "pointwise"]
    assert k["depthwise+pointwise"] == {"steps": 1, "layers": 2, "macs": 1000, "count": 3120}
    assert k["pointwise"] == {"steps": 1, "layers": 1, "macs": 400, "count": 1600}   # not 1720
    assert k["depthwise"]["count"] == 900


def test_a_report_without_counts_has_none():
    rep = _old_report()
    rep["counts"]["method"] = "none"
    assert all(row["count"] is None for row in by_kind(rep).values())

"""Fitting what a fused step saves against its layers apart, per kind
(dw_pw, pw_dw), from the fused sweeps (cost/fused_sweeps.py) built with
fusion=min_latency fusion_cost=measured: variants/none gives each pair's
layers' counts apart, variants/all_dw_pw and all_pw_dw the fused step's.

A sample is one feasible pair: its saving features (cost.fused.SAVING) and
the measured saving (apart minus fused; negative when fused is slower).
Least squares on relative error (each row divided by the pair's measured
count apart, as the layer fit does), with a light ridge on the columns
scaled to unit norm (a few dozen samples, four terms). Signs are free: a
fused kernel slower per MAC than the layers' own gives a negative term.
The estimate is then the layers' own estimates minus the fitted saving
(cost.fused.group_estimate), so the fusion decision rests on the saving
alone.
"""

import os

import numpy as np

from .. import canon, ir
from .fused import SAVING, reference_rows, saving_features
from ..fusion import tiling_stem

RIDGE = 1e-3


def group_samples(build_dir, count_key):
    """[(kind, scheme, features, apart, fused, group)] of a build made with
    fusion_cost=measured (its variants/ directories)."""
    graph = ir.Graph.from_json(canon.read_json(os.path.join(build_dir, "graph.json")))
    var = os.path.join(build_dir, "variants")
    apart = {r["name"]: r.get(count_key) for r in canon.read_json(os.path.join(var, "none", "report.json"))["layers"]}
    out = []
    for variant in ("all_dw_pw", "all_pw_dw"):
        rep = canon.read_json(os.path.join(var, variant, "report.json"))
        fused = {r["name"]: r.get(count_key) for r in rep["layers"]}
        for g in rep.get("fusion", {}).get("groups", []):
            a, b = g["layers"]
            ft = canon.read_json(os.path.join(var, variant, "tiling", f"{tiling_stem(g['step'])}.fused.json"))
            if reference_rows(ft):
                # never priced (cost.fused.why_no_estimate): not a sample of
                # the library's steps (stm32h7 fs_deep pw4+dw5: 2.4x slower
                # fused, it skewed every PW->DW estimate by ~10%)
                continue
            first, second = graph.layer(a), graph.layer(b)
            out.append((ft["kind"], ft.get("scheme", "per_core"), saving_features(first, second, graph, ft),
                        apart[a] + apart[b], fused[a] + fused[b], g["step"]))
    return out


def fit(samples):
    """{kind: {scheme, saving: {term: coefficient}, groups, rel_error}} from
    group_samples' rows (every kind seen; a kind's steps share a scheme on
    one target, else the most frequent scheme's are fitted)."""
    out = {}
    for kind in sorted({s[0] for s in samples}):
        mine = [s for s in samples if s[0] == kind]
        schemes = sorted({s[1] for s in mine}, key=lambda sc: (-sum(s[1] == sc for s in mine), sc))
        mine = [s for s in mine if s[1] == schemes[0]]
        A = np.array([[f[k] / ap for k in SAVING] for _, _, f, ap, _, _ in mine], dtype=float)
        b = np.array([(ap - fu) / ap for _, _, _, ap, fu, _ in mine], dtype=float)
        norm = np.linalg.norm(A, axis=0)
        norm[norm == 0] = 1.0
        As = np.vstack([A / norm, np.sqrt(RIDGE) * np.eye(len(SAVING))])
        bs = np.concatenate([b, np.zeros(len(SAVING))])
        x = np.linalg.lstsq(As, bs, rcond=None)[0] / norm
        pred = A @ x
        out[kind] = {"scheme": schemes[0], "groups": len(mine),
                     # pairs measured faster fused: with none, the fit has no
                     # evidence any pair of this kind saves (its constant may
                     # still come out positive: fusion/costs.py holds them)
                     "faster": sum(1 for _, _, _, ap, fu, _ in mine if fu < ap),
                     "saving": {k: _num(v) for k, v in zip(SAVING, x)},
                     # the most bands any fitted pair ran in: a step in more
                     # is beyond what the fit saw (fusion/costs.py holds it)
                     **({"bands": max(f["bands"] for _, _, f, _, _, _ in mine)}
                        if all("bands" in f for _, _, f, _, _, _ in mine) else {}),
                     # the fit's own median |error| of the fused count, relative to the count apart
                     "median_error": _num(float(np.median(np.abs(pred - b))))}
    return out


def _num(v):
    return float(f"{v:.6g}")

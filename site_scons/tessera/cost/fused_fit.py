"""Fitting what a fused step saves against its layers apart, per kind
(dw_pw, pw_dw), from the fused sweeps (cost/fused_sweeps.py) built with
fusion=min_latency fusion_cost=measured: variants/none gives each pair's
layers' counts apart (and their tilings), variants/all_dw_pw and
all_pw_dw the fused step's.

A sample is one feasible pair: its saving features (cost.fused.TERMS:
the DMA it does not do, priced by the target's DMA coefficients, and what
its blocks cost beyond the layers' own tiles) and the measured saving
(apart minus fused; negative when fused is slower). Least squares on
relative error (each row divided by the pair's measured count apart, as
the layer fit does), with a light ridge on the columns scaled to unit
norm. The kinds are fitted together: the block terms (SHARED) price the
same kernels' parts in either kind (a depthwise's stripes, a pointwise's
pixels), one coefficient each from every pair; `step` is each kind's own
(OWN). Signs are free. The estimate is then the layers' own estimates
minus the fitted saving (cost.fused.group_estimate), so the fusion
decision rests on the saving alone.
"""

import os

import numpy as np

from ..util import canon
from .. import ir
from .fused import TERMS, reference_rows, saving_features
from ..util.cname import tiling_stem

RIDGE = 1e-3
# terms fitted per kind (a kind another fused kernel adds may list its own)
OWN = {}
DEFAULT_OWN = ("step",)
# terms fitted once over every kind whose samples have them
SHARED = tuple(t for t in TERMS if t not in DEFAULT_OWN)


def _alone(build_dir, graph, target):
    """The layers apart of variants/none: their tilings and features."""
    import glob

    from .features import graph_features

    tilings = {}
    for f in sorted(glob.glob(os.path.join(build_dir, "variants", "none", "tiling", "*.json"))):
        t = canon.read_json(f) if not f.endswith(".solve.json") else {}
        if "layer" in t:
            tilings[t["layer"]] = t
    feats = graph_features(graph, tilings, target)
    return {"tilings": tilings, "features": {layer.name: f for layer, f in zip(graph.layers, feats)}}


def group_samples(build_dir, count_key, target=None, coefs=None):
    """[(kind, scheme, features, apart, fused, group)] of a build made with
    fusion_cost=measured (its variants/ directories). With the target's
    config and coefficients (their DMA terms), the features include the
    terms that compare a step with its layers apart (cost.fused.TERMS)."""
    graph = ir.Graph.from_json(canon.read_json(os.path.join(build_dir, "graph.json")))
    var = os.path.join(build_dir, "variants")
    apart = {r["name"]: r.get(count_key) for r in canon.read_json(os.path.join(var, "none", "report.json"))["layers"]}
    alone = _alone(build_dir, graph, target) if target is not None and coefs is not None else None
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
            x = saving_features(first, second, graph, ft, alone, coefs, target["cores"] if target else 1)
            out.append((ft["kind"], ft.get("scheme", "per_core"), x, apart[a] + apart[b], fused[a] + fused[b],
                        g["step"]))
    return out


def fit(samples):
    """{kind: {scheme, saving: {term: coefficient}, groups, faster, bands,
    median_error}} from group_samples' rows (every kind seen; a kind's
    steps share a scheme on one target, else the most frequent scheme's
    are fitted). Every sample needs the terms of cost.fused.TERMS."""
    rows = []
    kinds = sorted({s[0] for s in samples})
    for kind in kinds:
        mine = [s for s in samples if s[0] == kind]
        schemes = sorted({s[1] for s in mine}, key=lambda sc: (-sum(s[1] == sc for s in mine), sc))
        rows += [s for s in mine if s[1] == schemes[0]]
    own = {k: OWN.get(k, DEFAULT_OWN) for k in kinds}
    # a shared term joins a kind's saving when every sample of the kind has it
    shared = {k: [t for t in SHARED if all(t in s[2] for s in rows if s[0] == k)] for k in kinds}
    cols = [(t, k) for k in kinds for t in own[k]] + [(t, None) for t in SHARED if any(t in v for v in shared.values())]

    def value(s, col):
        t, k = col
        return s[2].get(t, 0) if k in (None, s[0]) else 0
    A = np.array([[value(s, c) / s[3] for c in cols] for s in rows], dtype=float)
    b = np.array([(s[3] - s[4]) / s[3] for s in rows], dtype=float)
    norm = np.linalg.norm(A, axis=0)
    norm[norm == 0] = 1.0
    As = np.vstack([A / norm, np.sqrt(RIDGE) * np.eye(len(cols))])
    bs = np.concatenate([b, np.zeros(len(cols))])
    x = np.linalg.lstsq(As, bs, rcond=None)[0] / norm
    err = np.abs(A @ x - b)
    coef = dict(zip(cols, x))
    out = {}
    for kind in kinds:
        idx = [i for i, s in enumerate(rows) if s[0] == kind]
        mine = [rows[i] for i in idx]
        out[kind] = {"scheme": mine[0][1], "groups": len(mine),
                     # pairs measured faster fused: with none, the fit has no
                     # evidence any pair of this kind saves (its constant may
                     # still come out positive: fusion/costs.py holds them)
                     "faster": sum(1 for s in mine if s[4] < s[3]),
                     "saving": {**{t: _num(coef[(t, kind)]) for t in own[kind]},
                                **{t: _num(coef[(t, None)]) for t in shared[kind]}},
                     # the most bands any fitted pair ran in: a step in more
                     # is beyond what the fit saw (fusion/costs.py holds it)
                     **({"bands": max(s[2]["bands"] for s in mine)} if all("bands" in s[2] for s in mine) else {}),
                     # the fit's own median |error| of the fused count, relative to the count apart
                     "median_error": _num(float(np.median(err[idx])))}
    return out


def _num(v):
    return float(f"{v:.6g}")

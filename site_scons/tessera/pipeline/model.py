"""The configuration a network's build starts from: the target and model
YAML with the command line's fusion choices and their defaults, and what
to tell a user whose weights do not fit (the model stage's files come from
tessera.model.prepare)."""

import os

from .. import config, fusion
from ..errors import TesseraError

DEFAULT_FUSION = {"fusion": "min_latency", "fusion_cost": "model"}


def load(tname, tpath, mname, mpath, fusion_policy=None, fusion_cost=None):
    """(target, model) configurations: the YAML files, `fusion` and
    `fusion_cost` overriding the model's (the command line, or a firmware's
    TesseraNetwork call), then fusion_defaults."""
    tcfg = config.load_target(tpath, tname)
    mcfg = config.load_model(mpath, mname)
    if fusion_policy is not None:
        if fusion_policy not in fusion.POLICIES:
            raise TesseraError(f"fusion={fusion_policy}", "unknown fusion policy",
                               f"choose one of: {', '.join(fusion.POLICIES)}")
        mcfg = dict(mcfg, fusion=fusion_policy)
    if fusion_cost is not None:
        if fusion_cost not in fusion.COSTS:
            raise TesseraError(f"fusion_cost={fusion_cost}", "unknown fusion cost source",
                               f"choose one of: {', '.join(fusion.COSTS)}")
        mcfg = dict(mcfg, fusion_cost=fusion_cost)
    return tcfg, dict(mcfg, **fusion_defaults(tcfg, mcfg))


def fusion_defaults(tcfg, mcfg):
    """fusion and fusion_cost: the command line's (already in mcfg), else
    the model YAML's, else the target YAML's, else min_latency with the
    cost model (never slower than none: a group is fused only when its
    estimate beats its layers apart; without coefficients nothing is)."""
    return {k: mcfg.get(k) or tcfg.get(k) or v for k, v in DEFAULT_FUSION.items()}


_bundled = {}


def bundled_targets(root):
    """[(name, loaded target)] of the bundled targets that load, read once
    per process (each network's hint is made twice, every YAML costs)."""
    if root not in _bundled:
        out = []
        for name in config.available("target", root):
            try:
                out.append((name, config.load_target(os.path.join(root, "targets", name + ".yaml"), name)))
            except TesseraError:
                continue
        _bundled[root] = out
    return _bundled[root]


def fit_hint(target, others):
    """What to do when the weights do not fit: how much fits this target,
    and which of `others` ([(name, target)]: the bundled targets) have more
    room for weights."""
    level = target["place"]["weights"]
    usable = config.usable_bytes(target["memory"][level])
    bigger = []
    for name, t in others:
        if name == target["name"]:
            continue
        w = t["memory"][t["place"]["weights"]]
        if config.usable_bytes(w) > usable:
            # external memory first: that is what a big model wants
            bigger.append((w["kind"] != "external", -config.usable_bytes(w), name, t["place"]["weights"], w["kind"]))
    room = f"{usable / 1e6:.2f} MB" if usable >= 100_000 else f"{usable} bytes"
    hint = (f"at most {room} of weights fit {target['name']}'s {level}, a model of about "
            f"{usable / 1e6:.1f} M int8 parameters" if usable >= 100_000 else
            f"at most {room} of weights fit {target['name']}'s {level}, {usable} int8 parameters")
    if bigger:
        hint += "; or use a target with more room for weights: " + ", ".join(
            f"{n} ({lvl}: {-b / 1e6:.1f} MB {kind})" for _, b, n, lvl, kind in sorted(bigger))
    return hint

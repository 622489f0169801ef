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


# the network's own variables in the C runtime's data: one uint64_t count per
# layer (codegen/network.py's <prefix>_layer_counts)
DATA_PER_LAYER = 8


def with_network_data(tcfg, graph):
    """The target with its `data` reservation grown by the network's own
    variables (DATA_PER_LAYER bytes a layer): the YAML's `reserved.data` is
    the C runtime's and the HAL's, so a network of 140 layers fits the same
    target as one of 10, and every stage (plan, link script, its checks,
    report) counts the same bytes."""
    for name, lvl in tcfg["memory"].items():
        if "data" in lvl["reserved"]:
            grown = dict(lvl["reserved"], data=lvl["reserved"]["data"] + DATA_PER_LAYER * len(graph.layers))
            return dict(tcfg, memory=dict(tcfg["memory"], **{name: dict(lvl, reserved=grown)}))
    return tcfg


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


def fit_hint(target, others, graph=None):
    """What to do when the weights do not fit: how much fits this target,
    and which of `others` ([(name, target)]: the bundled targets) hold the
    graph's weights (all those with more room when no graph is given)."""
    from ..planning.memplan import weight_bytes
    from ..util.units import nbytes

    level = target["place"]["weights"]
    usable = config.usable_bytes(target["memory"][level])
    need = sum(weight_bytes(layer, graph) for layer in graph.layers) if graph is not None else usable + 1
    fit = []
    for name, t in others:
        if name == target["name"]:
            continue
        # where its weights go: their level, or a storage level that takes what does not fit there
        where = [t["place"]["weights"]] + [n for n, lvl in t["memory"].items() if lvl["kind"] == "storage"]
        lvl, w = max(((n, t["memory"][n]) for n in where), key=lambda nw: config.usable_bytes(nw[1]))
        if config.usable_bytes(w) >= need:
            # external memory first: that is what a big model wants
            fit.append((w["kind"] != "external", -config.usable_bytes(w), name, lvl, w["kind"]))
    hint = f"at most {nbytes(usable)} of weights fit {target['name']}'s {level} ({usable:,} int8 parameters)"
    if fit:
        hint += ("; or use a target that holds " + (f"these {nbytes(need)}: " if graph is not None
                                                                  else "more: ")
                 + ", ".join(f"{n} ({lvl}: {nbytes(-b)} {kind})" for _, b, n, lvl, kind in sorted(fit)))
    elif graph is not None:
        hint += f"; no bundled target holds these {nbytes(need)} of weights: prune or shrink the model"
    return hint

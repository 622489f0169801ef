"""tile_cost=model: the tile the cost model estimates cheapest, instead of
the kernel library's objective (tessera.cost; docs/cost_model.md).

The candidates: the library objective's tile (so the choice is never
worse by the model's own estimate), and for every tile height and channel
count that is the largest legal one for its tile count (a smaller one with
as many tiles moves the same data in smaller pieces; where the op's
coefficients price the busiest core's channels, `core_chans`, also every
multiple of the cores) the widest legal tile that fits L1 (a split
reduction: per tile height and chunk size, the most channels and the
widest tile that fit). Each is estimated with the target's fitted
coefficients; the cheapest wins, ties going (where `core_chans` is priced)
to channels that split evenly over the cores, then to the library's
objective and then to the tiler's fixed order, so the answer is
deterministic. Plain Python: a few hundred candidates per layer, each
costed by walking its tiles.
"""

from ..cost import chw, features, model as cost_model
from . import memory
from .model import tiebreak_key


def _count_maximal(sizes, extent):
    best = {}
    for t in sorted(sizes):
        best[-(-extent // t)] = t      # ascending: the largest size per count stays
    return sorted(set(best.values()))


def _chw_saving(layer, t):
    """<= 0: what a tile saves written (chw_out: a pointwise) or read
    (chw_in: a depthwise) channel-major, the depthwise's gain less the
    boxes' extra DMA commands, where that pays (pipeline/plan.py's views of
    a channel-major pair; tessera.cost.chw)."""
    if layer.get("chw_out"):
        price = layer["chw_out"]
        got = price["gain"]
        cost = chw.extra(t["tile"], layer["out"], chw.n_tiles(t["tile"], layer["out"]), price)
    elif layer.get("chw_in"):
        price = layer["chw_in"]
        got = price["gain"] if chw.copies_words(t["in_tile"]["w"]) else 0
        cost = chw.extra(t["in_tile"], layer["in"], chw.n_tiles(t["tile"], layer["out"]), price)
    else:
        return 0
    return min(0, cost - got)


def best_tile(layer, target, spec, tables, buffering, library_q, result):
    """The chosen quantities (memory.quantities) among the candidates and
    library_q (the library objective's optimum). result(q) turns quantities
    into a tiling (the tiler's result dict)."""
    cost = target["cost"]
    Ho, Wo, Co = layer["out"]
    budget = target["l1_budget"]
    hs = _count_maximal(tables[0], Ho)
    ws = sorted(tables[1], reverse=True)
    cs = _count_maximal(range(1, Co + 1), Co)
    cores = target["cores"]
    balance = cores > 1 and bool(cost["coefficients"]["ops"].get(layer["op"], {}).get("core_chans"))
    if balance:
        # where the model prices the busiest core's channels (pulp_nn's
        # depthwise), also the counts that split evenly over the cores:
        # the largest for its tile count may leave cores a channel short
        # (mbv1_128's dw5 in tiles of 51: 7 channels on some cores, 6 on others)
        cs = sorted(set(cs) | set(range(cores, Co + 1, cores)))

    def even(q):
        # on a tie, tiles whose channels split evenly over the cores (not
        # also "no short last tile": mbv1_128's dw6 in 4 tiles of 64 measured
        # 79,042 cycles, in 80, 80, 80, 16 78,648)
        return q["tile_c"] % cores == 0 if balance else False
    if layer.get("rows"):
        # a layer with a tensor on a storage level tiles every channel, and
        # with rows 1 whole rows (the CP-SAT model's constraints; its
        # weights have one buffer: memory.weight_buffers)
        cs = [Co]
        if layer["rows"] == 1:
            ws = [Wo]

    split = library_q.get("n_chunks", 1) > 1

    def key(q):
        t = result(q)
        f = features.view_features(layer, t, cost["dims"], target["cores"])
        est = cost_model.estimate(cost["coefficients"], layer["op"], f, buffering) + _chw_saving(layer, t)
        return (-est, even(q), spec.objective_value(q),
                tiebreak_key(layer, q["tile_h"], q["tile_w"], q["tile_c"], q["tile_k"] if split else None))

    best, best_key = library_q, key(library_q)
    if split:
        # a split reduction: per tile height and chunk (the largest for its
        # count of chunks), the most channels, then the widest tile, that fit
        C = layer["in"][2]
        for th in hs:
            for tk in _count_maximal(range(1, C), C):
                for tc in reversed(cs):
                    q = next((q for tw in ws for q in [memory.quantities(layer, target, spec, th, tw, tc, buffering,
                                                                         tables, tk)]
                              if q is not None and q["l1_bytes"] <= budget), None)
                    if q is not None:
                        k = key(q)
                        if k > best_key:
                            best, best_key = q, k
                        break
        return best
    for th in hs:
        for tc in cs:
            for tw in ws:
                q = memory.quantities(layer, target, spec, th, tw, tc, buffering, tables)
                if q is None or q["l1_bytes"] > budget:
                    continue
                k = key(q)
                if k > best_key:
                    best, best_key = q, k
                break
    return best

"""Brute-force oracle: the best tile by trying every (th, tw, tc).

Plain Python, no solver: each candidate is scored with memory.quantities and
the library's terms evaluated on numbers, then ranked by (objective,
tie-break) exactly as the CP-SAT model is. Tests compare the two on small
layers; it is far too slow for real ones.
"""

from ..tiles import geometry
from . import memory
from .model import tiebreak_key


def best_tile(layer, target, spec, buffering=None, split=False):
    """{"tile": (th, tw, tc), "objective": int, "l1_bytes": int} of the best
    tiled (double-buffered) solution, or None when nothing fits. With
    `split`, the best with the reduction in chunks (at least two; the
    result has "tile_k")."""
    if buffering is None:
        buffering = target["buffering"]
    tables = tuple(geometry.axis_table(*ax) for ax in geometry.axes(layer))
    Ho, Wo, Co = layer["out"]
    best, best_key = None, None
    for th in range(1, Ho + 1):
        for tw in range(1, Wo + 1):
            for tc in range(1, Co + 1):
                for tk in range(1, layer["in"][2]) if split else [None]:
                    q = memory.quantities(layer, target, spec, th, tw, tc, buffering, tables, tk)
                    if q is None or q["l1_bytes"] > target["l1_budget"]:
                        continue
                    obj = spec.objective_value(q)
                    key = (obj, tiebreak_key(layer, th, tw, tc, tk))
                    if best_key is None or key > best_key:
                        best_key = key
                        best = {"tile": (th, tw, tc), "objective": obj, "l1_bytes": q["l1_bytes"],
                                **({"tile_k": tk} if split else {})}
    return best

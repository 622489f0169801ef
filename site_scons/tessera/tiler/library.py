"""The `tiler:` section of a kernel library: parsing, validation, evaluation.

A library describes, per op, the kernel's scratch bytes and the objective
weights as sums of *terms* over named *quantities* (see the package
docstring for the schema). This module knows the names and evaluates terms
on plain numbers; model.py builds the same terms as CP-SAT expressions.
"""

from ..errors import ConfigError
from .layer import OPS

SCHEMA = 1

# Known before the solve: layer shape, target, library.
CONSTANTS = (
    "cores", "buffering", "l1_budget", "l1_permille",
    "kh", "kw", "kernel_area", "patch",
    "in_h", "in_w", "in_c", "out_h", "out_w", "out_c",
    "in_bytes", "out_bytes", "n_inputs",
)
# Depend on the chosen output tile (th, tw, tc).
TILE = (
    "tile_h", "tile_w", "tile_c",
    "border_h", "border_w", "border_c",
    "n_tiles_h", "n_tiles_w", "n_tiles_c", "n_tiles",
    "in_tile_h", "in_tile_w", "in_tile_c",
    "tile_volume",
    "in_tile_bytes", "out_tile_bytes", "weight_tile_bytes", "param_tile_bytes",
    # the reduction chunk of a split tiling (input channels per step), the
    # chunks and the last one's channels: in_c, 1, in_c when not split
    "tile_k", "n_chunks", "border_k",
)
# Depend on the scratch itself, so only the objective may use them.
TOTALS = ("scratch_bytes", "l1_bytes")

CONDITIONS = ("multiple_of", "equals", "at_least", "at_most")

# Every L1 buffer starts at a multiple of `buffer_align` bytes (word loads,
# SIMD); the tiler counts each buffer rounded up so the allocator's packed
# layout is exactly the tiler's total. 4 is tessera.planning.alloc's default.
DEFAULT_ALIGN = 4

WHERE = "kernel library (library.yaml) tiler"


def _err(where, what, fix=None):
    return ConfigError(f"{WHERE}.{where}", what, fix)


class Term:
    """coef * product(of) * [every condition in `when` holds]."""

    __slots__ = ("name", "coef", "of", "when")

    def __init__(self, name, coef, of, when):
        self.name, self.coef, self.of, self.when = name, coef, of, when

    def value(self, q):
        """The term on plain quantity values q (a dict name -> int)."""
        for name, (kind, arg) in self.when:
            if not holds(kind, q[name], arg if isinstance(arg, int) else q[arg]):
                return 0
        v = self.coef
        for name in self.of:
            v *= q[name]
        return v


def holds(kind, x, arg):
    if kind == "multiple_of":
        return x % arg == 0 if arg else x == 0
    if kind == "equals":
        return x == arg
    if kind == "at_least":
        return x >= arg
    return x <= arg  # at_most


def _int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _term(where, name, raw, allowed, nonneg):
    if not isinstance(raw, dict) or set(raw) - {"coef", "of", "when"} or "coef" not in raw:
        raise _err(where, f"term {name!r} must be a mapping with 'coef' and optional "
                          f"'of' and 'when', got {raw!r}")
    coef = raw["coef"]
    if not _int(coef) or (nonneg and coef < 0):
        raise _err(where, f"term {name!r}: coef must be a{' non-negative' if nonneg else 'n'} "
                          f"integer, got {coef!r}")
    of = raw.get("of", [])
    if not isinstance(of, list) or not all(isinstance(x, str) for x in of):
        raise _err(where, f"term {name!r}: 'of' must be a list of quantity names")
    for x in of:
        if x not in allowed:
            raise _err(where, f"term {name!r}: unknown quantity {x!r}",
                       f"use one of {', '.join(allowed)}")
    when = raw.get("when", {})
    if not isinstance(when, dict):
        raise _err(where, f"term {name!r}: 'when' must map quantities to conditions")
    conds = []
    for qname in sorted(when):
        cond = when[qname]
        if qname not in allowed:
            raise _err(where, f"term {name!r}: unknown quantity {qname!r} in 'when'",
                       f"use one of {', '.join(allowed)}")
        if not isinstance(cond, dict) or len(cond) != 1 or next(iter(cond)) not in CONDITIONS:
            raise _err(where, f"term {name!r}: condition on {qname!r} must be one of "
                              f"{', '.join(CONDITIONS)}: <int or constant>, got {cond!r}")
        kind, arg = next(iter(cond.items()))
        # multiple_of a tile quantity would not be linear; comparisons are.
        args = CONSTANTS if kind == "multiple_of" else allowed
        if not (_int(arg) or arg in args):
            raise _err(where, f"term {name!r}: {kind} takes an integer or one of "
                              f"{', '.join(args)}, got {arg!r}")
        if kind == "multiple_of" and _int(arg) and arg < 1:
            raise _err(where, f"term {name!r}: multiple_of must be at least 1")
        conds.append((qname, (kind, arg)))
    return Term(name, coef, tuple(of), tuple(conds))


def _terms(where, section, allowed, nonneg):
    if section is None:
        return {}
    if not isinstance(section, dict):
        raise _err(where, "must map term names to terms")
    return {str(name): (None if raw is None else _term(where, name, raw, allowed, nonneg))
            for name, raw in section.items()}


class OpSpec:
    """One op's scratch and objective terms, defaults merged, sorted by name,
    the library's buffer alignment and the op's scratch_core_align (1: the
    terms' sum as it is)."""

    def __init__(self, scratch, objective, align=DEFAULT_ALIGN, core_align=1):
        self.align = align
        self.core_align = core_align
        self.scratch = tuple(t for _, t in sorted(scratch.items()) if t is not None)
        self.objective = tuple(t for _, t in sorted(objective.items()) if t is not None)

    def scratch_bytes(self, q):
        total = sum(t.value(q) for t in self.scratch)
        # each core's share (total // cores, as the generated code passes it)
        # a multiple of core_align: cores * core_align * ceil(total / that)
        unit = q["cores"] * self.core_align if self.core_align > 1 else 1
        return -(-total // unit) * unit

    def objective_value(self, q):
        if q.get("n_chunks", 1) > 1:
            return (sum(t.value(q) for t in self.split_terms()) * (q["in_c"] + 1)
                    + min(q["tile_volume"], q["tile_k"]))
        return sum(t.value(q) for t in self.objective)

    def split_terms(self):
        """A split tiling's objective (the reduction in chunks of tile_k
        input channels): the library's terms that do not count a tile's
        size (its bonuses for alignments and shapes), times in_c + 1, plus
        min(tile_volume, tile_k): balanced steps, the output tile (each
        chunk's input read once per channel tile, its weights once per
        spatial tile) as large as the chunk (the partial sums read and
        written once per chunk). The library's size terms rank unsplit
        tiles, whose reduction is fixed."""
        return tuple(t for t in self.objective if not set(t.of) & SIZES)


# quantities that grow with a tile's size (split_terms leaves their terms out)
SIZES = {"tile_h", "tile_w", "tile_c", "tile_volume", "in_tile_h", "in_tile_w", "in_tile_c", "in_tile_bytes",
         "out_tile_bytes", "weight_tile_bytes", "param_tile_bytes", "tile_k", "scratch_bytes", "l1_bytes"}


def tile_cost(kernels):
    """How the library's tiles are chosen by default: "library" (its
    objective) or "model" (the fitted cost model's cheapest tile, where the
    target has coefficients; tiler/costed.py). The build's tile_cost=
    overrides it."""
    choice = kernels.get("tile_cost", "library") if isinstance(kernels, dict) else "library"
    if choice not in ("library", "model"):
        raise _err("tile_cost", f"must be library or model, got {choice!r}")
    return choice


def op_spec(kernels, op):
    """Validate the tiler section `kernels` and return op's OpSpec.

    Terms are named so an op can override or drop (with null) a default
    term by name; lists would not merge.
    """
    if not isinstance(kernels, dict):
        raise _err("", "the tiler section must be a mapping")
    unknown = set(kernels) - {"schema", "buffer_align", "tile_cost", "defaults", "ops"}
    if unknown:
        raise _err("", f"unknown keys {sorted(unknown)}",
                   "allowed: schema, buffer_align, tile_cost, defaults, ops")
    tile_cost(kernels)
    if kernels.get("schema") != SCHEMA:
        raise _err("schema", f"schema must be {SCHEMA}, got {kernels.get('schema')!r}")
    align = kernels.get("buffer_align", DEFAULT_ALIGN)
    if not _int(align) or align < 1:
        raise _err("buffer_align", f"must be a positive integer, got {align!r}")
    ops = kernels.get("ops")
    if not isinstance(ops, dict):
        raise _err("ops", "missing the 'ops' mapping")
    bad = sorted(set(ops) - set(OPS))
    if bad:
        raise _err("ops", f"unknown ops {bad}", f"ops are {', '.join(OPS)}")
    if op not in ops:
        raise _err("ops", f"no entry for op {op!r}",
                   f"add 'ops: {op}: {{}}' if the library has a {op} kernel")
    defaults = kernels.get("defaults") or {}
    entry = ops[op] or {}
    for where, part, keys in (("defaults", defaults, {"scratch", "objective"}),
                              (f"ops.{op}", entry, {"scratch", "objective", "scratch_core_align"})):
        if not isinstance(part, dict) or set(part) - keys:
            raise _err(where, f"must be a mapping with only {', '.join(repr(k) for k in sorted(keys))}")
    core_align = entry.get("scratch_core_align", 1)
    if not _int(core_align) or core_align < 1:
        raise _err(f"ops.{op}.scratch_core_align", f"must be a positive integer, got {core_align!r}")
    scratch_names = CONSTANTS + TILE
    obj_names = CONSTANTS + TILE + TOTALS
    scratch = _terms("defaults.scratch", defaults.get("scratch"), scratch_names, True)
    scratch.update(_terms(f"ops.{op}.scratch", entry.get("scratch"), scratch_names, True))
    objective = _terms("defaults.objective", defaults.get("objective"), obj_names, False)
    objective.update(_terms(f"ops.{op}.objective", entry.get("objective"), obj_names, False))
    return OpSpec(scratch, objective, align, core_align)

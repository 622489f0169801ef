"""The CP-SAT model of one layer's L2 -> L1 tiling.

Decision variables are the output tile sizes (th, tw, tc). Everything the
geometry decides per axis (number of tiles, border tile, largest input
extent, which sizes are legal) enters through table constraints built from
geometry.axis_table, so the model uses the exact clipped input extents the
generated code will move. Bytes are products of those variables; the
library's scratch and objective terms are built generically from their
quantity names, with reified boolean indicators for the alignment
conditions (e.g. tc % 4 == 0 through a modulo variable).
"""

from ortools.sat.python import cp_model

from ..tiles.geometry import CHANNEL_WISE, w_per_k
from .library import holds
from .memory import ACC_BYTES, weight_buffers
from ..util.solver import deterministic_solver, lean_search

# Deterministic search: one worker, fixed seed, and a work bound in CP-SAT's
# deterministic time units (not wall clock), so the answer never depends on
# machine load. Only a proven optimum is kept, so raising the bound changes
# no answer, it only lets harder layers finish: mbv1_128's dw13 (4x4x1024
# depthwise) with 48000 B of L1 needs about 8 units.
SEED = 20240601
MAX_DETERMINISTIC_TIME = 20.0


def tiebreak_key(layer, th, tw, tc, tk=None):
    """Among equal objectives prefer more channels (weights and im2col
    amortized), then wider tiles (longer DMA rows), then taller, then (a
    split tiling) larger reduction chunks. Makes the optimum unique, so the
    answer does not depend on solver internals."""
    Ho, Wo, _ = layer["out"]
    key = (tc * (Wo + 1) + tw) * (Ho + 1) + th
    return key if tk is None else key * (layer["in"][2] + 1) + tk


def tiebreak_bound(layer, split):
    """A number above every tiebreak_key of the layer."""
    Ho, Wo, Co = layer["out"]
    return (Co + 1) * (Wo + 1) * (Ho + 1) * ((layer["in"][2] + 1) if split else 1)


class _Builder:
    def __init__(self, layer, target, spec, tables, buffering, consts, split=False):
        self.m = cp_model.CpModel()
        self.layer, self.spec, self.consts, self.split = layer, spec, consts, split
        self.budget = target["l1_budget"]
        self.buffering = buffering
        self.bools = {}
        self.ub = {}  # variable index -> upper bound (products need them)
        self.q = dict(consts)
        self._tile_vars(tables)
        self._bytes()

    # -- variables ------------------------------------------------------
    def var(self, name, lo, hi, quantity=False):
        """A new variable; quantity=True publishes it under its name."""
        v = self.m.new_int_var(lo, hi, name)
        self.ub[v.index] = hi
        if quantity:
            self.q[name] = v
        return v

    def product(self, name, factors, quantity=False):
        """A variable equal to the product of variable factors (all >= 0)."""
        hi = 1
        for f in factors:
            hi *= self.ub[f.index]
        v = self.var(name, 0, hi, quantity)
        self.m.add_multiplication_equality(v, factors)
        return v

    def _tile_vars(self, tables):
        tab_h, tab_w = tables
        H, W, C = self.layer["in"]
        Ho, Wo, Co = self.layer["out"]
        for axis, tab, out, inn in (("h", tab_h, Ho, H), ("w", tab_w, Wo, W)):
            t = self.var(f"tile_{axis}", 1, out, True)
            n = self.var(f"n_tiles_{axis}", 1, out, True)
            b = self.var(f"border_{axis}", 1, out, True)
            i = self.var(f"in_tile_{axis}", 1, inn, True)
            rows = [(k, *tab[k]) for k in sorted(tab)]
            self.m.add_allowed_assignments([t, n, b, i], rows)
        tc = self.var("tile_c", 1, Co, True)
        nc = self.var("n_tiles_c", 1, Co, True)
        bc = self.var("border_c", 1, Co, True)
        rows = []
        for t in range(1, Co + 1):
            n = -(-Co // t)
            rows.append((t, n, Co - (n - 1) * t))
        self.m.add_allowed_assignments([tc, nc, bc], rows)
        if self.layer.get("rows"):
            # a tensor of this layer lives on a storage level: tiles of every
            # channel are a transfer per row, row bands (rows: 1) one
            # transfer (docs/out_of_core.md)
            self.m.add(tc == Co)
            if self.layer["rows"] == 1:
                self.m.add(self.q["tile_w"] == Wo)
        if self.layer["op"] in CHANNEL_WISE:
            self.q["in_tile_c"] = tc
        elif self.split:
            # the reduction in chunks of tile_k input channels, at least two
            tk = self.var("tile_k", 1, C - 1, True)
            nk = self.var("n_chunks", 2, C, True)
            bk = self.var("border_k", 1, C - 1, True)
            rows = []
            for t in range(1, C):
                n = -(-C // t)
                rows.append((t, n, C - (n - 1) * t))
            self.m.add_allowed_assignments([tk, nk, bk], rows)
            self.q["in_tile_c"] = tk
            self.q["patch"] = self.q["kernel_area"] * tk
        else:
            self.q["in_tile_c"] = C

    def _bytes(self):
        q, L = self.q, self.layer
        hw = self.product("tile_hw", [q["tile_h"], q["tile_w"]])
        self.product("tile_volume", [hw, q["tile_c"]], True)
        ihw = self.product("in_tile_hw", [q["in_tile_h"], q["in_tile_w"]])
        ic = q["in_tile_c"]
        in_el = self.product("in_tile_el", [ihw, ic]) if not isinstance(ic, int) else ihw * ic
        one_input = L["in_bytes"] * in_el
        q["in_tile_bytes"] = L["n_inputs"] * one_input
        q["out_tile_bytes"] = L["out_bytes"] * q["tile_volume"]
        if self.split:
            ck = self.product("tile_ck", [q["tile_c"], q["tile_k"]])
            q["weight_tile_bytes"] = w_per_k(L) * ck
            acc = ACC_BYTES * q["tile_volume"]
        else:
            q["weight_tile_bytes"] = L["w_bytes_per_cout"] * q["tile_c"]
            acc = 0
        q["param_tile_bytes"] = L["param_bytes_per_cout"] * q["tile_c"]
        # a split step's kernel (kernels/reference/split.c) needs no scratch
        q["scratch_bytes"] = 0 if self.split else self.per_core(sum(self.term(t) for t in self.spec.scratch))
        al = self.aligned
        wbuf = weight_buffers(L, self.buffering)
        q["l1_bytes"] = (self.buffering * (L["n_inputs"] * al("in", one_input)
                                           + (1 + L.get("epilogue", 0)) * al("out", q["out_tile_bytes"]))
                         + wbuf * (al("weights", q["weight_tile_bytes"]) + al("params", q["param_tile_bytes"]))
                         + al("scratch", q["scratch_bytes"]) + (al("acc", acc) if self.split else 0))
        self.m.add(q["l1_bytes"] <= self.budget)
        # a band of a tensor on the card (a tile's rows, every column and
        # channel) held in SRAM by the out-of-core program: at most the
        # budget the memory plan gives it (tessera.pipeline.plan.layer_views)
        if L.get("band_in"):
            _, w, c = L["in"]
            self.m.add(q["in_tile_h"] * (w * c * L["in_bytes"]) <= L["band_in"])
        if L.get("band_out"):
            _, w, c = L["out"]
            self.m.add(q["tile_h"] * (w * c * L["out_bytes"]) <= L["band_out"])

    def per_core(self, x):
        """x rounded up so that each core's share is a multiple of the op's
        scratch_core_align (library.OpSpec.scratch_bytes)."""
        unit = self.q["cores"] * self.spec.core_align
        if self.spec.core_align == 1 or isinstance(x, int):
            return -(-x // unit) * unit if self.spec.core_align > 1 else x
        k = self.var("scratch_units", 0, self.budget // unit + 1)
        self.m.add(unit * k >= x)
        self.m.add(unit * k <= x + unit - 1)
        return unit * k

    def aligned(self, name, x):
        """x rounded up to the buffer alignment: align * ceil(x / align)."""
        a = self.spec.align
        if a == 1 or isinstance(x, int):
            return -(-x // a) * a if isinstance(x, int) else x
        k = self.var(f"{name}_words", 0, self.budget // a + 1)
        self.m.add(a * k >= x)
        self.m.add(a * k <= x + a - 1)
        return a * k

    def quantity(self, name):
        if name == "n_tiles" and name not in self.q:
            self.product("n_tiles", [self.q["n_tiles_h"], self.q["n_tiles_w"],
                                     self.q["n_tiles_c"]], True)
        return self.q[name]

    # -- library terms ----------------------------------------------------
    def condition(self, name, kind, arg):
        """A boolean equivalent to `name kind arg` (None when always true,
        False when never)."""
        x = self.quantity(name)
        if not isinstance(arg, int):
            arg = self.quantity(arg)
        if isinstance(x, int) and isinstance(arg, int):
            return None if holds(kind, x, arg) else False
        if kind == "multiple_of" and arg == 1:
            return None
        if kind == "multiple_of" and arg == 0:
            kind = "equals"  # only 0 is a multiple of 0 (as in library.holds)
        key = (name, kind, str(arg))
        if key in self.bools:
            return self.bools[key]
        b = self.m.new_bool_var(f"{name}_{kind}_{arg}")
        if kind == "multiple_of":
            r = self.m.new_int_var(0, arg - 1, f"{name}_mod_{arg}")
            self.m.add_modulo_equality(r, x, arg)
            self.m.add(r == 0).only_enforce_if(b)
            self.m.add(r != 0).only_enforce_if(~b)
        elif kind == "equals":
            self.m.add(x == arg).only_enforce_if(b)
            self.m.add(x != arg).only_enforce_if(~b)
        elif kind == "at_least":
            self.m.add(x >= arg).only_enforce_if(b)
            self.m.add(x <= arg - 1).only_enforce_if(~b)
        else:
            self.m.add(x <= arg).only_enforce_if(b)
            self.m.add(x >= arg + 1).only_enforce_if(~b)
        self.bools[key] = b
        return b

    def term(self, term):
        """coef * product(of) * [when], as a linear expression."""
        coef, factors = term.coef, []
        if coef == 0:
            return 0
        for name in term.of:
            x = self.quantity(name)
            if isinstance(x, int):
                coef *= x
            elif isinstance(x, cp_model.IntVar):
                factors.append(x)
            else:
                # byte quantities are linear expressions; give them a name
                v = self.var(f"{term.name}_{name}", 0, self.budget)
                self.m.add(v == x)
                factors.append(v)
        bools = []
        for name, (kind, arg) in term.when:
            b = self.condition(name, kind, arg)
            if b is False or coef == 0:  # coef: a constant factor may be 0
                return 0
            if b is not None:
                bools.append(b)
        if not factors:
            prod, hi = 1, 1
        elif len(factors) == 1:
            prod, hi = factors[0], self.ub[factors[0].index]
        else:
            prod = self.product(f"{term.name}_prod", factors)
            hi = self.ub[prod.index]
        if not bools:
            return coef * prod
        if len(bools) == 1:
            on = bools[0]
        else:
            on = self.m.new_bool_var(f"{term.name}_on")
            self.m.add_bool_and(bools).only_enforce_if(on)
            self.m.add_bool_or([~b for b in bools]).only_enforce_if(~on)
        if not factors:
            return coef * on
        y = self.m.new_int_var(0, hi, f"{term.name}_val")
        self.m.add(y == prod).only_enforce_if(on)
        self.m.add(y == 0).only_enforce_if(~on)
        return coef * y


def fewest_bands(layer, target, spec, tables, consts, buffering, split=False):
    """The fewest row bands (n_tiles_h) of any tile that fits, or None: a
    layer writing a band of every channel to the card reloads its weights
    per band (docs/out_of_core.md), so its search starts from these."""
    b = _Builder(layer, target, spec, tables, buffering, consts, split)
    b.m.minimize(b.q["n_tiles_h"])
    solver = lean_search(deterministic_solver(SEED, MAX_DETERMINISTIC_TIME))
    status = solver.solve(b.m)
    return int(solver.value(b.q["n_tiles_h"])) if status == cp_model.OPTIMAL else None


def solve(layer, target, spec, tables, consts, buffering, hint=None, tile_c=None, tile_w=None, split=False,
          n_tiles_h=None):
    """Maximize the library objective (tie-broken) within the L1 budget.

    Returns {"status": "optimal" | "feasible" | "infeasible" | "unknown"}
    plus, when a solution was found, "tile": (th, tw, tc), "objective" (the
    library objective, without the tie-break) and "l1_bytes". tile_c and
    tile_w fix the channel and column tile (row bands). With `split` the
    reduction is cut in chunks of tile_k input channels (a variable, at
    least two chunks), the partial sums' buffer counted, the objective
    library.OpSpec.split_objective's; the result has "tile_k".
    """
    b = _Builder(layer, target, spec, tables, buffering, consts, split)
    if tile_c is not None:
        b.m.add(b.q["tile_c"] == tile_c)
    if tile_w is not None:
        b.m.add(b.q["tile_w"] == tile_w)
    if n_tiles_h is not None:
        b.m.add(b.q["n_tiles_h"] == n_tiles_h)
    q = b.q
    if split:
        # library.OpSpec.objective_value: the bonuses, then balanced steps
        C = layer["in"][2]
        bal = b.var("balance", 0, C)
        b.m.add_min_equality(bal, [q["tile_volume"], q["tile_k"]])
        main = sum(b.term(t) for t in spec.split_terms()) * (C + 1) + bal
    else:
        main = sum(b.term(t) for t in spec.objective)
    # main * K dominates: the tie-break key is always below K
    K = tiebreak_bound(layer, split)
    b.m.maximize(main * K + tiebreak_key(layer, q["tile_h"], q["tile_w"], q["tile_c"],
                                         q["tile_k"] if split else None))
    if hint is not None:
        for name, v in zip(("tile_h", "tile_w", "tile_c"), hint):
            b.m.add_hint(q[name], v)
        if split:
            b.m.add_hint(q["tile_k"], 1)
    # the tie-break makes the optimum unique: a leaner search proves the same one
    solver = lean_search(deterministic_solver(SEED, MAX_DETERMINISTIC_TIME))
    status = solver.solve(b.m)
    if status == cp_model.MODEL_INVALID:
        raise RuntimeError(f"tiler: CP-SAT model of layer {layer['name']} is invalid: "
                           f"{b.m.validate()}")
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return {"status": "infeasible" if status == cp_model.INFEASIBLE else "unknown"}
    return {"status": "optimal" if status == cp_model.OPTIMAL else "feasible",
            "tile": tuple(solver.value(q[n]) for n in ("tile_h", "tile_w", "tile_c")),
            **({"tile_k": solver.value(q["tile_k"])} if split else {}),
            "objective": main if isinstance(main, int) else int(solver.value(main)),
            "l1_bytes": int(solver.value(q["l1_bytes"]))}

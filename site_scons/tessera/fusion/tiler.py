"""The fused tiler: one CP-SAT model per DW->PW pair, row-wise.

A fused tile is a band of th output rows, full width, all channels (the
pointwise needs every depthwise channel of a pixel). Its L1 working set:

    buffering * (A(in band) + A(out band))          double-buffered DMA
    + A(dw weights) + A(dw params) + A(pw weights) + A(pw params)   loaded once
    + A(k * fd * Wo * C)                            intermediate
    + A(cores * ((fd - 1) * sh + kh) * kw)          per-core depthwise stripe
                                                    (PULP-NN's; the reference
                                                    kernel leaves it unused;
                                                    with dw_pw_plane, each
                                                    core's padded plane of the
                                                    block's rows: _dw_plane)

k depends on the library's fused scheme (its codegen adapter's FUSED_SCHEME,
given to the tiler as target["fused_scheme"]): `per_core` (the reference
tsr_dw_pw: each core its own rows in blocks of fd, its own buffer; k =
cores, fd at most a core's share of the band), `shared` (PULP-NN: blocks
of fd rows computed by all cores together, the depthwise then the pointwise,
one buffer; k = 1, fd at most the band) or `layers` (CMSIS-NN, one core:
blocks of fd rows, the library's own layer kernels one after the other over
one buffer, k = 1, fd at most the band; in place of the stripes, the scratch
is the two layers' own as the library's tiler section states it for the
whole channel count, since the kernel prepares each layer's per-channel
constants once per band).

with in band = the depthwise's largest input extent for th rows (halo
included, border clipping exact: geometry.axis_table) x W x C, A() rounding
up to the library's buffer alignment. The intermediate block fd (depthwise
rows per block and core) is at most each core's share of the band.

Objective (lexicographic, unique optimum): the tallest band (fewer bands,
less halo re-read), then a band height that is a multiple of the core count
(even shares), then the largest fd (fewer blocks); with the shared scheme
the largest fd comes first (fewest blocks), then the same order. When the whole pair fits
single-buffered it is one band. Same deterministic solver settings as the
layer tiler. A pair whose smallest band does not fit is infeasible: the
answer says so with the bytes (the selector then keeps the layers apart).
"""

from ortools.sat.python import cp_model

from ..errors import TesseraError
from ..tiles import geometry
from ..tiler import memory
from ..tiler.library import DEFAULT_ALIGN, op_spec
from ..tiler.memory import align_up
from ..tiler.model import MAX_DETERMINISTIC_TIME, SEED
from ..util.solver import deterministic_solver


def scheme(target, kind="dw_pw"):
    return target.get("fused_scheme", {}).get(kind, "per_core")


def _mid_copies(target):
    """Intermediate buffers of fd rows: one per core, or one shared."""
    return 1 if scheme(target) in ("shared", "layers") else target["cores"]


def layers_scratch(pair, target):
    """The `layers` scheme's scratch: the depthwise's and the pointwise's
    scratch as the library states them for a tile of every output channel
    (its `tiler:` terms; those of a CMSIS-NN layer do not depend on the
    tile's rows)."""
    total = 0
    for part in ("dw", "pw"):
        v = pair[part]
        Ho, Wo, Co = v["out"]
        q = memory.quantities(v, target, op_spec(target["kernels"], v["op"]), Ho, Wo, Co, 1)
        total += q["scratch_bytes"]
    return total


def _parts(first, second, target, th, in_h, intermediate, scratch, buffering):
    """L1 bytes of a fused step whose first layer reads an in_h-row input
    band and whose second writes a th-row output band, both layers'
    weights and parameters loaded once."""
    a = target["kernels"].get("buffer_align", DEFAULT_ALIGN)
    _, W, Ci = first["in"]
    _, Wo, Co = second["out"]
    C1 = first["out"][2]
    parts = {
        "in": in_h * W * Ci * first["in_bytes"],
        "out": th * Wo * Co * second["out_bytes"],
        "weights": align_up(C1 * first["w_bytes_per_cout"], a) + align_up(Co * second["w_bytes_per_cout"], a),
        "params": align_up(C1 * first["param_bytes_per_cout"], a) + align_up(Co * second["param_bytes_per_cout"], a),
        "intermediate": intermediate,
        "scratch": scratch,
    }
    # a DW->PW step with an add epilogue: the add's other input's band too
    outs = 1 + second.get("epilogue", 0)
    if outs > 1:
        parts["skip"] = parts["out"]
    parts["total"] = (buffering * (align_up(parts["in"], a) + outs * align_up(parts["out"], a))
                      + parts["weights"] + parts["params"] + align_up(parts["intermediate"], a)
                      + align_up(parts["scratch"], a))
    return parts


def _bytes(pair, target, th, in_h, fd, buffering):
    dw, pw = pair["dw"], pair["pw"]
    intermediate = _mid_copies(target) * fd * pw["out"][1] * dw["in"][2]
    if scheme(target) == "layers":
        scratch = layers_scratch(pair, target)
    elif _dw_plane(pair, target):
        scratch = target["cores"] * (max(0, (fd - 1) * dw["stride"][0] + dw["kernel"][0]) * _plane_w(dw) + 4)
    else:
        scratch = target["cores"] * max(0, (fd - 1) * dw["stride"][0] + dw["kernel"][0]) * dw["kernel"][1]
    return _parts(dw, pw, target, th, in_h, intermediate, scratch, buffering)


def _plane_w(dw):
    """The depthwise input's padded width."""
    return dw["in"][1] + dw["pad"][1] + dw["pad"][3]


def _dw_plane(pair, target):
    """The shared DW->PW scheme on a library whose 3x3 depthwise has a
    faster path with each core's whole padded plane of the block's rows
    (PULP-NN's Xpulp path, target["fused_scheme"]["dw_pw_plane"]): the
    tiler reserves the planes, as the layer's own tiling does. With only
    the stripes the fused depthwise ran the slow stripe path, 1.6x its
    layer's cycles on pulp_open (GVSoC, dscnn_kws dw1)."""
    dw = pair["dw"]
    return (scheme(target) == "shared" and bool(target.get("fused_scheme", {}).get("dw_pw_plane"))
            and tuple(dw["kernel"]) == (3, 3) and dw["stride"][0] <= 3)


def _fused_result(pair, target, kind, layers, scheme_name, th, fd, buffering, feasible, reason, l1_bytes):
    ax = geometry.axes(pair["dw"])[0]
    spans = geometry.axis_tiles(ax[0], th, *ax[1:])
    bands = [{"oh0": o0, "oh": o, "ih0": i0, "ih": i, "pad_t": pt, "pad_b": pb}
             for o0, o, i0, i, pt, pb in spans]
    return {"group": pair["name"], "kind": kind, "layers": layers,
            "scheme": scheme_name, "feasible": feasible, "reason": reason, "tiled": len(bands) > 1 or buffering > 1,
            "band_h": th, "fd": fd, "buffering": buffering, "bands": bands,
            "align": target["kernels"].get("buffer_align", DEFAULT_ALIGN), "l1_bytes": l1_bytes}


def _result(pair, target, th, fd, buffering, table, feasible=True, reason="fits"):
    return _fused_result(pair, target, "dw_pw", [pair["dw"]["name"], pair["pw"]["name"]], scheme(target), th, fd,
                         buffering, feasible, reason, _bytes(pair, target, th, table[th][2], fd, buffering))


def _without_search(pair, target, table, Ho, whole_fd, nbytes, result, least_fd=1):
    """The whole map as one band when it fits (no search), the infeasible
    record when not even the smallest band fits, else None."""
    budget = target["l1_budget"]
    if Ho in table and nbytes(pair, target, Ho, table[Ho][2], whole_fd, 1)["total"] <= budget:
        return result(pair, target, Ho, whole_fd, 1, table)
    buffering = target["buffering"]
    smallest = min(table)
    need = nbytes(pair, target, smallest, table[smallest][2], least_fd, buffering)["total"]
    if need > budget:
        return result(pair, target, smallest, least_fd, buffering, table, False,
                      f"the smallest fused band ({smallest} row(s), fd {least_fd}) needs {need} bytes of L1, "
                      f"{budget} available")
    return None


def _band_vars(m, table, Ho, in_max, counts=False):
    """The band height th and its input rows in_h, tied to the geometry's
    table (band count and border band as in the layer tiler); with counts,
    also the band count n and the last band's height."""
    th = m.new_int_var(1, Ho, "th")
    n = m.new_int_var(1, Ho, "n")
    border = m.new_int_var(1, Ho, "border")
    in_h = m.new_int_var(1, in_max, "in_h")
    m.add_allowed_assignments([th, n, border, in_h], [(k, *table[k]) for k in sorted(table)])
    return (th, in_h, n, border) if counts else (th, in_h)


def _even_band(m, th, cores):
    """A boolean: the band height is a multiple of the core count."""
    even = m.new_bool_var("even")
    r = m.new_int_var(0, cores - 1, "r")
    m.add_modulo_equality(r, th, cores)
    m.add(r == 0).only_enforce_if(even)
    m.add(r != 0).only_enforce_if(~even)
    return even


def _solved(m, pair, target, result, th, fd, total, buffering, table):
    """The proven optimum of a fused tiler's model, as `result` records it,
    its L1 count checked against the model's."""
    solver = deterministic_solver(SEED, MAX_DETERMINISTIC_TIME)
    status = solver.solve(m)
    if status != cp_model.OPTIMAL:
        # as the layer tiler: an unproven band would depend on where the
        # deterministic work bound stopped the search; never stored
        raise TesseraError(f"fused pair {pair['name']}",
                           f"the fusion tiler's CP-SAT search ended ({solver.status_name(status)}) before proving "
                           f"the best band", f"raise tessera.tiler.model.MAX_DETERMINISTIC_TIME "
                           f"({MAX_DETERMINISTIC_TIME}) and report the pair's shapes, or build with fusion=none")
    got = result(pair, target, solver.value(th), solver.value(fd), buffering, table)
    assert got["l1_bytes"]["total"] == solver.value(total) <= target["l1_budget"]
    return got


def solve_dw_pw(pair, target):
    """The fused tiling of a DW->PW pair (see the module docstring)."""
    dw = pair["dw"]
    Ho = dw["out"][0]
    cores, budget = target["cores"], target["l1_budget"]
    table = geometry.axis_table(*geometry.axes(dw)[0])
    shared = scheme(target) in ("shared", "layers")
    whole_fd = Ho if shared else -(-Ho // cores)
    done = _without_search(pair, target, table, Ho, whole_fd, _bytes, _result)
    if done is not None:
        return done
    buffering = target["buffering"]
    a = target["kernels"].get("buffer_align", DEFAULT_ALIGN)
    _, W, C = dw["in"]
    _, Wo, Co = pair["pw"]["out"]
    (kh, kw), sh = dw["kernel"], dw["stride"][0]
    m = cp_model.CpModel()
    th, in_h = _band_vars(m, table, Ho, dw["in"][0])
    fd = m.new_int_var(1, Ho, "fd")
    if shared:
        m.add(fd <= th)
    else:
        m.add(fd * cores <= th + cores - 1)       # fd <= ceil(th / cores)
    fixed = _bytes(pair, target, 0, 0, 0, buffering)
    words = lambda name, x, hi: _aligned(m, name, x, hi, a)   # noqa: E731
    hi = budget // a + 1
    total = (buffering * (words("in", in_h * (W * C * dw["in_bytes"]), hi)
                          + (1 + pair["pw"].get("epilogue", 0))
                          * words("out", th * (Wo * Co * pair["pw"]["out_bytes"]), hi))
             + fixed["weights"] + fixed["params"] + words("mid", fd * (_mid_copies(target) * Wo * C), hi)
             + (align_up(fixed["scratch"], a) if scheme(target) == "layers"
                else words("stripe", fd * (cores * sh * _plane_w(dw)) + cores * ((kh - sh) * _plane_w(dw) + 4), hi)
                if _dw_plane(pair, target)
                else words("stripe", fd * (cores * sh * kw) + cores * (kh - sh) * kw, hi)))
    m.add(total <= budget)
    even = _even_band(m, th, cores)
    if shared:
        # the largest block first: every block gathers its depthwise stripes
        # (halo rows included) and forks the cores twice, so fewer blocks
        # beat a taller band of several blocks (measured on gap8: 4 blocks of
        # 5 rows in 19-row bands ran 5% slower than the layers apart)
        m.maximize(fd * ((2 * Ho + 2) * (Ho + 1)) + th * (2 * (Ho + 1)) + even * (Ho + 1))
    else:
        m.maximize(th * (2 * (Ho + 1)) + even * (Ho + 1) + fd)
    return _solved(m, pair, target, _result, th, fd, total, buffering, table)


def _aligned(m, name, x, hi, a):
    """x rounded up to a multiple of a (x a linear expression)."""
    if a == 1:
        return x
    k = m.new_int_var(0, hi, f"{name}_words")
    m.add(a * k >= x)
    m.add(a * k <= x + a - 1)
    return a * k


# ---- PW->DW, channel-wise ---------------------------------------------------
#
# A fused tile is a band of th depthwise output rows, full width, all
# channels; its input is the pointwise's input for the depthwise's input rows
# of the band (halo included), all input channels. Per block of fd channels
# the pointwise's fd channels over the band's in_h x W pixels go into an
# intermediate buffer, then the depthwise of those channels. Two schemes
# (target["fused_scheme"]["pw_dw"]): `per_core` (the reference tsr_pw_dw:
# each core its own channels in blocks of fd, its own buffer) or `shared`
# (PULP-NN: all cores on one block, the library's pointwise split by pixels,
# a fork, its depthwise split by channels; one buffer, fd a multiple of
# lcm(4, cores) (the 4x2 matmul's channel quantum, every core the same
# depthwise channels) or all the channels, and the depthwise's padded plane
# per core as stripe scratch, the fast path its layer tiling has too). L1:
#
#     buffering * (A(in band: in_h x W x Ci) + A(out band: th x Wo x C))
#     + weights and parameters of both layers (loaded once)
#     + A(copies * in_h * W * fd)                 intermediate
#     + A(cores * (rows * (W + pl + pr) + 4))     shared: the depthwise's planes,
#                                                 rows = (th - 1) * sh + kh
#
# Objective (lexicographic): the tallest band (each band recomputes the
# pointwise's halo rows), then the largest fd (fewer blocks: each re-reads
# the band's input and, shared, forks twice), then a band height that is a
# multiple of the core count; with the `layers` scheme the largest fd first,
# then the tallest band; with the `shared` scheme the fewest blocks in all
# (bands x channel blocks), then the fewest bands, then the largest fd, then
# the tallest band (a taller band of as many bands recomputes no fewer halo
# rows and only costs channels per block).
#
# The `layers` scheme (CMSIS-NN, one core: kernels/cmsis_nn/fused.c) runs
# the library's pointwise and depthwise on a compact fd-channel tensor; its
# depthwise writes dense HWC only, so with fd < C its output block (th x Wo
# x fd) follows the intermediate, word-aligned, and is copied into the
# band's channels. Its scratch: both layers' own (layers_scratch).

def pw_dw_scheme(target):
    return scheme(target, "pw_dw")


def _fd_quantum(target):
    """The shared scheme's block quantum: lcm(4, cores)."""
    from math import gcd
    c = target["cores"]
    return 4 * c // gcd(4, c)


def _pw_dw_plane(pair, th):
    """Bytes of one core's padded depthwise plane for a th-row band."""
    dw = pair["dw"]
    (kh, _), sh = dw["kernel"], dw["stride"][0]
    _, pl, _, pr = dw["pad"]
    return ((th - 1) * sh + kh) * (pair["pw"]["in"][1] + pl + pr) + 4


def _pw_dw_bytes(pair, target, th, in_h, fd, buffering):
    dw, pw = pair["dw"], pair["pw"]
    shared = pw_dw_scheme(target) == "shared"
    intermediate = (1 if shared else target["cores"]) * in_h * pw["in"][1] * fd
    scratch = target["cores"] * _pw_dw_plane(pair, th) if shared and th > 0 else 0
    if pw_dw_scheme(target) == "layers":
        if fd < dw["out"][2]:
            intermediate = align_up(intermediate, 4) + th * dw["out"][1] * fd
        scratch = layers_scratch(pair, target)
    return _parts(pw, dw, target, th, in_h, intermediate, scratch, buffering)


def _pw_dw_result(pair, target, th, fd, buffering, table, feasible=True, reason="fits", bytes_of=None):
    """A PW->DW tiling; bytes_of: the layout's L1 bytes (channel-wise when
    None: fd channels per block)."""
    l1 = (bytes_of or _pw_dw_bytes)(pair, target, th, table[th][2], fd, buffering)
    got = _fused_result(pair, target, "pw_dw", [pair["pw"]["name"], pair["dw"]["name"]], pw_dw_scheme(target), th,
                        fd, buffering, feasible, reason, l1)
    got["channels"] = pair["dw"]["out"][2]
    return got


def solve_pw_dw(pair, target):
    """The fused tiling of a PW->DW pair (see above)."""
    dw = pair["dw"]
    Ho, C = dw["out"][0], dw["out"][2]
    cores, budget = target["cores"], target["l1_budget"]
    shared = pw_dw_scheme(target) == "shared"
    table = geometry.axis_table(*geometry.axes(dw)[0])
    whole_fd = C if shared else -(-C // cores)
    least = min(_fd_quantum(target), C) if shared else 1

    done = _without_search(pair, target, table, Ho, whole_fd, _pw_dw_bytes, _pw_dw_result, least)
    if done is not None:
        return done
    buffering = target["buffering"]
    a = target["kernels"].get("buffer_align", DEFAULT_ALIGN)
    _, W, Ci = pair["pw"]["in"]
    _, Wo, _ = dw["out"]
    m = cp_model.CpModel()
    H = pair["pw"]["in"][0]
    th, in_h, nb, _ = _band_vars(m, table, Ho, H, counts=True)
    fd = m.new_int_var(1, whole_fd, "fd")
    if shared:
        # a multiple of the quantum, or every channel
        q = _fd_quantum(target)
        k = m.new_int_var(0, whole_fd // q, "fd_q")
        whole = m.new_bool_var("fd_whole")
        m.add(fd == whole_fd).only_enforce_if(whole)
        m.add(fd == q * k).only_enforce_if(~whole)
    mid = m.new_int_var(1, H * whole_fd, "mid")
    m.add_multiplication_equality(mid, [in_h, fd])
    fixed = _pw_dw_bytes(pair, target, 0, 0, C, buffering)
    hi = budget // a + 1
    if pw_dw_scheme(target) == "layers":
        # fd < C: the depthwise's output block after the word-aligned intermediate
        blocked = m.new_bool_var("blocked")
        m.add(fd < C).only_enforce_if(blocked)
        m.add(fd >= C).only_enforce_if(~blocked)
        rows = m.new_int_var(0, Ho * whole_fd, "block")
        m.add_multiplication_equality(rows, [th, fd])
        extra = m.new_int_var(0, Ho * whole_fd, "block_if")
        m.add(extra == rows).only_enforce_if(blocked)
        m.add(extra == 0).only_enforce_if(~blocked)
        mid_bytes = _aligned(m, "mid", _aligned(m, "mid4", mid * (cores * W), hi, 4) + extra * Wo, hi, a)
        mid_bytes += align_up(fixed["scratch"], a)
    else:
        mid_bytes = _aligned(m, "mid", mid * ((1 if shared else cores) * W), hi, a)
    total = (buffering * (_aligned(m, "in", in_h * (W * Ci * pair["pw"]["in_bytes"]), hi, a)
                          + (1 + dw.get("epilogue", 0)) * _aligned(m, "out", th * (Wo * C * dw["out_bytes"]), hi, a))
             + fixed["weights"] + fixed["params"] + mid_bytes)
    if shared:
        plane0 = _pw_dw_plane(pair, 1)
        total += _aligned(m, "stripe", cores * plane0 + (th - 1) * (cores * (_pw_dw_plane(pair, 2) - plane0)), hi, a)
    m.add(total <= budget)
    even = _even_band(m, th, cores)
    if pw_dw_scheme(target) == "layers":
        # the most channels per block first: every block converts the band's
        # whole input to CMSIS-NN's int16 columns again and calls both
        # kernels (measured on stm32h7, mbv2_025_128's b2_expand+b2_dw: fd 1
        # in 22-row bands ran 4.9x the layers apart; fd 96, shorter bands,
        # faster than apart)
        m.maximize(fd * (2 * (Ho + 1)) + th * 2 + even)
    elif shared:
        # the fewest blocks in all (bands x channel blocks: each forks twice
        # and pays the pointwise's and the depthwise's per-call setup again,
        # about 3 k cycles on GVSoC, as much as a pointwise halo row of a
        # 32x32x16 -> 32 layer), then the fewest bands (each recomputes the
        # pointwise's halo rows), then the most channels per block, then the
        # tallest band (measured on pulp_open, mbv1_025_128's pw3+dw4: 2
        # bands of 4 blocks ran +13.6% against its layers apart)
        nblk = m.new_int_var(1, whole_fd, "blocks")
        m.add_division_equality(nblk, fd + (whole_fd - 1), fd)
        steps = m.new_int_var(1, Ho * whole_fd, "steps")
        m.add_multiplication_equality(steps, [nb, nblk])
        w_fd = 2 * (Ho + 1)
        w_nb = w_fd * (whole_fd + 1)
        m.maximize((Ho * whole_fd - steps) * (w_nb * (Ho + 1)) + (Ho - nb) * w_nb + fd * w_fd + th * 2 + even)
    else:
        m.maximize(th * (2 * (whole_fd + 1)) + fd * 2 + even)
    return _solved(m, pair, target, _pw_dw_result, th, fd, total, buffering, table)


# ---- PW->DW, row-wise with the shifted buffer ------------------------------
#
# The same bands; per block of fd depthwise output rows the buffer holds the
# (fd - 1) * sh + kh pointwise rows (all channels) the block reads, and only
# the rows a block adds are computed (the overlap shifted up): no halo
# recomputed inside a band. `per_core` (reference tsr_pw_dw_rows: each core
# its share of the band's rows, its own buffer, fd at most that share) or
# `shared` (PULP-NN: all cores on a block, the library's pointwise of the new
# rows, then its depthwise of the block; one buffer, each core's padded plane
# of the block's rows as depthwise scratch) or `layers` (CMSIS-NN, one core:
# tsr_cmsis_pw_dw_rows, the library's own 1x1 convolution and depthwise on
# the one buffer; scratch: both layers' own, layers_scratch). L1:
#
#     buffering * (A(in band) + A(out band)) + weights and parameters
#     + A(k * ((fd - 1) * sh + kh) * W * C)        the shifted buffer
#     + A(cores * (((fd - 1) * sh + kh) * (W + pl + pr) + 4))   shared
#
# Objective: the tallest band, then the largest fd, then an even band. With
# `layers` (one core, a library call per layer and block) first the fewest
# estimated extra instructions, rows_overhead, then the same order.

# a row block's calls, per channel: both layers' per-call set-up (the
# depthwise's filter widened, its requantization constants, the 1x1's
# parameters) and the shift; measured on stm32h7, mbv2_025_128's
# b2_expand+b2_dw (96 channels): 32, 16, 9 and 5 blocks in 2, 2, 2 and 3
# bands ran +6.7%, +2.4%, +1.0%, +1.4% against its layers apart, ~16k
# instructions a block and ~90k a band (its halo: 98k MACs)
ROWS_BLOCK_PER_CHANNEL = 160


def rows_overhead(pair):
    """The `layers` row-wise step's estimated extra instructions per band
    (the pointwise's halo rows recomputed: its MACs) and per row block."""
    dw, pw = pair["dw"], pair["pw"]
    (kh, _), sh = dw["kernel"], dw["stride"][0]
    _, W, Ci = pw["in"]
    C = dw["out"][2]
    return max(0, kh - sh) * W * C * Ci, ROWS_BLOCK_PER_CHANNEL * C


def _rows_bytes(pair, target, th, in_h, fd, buffering):
    dw, pw = pair["dw"], pair["pw"]
    shared = pw_dw_scheme(target) == "shared"
    (kh, _), sh = dw["kernel"], dw["stride"][0]
    rows = (fd - 1) * sh + kh if fd > 0 else 0
    intermediate = (1 if shared else target["cores"]) * rows * pw["in"][1] * dw["out"][2]
    scratch = target["cores"] * _pw_dw_plane(pair, fd) if shared and fd > 0 else 0
    if pw_dw_scheme(target) == "layers":
        scratch = layers_scratch(pair, target)
    return _parts(pw, dw, target, th, in_h, intermediate, scratch, buffering)


def _rows_result(pair, target, th, fd, buffering, table, feasible=True, reason="fits"):
    got = _pw_dw_result(pair, target, th, fd, buffering, table, feasible, reason, bytes_of=_rows_bytes)
    got["layout"] = "rows"     # fd counts depthwise output rows
    return got


def solve_pw_dw_rows(pair, target):
    """The row-wise fused tiling of a PW->DW pair (see above)."""
    dw = pair["dw"]
    Ho, C = dw["out"][0], dw["out"][2]
    cores, budget = target["cores"], target["l1_budget"]
    shared = pw_dw_scheme(target) == "shared"
    table = geometry.axis_table(*geometry.axes(dw)[0])
    whole_fd = Ho if shared else -(-Ho // cores)
    done = _without_search(pair, target, table, Ho, whole_fd, _rows_bytes, _rows_result)
    if done is not None:
        return done
    buffering = target["buffering"]
    a = target["kernels"].get("buffer_align", DEFAULT_ALIGN)
    _, W, Ci = pair["pw"]["in"]
    _, Wo, _ = dw["out"]
    (kh, _), sh = dw["kernel"], dw["stride"][0]
    m = cp_model.CpModel()
    th, in_h, n, border = _band_vars(m, table, Ho, pair["pw"]["in"][0], counts=True)
    fd = m.new_int_var(1, Ho, "fd")
    if shared:
        m.add(fd <= th)
    else:
        m.add(fd * cores <= th + cores - 1)
    fixed = _rows_bytes(pair, target, 0, 0, 0, buffering)
    hi = budget // a + 1
    k = 1 if shared else cores
    total = (buffering * (_aligned(m, "in", in_h * (W * Ci * pair["pw"]["in_bytes"]), hi, a)
                          + (1 + dw.get("epilogue", 0)) * _aligned(m, "out", th * (Wo * C * dw["out_bytes"]), hi, a))
             + fixed["weights"] + fixed["params"]
             + _aligned(m, "mid", (fd * sh + (kh - sh)) * (k * W * C), hi, a)
             + align_up(fixed["scratch"], a))
    if shared:
        plane0 = _pw_dw_plane(pair, 1)
        total += _aligned(m, "stripe", cores * plane0 + (fd - 1) * (cores * (_pw_dw_plane(pair, 2) - plane0)), hi, a)
    m.add(total <= budget)
    even = _even_band(m, th, cores)
    order = th * (2 * (Ho + 1)) + fd * 2 + even
    if pw_dw_scheme(target) == "layers":
        # blocks: (n - 1) * ceil(th / fd) + ceil(border / fd)
        per_band, per_block = rows_overhead(pair)
        q, qb = (m.new_int_var(1, Ho, name) for name in ("q", "q_border"))
        m.add_division_equality(q, th + fd - 1, fd)
        m.add_division_equality(qb, border + fd - 1, fd)
        rest = m.new_int_var(0, Ho, "rest")
        m.add(rest == n - 1)
        inner = m.new_int_var(0, Ho * Ho, "inner")
        m.add_multiplication_equality(inner, [rest, q])
        cost = n * per_band + (inner + qb) * per_block
        m.minimize(cost * (2 * (Ho + 1) ** 2 + 1) - order)
    else:
        m.maximize(order)
    return _solved(m, pair, target, _rows_result, th, fd, total, buffering, table)


def solve_pw_dw_either(pair, target):
    """The PW->DW tiling (the model's fusion_pw_dw, given as
    target["fused_scheme"]["pw_dw_layout"]): auto, channel-wise when it
    fits, else row-wise (with the `layers` scheme: the one of the two with
    the smaller layout_overhead, channel-wise on a tie); rows, row-wise when
    it fits; channels. Measured
    on gap8 (mbv1_025_224, fusion=min_transfer), the row-wise tilings the
    tiler finds where both fit (blocks of 1 or 2 rows) ran +18% to +44%
    slower per group than the layers apart, channel-wise +3% to +24%, for
    0.2% fewer activation bytes: every block gathers its depthwise planes
    again, halo rows included, and shifts the buffer."""
    layout = target.get("fused_scheme", {}).get("pw_dw_layout", "auto")
    if layout == "rows":
        rows = solve_pw_dw_rows(pair, target)
        return rows if rows["feasible"] else solve_pw_dw(pair, target)
    ch = solve_pw_dw(pair, target)
    if layout == "channels" or (ch["feasible"] and pw_dw_scheme(target) != "layers"):
        return ch
    rows = solve_pw_dw_rows(pair, target)
    if not ch["feasible"]:
        return rows if rows["feasible"] else ch
    # `layers` (CMSIS-NN), both fit: row-wise where its estimated extra
    # instructions are fewer (stm32h7 mbv2_025_128's b2_expand+b2_dw:
    # row-wise +0.8%, channel-wise +2.3% against the layers apart)
    return rows if rows["feasible"] and layout_overhead(pair, rows) < layout_overhead(pair, ch) else ch


def layout_overhead(pair, ft):
    """A `layers` PW->DW tiling's estimated extra instructions
    (rows_overhead): per band the pointwise's halo, per row block the
    calls; a channel-wise band's blocks together set up every channel
    once, as one row block does (their re-reads of the band's input are
    left out: channel-wise's figure is a lower bound, so row-wise is taken
    only where it beats that)."""
    per_band, per_block = rows_overhead(pair)
    if ft.get("layout") == "rows":
        blocks = sum(-(-b["oh"] // ft["fd"]) for b in ft["bands"])
    else:
        blocks = len(ft["bands"])
    return len(ft["bands"]) * per_band + blocks * per_block


def solve_epilogue(pair, target):
    """An add epilogue's tiling: the producer's own tiling (the layer
    tiler's CP-SAT model, its objective) with a second output-sized buffer
    per buffer set, the add's other input's tile ("skip"). As the fused
    tilings: feasible or not, with the reason and the bytes."""
    from ..errors import FitError
    from ..tiler import solve_layer

    layer = pair["layer"]
    tgt = {k: v for k, v in target.items() if k != "fused_scheme"}
    try:
        t = solve_layer(layer, tgt)
    except FitError as err:
        return {"group": pair["name"], "kind": "add", "layers": [layer["name"], pair["add"]["name"]],
                "feasible": False, "reason": f"the tiles with the add's input beside them do not fit: {err}",
                "bands": [], "l1_bytes": {"total": 0}}
    if t.get("split"):
        # the step kernels of a split reduction requantize in place of an
        # epilogue (codegen/split.py): only an unsplit producer takes the add
        return {"group": pair["name"], "kind": "add", "layers": [layer["name"], pair["add"]["name"]],
                "feasible": False, "reason": "the tiles with the add's input beside them do not fit unless the "
                f"reduction is split ({t['split']['n']} chunks), and a split step takes no add epilogue",
                "bands": [], "l1_bytes": {"total": 0}}
    # what changes with the L1 size though the tile does not: not stored (as steps.tile)
    t = {k: v for k, v in t.items() if k not in ("l1_budget", "objective", "optimal")}
    return {"group": pair["name"], "kind": "add", "layers": [layer["name"], pair["add"]["name"]],
            "feasible": True, "reason": "fits", "tiling": t, "bands": [], "l1_bytes": t["l1_bytes"]}


def solve(pair, target):
    """The fused tiling of a candidate pair of any kind."""
    if pair.get("kind") == "add":
        return solve_epilogue(pair, target)
    if pair.get("kind") in ("dw_pw_add", "pw_dw_add"):
        # the DW->PW or PW->DW step, its output bands doubled by the add's other input's
        ft = solve_dw_pw(pair, target) if pair["kind"] == "dw_pw_add" else solve_pw_dw_either(pair, target)
        return dict(ft, kind=pair["kind"], layers=ft["layers"] + [pair["add"]["name"]])
    return solve_pw_dw_either(pair, target) if pair.get("kind") == "pw_dw" else solve_dw_pw(pair, target)

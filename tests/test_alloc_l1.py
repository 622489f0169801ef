"""l1_layout: the L1 regions of one tiled layer."""

import pytest
from hypothesis import given, settings, strategies as st

from tessera.planning.alloc import l1_layout
from tessera.errors import FitError


def tiling(in_=0, out=0, weights=0, params=0, scratch=0, buffering=2,
           n_inputs=None, budget=100_000, layer="conv1"):
    t = {"layer": layer, "tiled": buffering == 2, "buffering": buffering,
         "l1_bytes": {"in": in_, "out": out, "weights": weights,
                      "params": params, "scratch": scratch, "total": 0},
         "l1_budget": budget}
    if n_inputs is not None:
        t["n_inputs"] = n_inputs
    return t


def regions(layout, t):
    """(offset, bytes) of every buffer in the layout."""
    l1 = t["l1_bytes"]
    out = [(off, l1["in"]) for per_input in layout["in"] for off in per_input]
    for key in ("out", "weights", "params"):
        out += [(off, l1[key]) for off in layout[key]]
    out.append((layout["scratch"], l1["scratch"]))
    return out


def test_double_buffered_conv():
    # sizes as the tiler reports them for MobileNetV1's first conv in 20 kB
    t = tiling(in_=2475, out=6144, weights=864, params=288, scratch=432, budget=20000)
    lay = l1_layout(t)
    assert lay == {"in": [[0, 2476]], "out": [4952, 11096], "weights": [17240, 18104],
                   "params": [18968, 19256], "scratch": 19544, "total": 19976,
                   "budget": 20000}


def test_single_buffered_untiled_layer():
    t = tiling(in_=16384, out=16384, weights=4096, params=576, buffering=1)
    lay = l1_layout(t)
    assert lay["in"] == [[0]] and lay["out"] == [16384]
    assert lay["weights"] == [32768] and lay["params"] == [36864]
    assert lay["scratch"] == lay["total"] == 37440


def test_add_has_one_buffer_set_per_input_and_empty_regions():
    t = tiling(in_=1280, out=1280, n_inputs=2, budget=8000)
    lay = l1_layout(t)
    assert lay["in"] == [[0, 1280], [2560, 3840]]
    assert lay["out"] == [5120, 6400]
    # empty regions still get (aligned) offsets but take no space
    assert lay["weights"] == [7680, 7680] and lay["params"] == [7680, 7680]
    assert lay["scratch"] == 7680 and lay["total"] == 7680


def test_alignment():
    lay = l1_layout(tiling(in_=3, out=5, weights=1, params=9, scratch=2), align=8)
    t = tiling(in_=3, out=5, weights=1, params=9, scratch=2)
    for off, _ in regions(lay, t):
        assert off % 8 == 0
    assert lay["total"] == 8 * (2 + 2 + 2 + 4 + 1)


def test_over_budget_raises():
    t = tiling(in_=1000, out=1000, budget=3999, layer="conv7")
    with pytest.raises(FitError) as err:
        l1_layout(t)
    msg = str(err.value)
    assert "conv7" in msg and "4000 bytes" in msg and "3999 bytes available" in msg


def test_alignment_padding_over_budget_is_named():
    # the tiler counted 4 bytes fewer than the packed, aligned layout
    t = tiling(in_=1001, out=999, buffering=1, budget=2002)
    t["l1_bytes"]["total"] = 2000
    with pytest.raises(FitError, match="alignment padding"):
        l1_layout(t)


def test_bad_tiling():
    with pytest.raises(ValueError, match="buffering"):
        l1_layout(tiling(buffering=3))
    with pytest.raises(ValueError, match="n_inputs"):
        l1_layout(tiling(n_inputs=0))
    with pytest.raises(ValueError, match="non-negative"):
        l1_layout(tiling(in_=-1))


sizes = st.integers(0, 5000)


@settings(max_examples=100, deadline=None)
@given(sizes, sizes, sizes, sizes, sizes, st.sampled_from([1, 2]),
       st.integers(1, 3), st.sampled_from([1, 2, 4, 8, 16]))
def test_layout_properties(i, o, w, p, s, buffering, n_inputs, align):
    t = tiling(i, o, w, p, s, buffering=buffering, n_inputs=n_inputs, budget=10 ** 9)
    lay = l1_layout(t, align=align)
    assert len(lay["in"]) == n_inputs
    assert all(len(x) == buffering for x in lay["in"])
    assert all(len(lay[k]) == buffering for k in ("out", "weights", "params"))
    regs = regions(lay, t)
    assert all(off % align == 0 for off, _ in regs)
    # packed from 0, no two buffers share a byte, nothing past total
    nonempty = sorted((off, n) for off, n in regs if n)
    for (a, na), (b, _) in zip(nonempty, nonempty[1:]):
        assert a + na <= b
    assert all(off + n <= lay["total"] for off, n in regs)
    assert lay["total"] == (buffering * (n_inputs * -(-i // align) + -(-o // align)
                                         + -(-w // align) + -(-p // align))
                            + -(-s // align)) * align
    assert lay == l1_layout(t, align=align)

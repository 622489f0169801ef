"""The C array formatters (codegen.cfmt) are vectorized with numpy; their
text must be what the plain element-by-element loop writes, since every
generated weight file goes through them (outputs stay byte-identical)."""

import numpy as np
import pytest

from tessera.codegen.cfmt import byte_string, immediate_offsets, int_list


def plain_byte_string(data, per_line=64, indent="    "):
    raw = bytes(int(v) & 0xFF for v in np.asarray(data).reshape(-1))
    lines = [indent + '"' + "".join("\\x%02x" % b for b in raw[i:i + per_line]) + '"'
             for i in range(0, len(raw), per_line)]
    return "\n".join(lines) if lines else indent + '""'


def plain_int_list(values, per_line=16, indent="    "):
    vals = [int(v) for v in np.asarray(values).reshape(-1)]
    return "\n".join(indent + ", ".join(str(v) for v in vals[i:i + per_line]) + ","
                     for i in range(0, len(vals), per_line))


def test_known_text():
    assert byte_string(np.array([0, -1, 127, -128], np.int8), per_line=3) == '    "\\x00\\xff\\x7f"\n    "\\x80"'
    assert byte_string(np.zeros(0, np.int8)) == '    ""'
    assert int_list([1, -2, 3], per_line=2, indent="  ") == "  1, -2,\n  3,"
    assert int_list(np.zeros(0, np.int32)) == ""


@pytest.mark.parametrize("n", [1, 5, 63, 64, 65, 130, 1000])
@pytest.mark.parametrize("per_line", [1, 7, 16, 64])
def test_same_text_as_the_plain_loop(n, per_line):
    rng = np.random.default_rng(n * 100 + per_line)
    data = rng.integers(-128, 128, n).astype(np.int8)
    assert byte_string(data, per_line) == plain_byte_string(data, per_line)
    assert byte_string(data, per_line, indent="  ") == plain_byte_string(data, per_line, indent="  ")
    for dtype in (np.int8, np.uint8, np.int32, np.int64, bool):
        values = rng.integers(-2**31, 2**31, n).astype(dtype)
        assert int_list(values, per_line) == plain_int_list(values, per_line)
    assert int_list(list(range(-3, n - 3)), per_line, "      ") == plain_int_list(range(-3, n - 3), per_line, "      ")


LOOP = """static const uint32_t l1_in0[2] = {0, 11776};
static const uint32_t l1_out[2] = {23552, 35328};
static const uint32_t l1_w[1] = {47104};
static const uint32_t l1_skip[2] = {9000, 100};   /* y's tile */
static const uint32_t l1_in[3] = {1, 2, 3};
    a.in = L1 + l1_in0[b] + l1_in[b];
    load(L1 + l1_out[(i + 1) % 2], L1 + l1_w[wb], L1 + l1_skip[b]);
"""


def test_offsets_become_immediates_on_pulp_open_only():
    assert immediate_offsets(LOOP, {"platform": "cortexm"}) == LOOP
    assert immediate_offsets(LOOP, {}) == LOOP
    got = immediate_offsets(LOOP, {"platform": "pulp_open"})
    assert got == """#define l1_in0(b) (0 + (b) * 11776)
#define l1_out(b) (23552 + (b) * 11776)
#define l1_w(b) (47104 + (b) * 0)
#define l1_skip(b) (9000 + (b) * -8900)   /* y's tile */
static const uint32_t l1_in[3] = {1, 2, 3};
    a.in = L1 + l1_in0(b) + l1_in[b];
    load(L1 + l1_out((i + 1) % 2), L1 + l1_w(wb), L1 + l1_skip(b));
"""
    # the macros give the tables' values for every buffer index
    for b in (0, 1):
        assert eval(f"(23552 + ({b}) * 11776)") == [23552, 35328][b]
        assert eval(f"(9000 + ({b}) * -8900)") == [9000, 100][b]

"""Byte-level mutations the fuzz tests (test_fuzz_inputs.py,
test_fuzz_dialects.py) apply to a serialized model, drawn by hypothesis."""

from hypothesis import strategies as st


def flip(data, draw):
    """One to four bytes xor-ed with a non-zero value."""
    data = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(data) - 1))
        data[i] ^= draw(st.integers(1, 255))
    return bytes(data)


def truncate(data, draw):
    """A proper prefix (possibly empty)."""
    return data[:draw(st.integers(0, len(data) - 1))]

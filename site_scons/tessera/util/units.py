"""How sizes are written for a person: bytes with thousands separators
("497,224 B"); where a KiB figure helps, KiB = 1024 B, said so. One place,
so the console, the errors and report.html agree."""


def nbytes(n):
    """'64,000 B'."""
    return f"{int(n):,} B"


def kib(n):
    """'62.5 KiB' (1 KiB = 1024 B)."""
    return f"{n / 1024:.1f} KiB"


def both(n):
    """'497,224 B (485.6 KiB)', or plain bytes below 1 KiB."""
    return nbytes(n) if n < 1024 else f"{nbytes(n)} ({kib(n)})"

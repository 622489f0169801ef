"""The fuzzer (tools/fuzz.py) in CI: a short deterministic run of every
format's mutants through what a build reads (no builds: the long run in
docs/bad_input.md samples those). Every mutant ends in one clean line or
an accepted model its runtime also accepts: no traceback, no hang, no
wrong success, no message of more than one line."""

import os
import sys

from helpers import ROOT

sys.path.insert(0, os.path.join(ROOT, "tools"))
import fuzz  # noqa: E402

COUNT = 90


def test_a_short_fuzz_run_has_no_finding(tmp_path):
    lines = []
    counts, kinds, findings = fuzz.run(COUNT, seed=0, out=str(tmp_path), log=lines.append)
    print("\n" + fuzz.table(counts))
    assert not findings, findings
    assert not [line for line in lines if "dropped" in line and "qlinearconv" not in line], lines
    assert sum(sum(c.values()) for c in counts.values()) == COUNT
    # the peers' seeds are there when ../shared is
    expected = set(fuzz.FORMATS) if os.path.isdir(fuzz.SHARED) else {"qdq", "qoperator", "tflite", "yaml"}
    assert expected <= set(counts), counts


def test_a_mutant_is_a_function_of_the_seed_and_its_index():
    seed_sets = fuzz.seeds(os.path.join(ROOT, "generated", ".models"))
    for fmt in ("qdq", "tflite", "yaml"):
        a = fuzz.make(seed_sets, fmt, 3, 17)
        b = fuzz.make(seed_sets, fmt, 3, 17)
        assert (a[0].name, a[1], a[2]) == (b[0].name, b[1], b[2])
        assert a[2] != fuzz.make(seed_sets, fmt, 3, 18)[2] or a[1] != fuzz.make(seed_sets, fmt, 3, 18)[1]

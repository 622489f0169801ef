"""SCons action functions: each reads its sources, calls the library, writes
its targets. They stay small and stable, since SCons signs an action by its
own bytecode; the library code they call is declared with Depends.

A TesseraError becomes one line on stderr and a failed step (no traceback).
Each action is a two-line function calling `guarded(work, ...)`: a
decorator would make every action share one code object, and its closure's
repr (with a memory address) would change SCons's signature on every run.
"""

import json
import sys

from tessera import canon
from tessera.errors import TesseraError
from tessera.ir import Graph


def guarded(work, target, source, env):
    """Run work(); a TesseraError becomes a one-line message, a non-zero
    status and no target left behind that could look up to date."""
    try:
        return work(target, source, env) or 0
    except TesseraError as err:
        sys.stderr.write(f"tessera: error: {err}\n")
        for t in target:
            try:
                t.remove()
            except OSError:
                pass
        return 1


def report(target, source, env):
    return guarded(_report, target, source, env)


def _report(target, source, env):
    from tessera.report import summary

    graph = Graph.from_json(canon.read_json(str(source[0])))
    weights = canon.load_npz(str(source[1]))
    title = json.loads(source[2].read())
    rows = summary.layer_rows(graph, weights)
    tot = summary.totals(rows)
    summary.render(rows, tot, f"{title['model']} on {title['target']}")
    canon.write_json(str(target[0]), {"target": title["target"], "model": title["model"],
                                      "layers": rows, "totals": tot})
    return 0

"""Design-space sweeps (docs/sweeps.md): many ordinary builds of models x
targets x axes, run in parallel processes or as Ray tasks, summarized in one
table, a Pareto page and the smallest memories that reach a latency.

    from tessera import sweep
    spec = sweep.load("sweeps/gap8_memory.yaml")     # the sweep file, checked
    points = sweep.expand(spec)                      # every point, in a fixed order
    results = sweep.run(spec, points, "sweep_out", cache="cache", jobs=2)   # or ray="127.0.0.1:6379"
    sweep.write_outputs(spec, results, "sweep_out")  # table.csv, table.json, pareto.html, smallest.json

Plain functions over plain data: spec (sweep file), point (one build),
execute (local processes, Ray), results (table, Pareto front, smallest
memory), page (the HTML page).
"""

from .spec import BUILD_VARIABLES, expand, load  # noqa: F401
from .execute import run  # noqa: F401
from .outputs import write_outputs  # noqa: F401
from .results import pareto, smallest, table  # noqa: F401

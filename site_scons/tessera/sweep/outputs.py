"""The files a sweep writes in its folder: table.csv, table.json,
smallest.json and pareto.html (docs/sweeps.md)."""

import os

from ..util import canon
from . import page
from .results import csv_text, pareto, smallest, table


def write_outputs(spec, points, results, sweep_dir, limit=None):
    """table.csv, table.json, smallest.json (with a latency) and pareto.html
    in the sweep folder; returns their paths."""
    rows = table(spec, points, results)
    small = smallest(spec, rows, limit)
    files = {"csv": os.path.join(sweep_dir, "table.csv"), "json": os.path.join(sweep_dir, "table.json"),
             "html": os.path.join(sweep_dir, "pareto.html")}
    canon.write_atomic(files["csv"], csv_text(rows))
    canon.write_atomic(files["json"], canon.dumps({"sweep": spec["name"], "rows": rows}, indent=1))
    if small is not None:
        files["smallest"] = os.path.join(sweep_dir, "smallest.json")
        canon.write_json(files["smallest"], small)
    canon.write_atomic(files["html"], page.html(spec, rows, pareto(rows), small))
    return files

"""`scons list`: the bundled targets and models as rich tables."""

import os

from .. import config
from ..errors import ConfigError
from ..util.units import nbytes
from .console import make_console


def print_targets_and_models(root, console=None):
    from rich.table import Table

    console = console or make_console()
    targets = Table(title="targets (targets/*.yaml; memory levels in bytes)")
    for col in ("name", "cores", "memory levels", "kernels", "runner", "description"):
        targets.add_column(col)
    for name in config.available("target", root):
        try:
            t = config.load_target(os.path.join(root, "targets", name + ".yaml"), name)
        except ConfigError as err:
            targets.add_row(name, "", "", "", "", f"[red]invalid: {err}[/red]")
            continue
        levels = ", ".join(f"{n} {nbytes(lvl['size'])}" for n, lvl in t["memory"].items())
        runner = t["runner"]["kind"] + (f" ({t['runner']['program']})" if t["runner"]["program"] else "")
        targets.add_row(name, str(t["cores"]), levels, t["kernels"], runner, t["description"])
    models = Table(title="models (models/*.yaml)")
    for col in ("name", "source", "description"):
        models.add_column(col)
    for name in config.available("model", root):
        try:
            m = config.load_model(os.path.join(root, "models", name + ".yaml"), name)
        except ConfigError as err:
            models.add_row(name, "", f"[red]invalid: {err}[/red]")
            continue
        source = f"zoo: {m['generator']['arch']}" if m["generator"] else os.path.basename(m["onnx"] or m["tflite"])
        models.add_row(name, source, m["description"])
    console.print(targets)
    console.print(models)

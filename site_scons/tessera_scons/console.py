"""What tessera's own build prints while it runs (SConstruct: `./scons`,
`tessera build`); a firmware's SConstruct that adds a network keeps its own
console. The report's tables are tessera.report's.

    setup(env, verbose)      before the networks are declared
    summary_at_exit(net)     a network whose run and check were asked for

- verbose=0 (the default): a compiler, archiver or linker step is one line,
  `tessera: compile <object>` (verbose=1: the whole command line); the
  export's copies are not listed.
- On a terminal, a progress display instead of a line per step: per kind
  of step the number started (tiling solves: of the network's layers), the
  run with its time so far. In a log or a pipe, a line per step.
- Last, once the build is over: each network's summary and verdict from its
  report.json, also when nothing had to be rebuilt. A network whose build
  failed before its report shows the failing step's error instead; one
  whose layers did not match shows its summary and FAIL.
"""

import atexit
import os
import re
import sys
import threading

from tessera.pipeline import report as reporting

# the command-line steps' lines (SCons's *COMSTR); their commands are not in
# the build's signatures, so this changes no step's signature
COMSTR = {"CCCOMSTR": "tessera: compile $TARGET", "ASCOMSTR": "tessera: compile $TARGET",
          "ASPPCOMSTR": "tessera: compile $TARGET", "ARCOMSTR": "tessera: archive $TARGET",
          "RANLIBCOMSTR": "", "LINKCOMSTR": "tessera: link $TARGET"}
STEP = re.compile(r"tessera: (tile fused|tile|choose the tile budget|select fusion|plan memory|generate|compile|"
                  r"archive|link|write|export|run|check|report) (\S+)")

# one step per network: shown as running until a step of another kind starts
SINGLE = ("choose the tile budget", "select fusion", "plan memory", "link", "run", "check", "report")

_progress = None
_networks = []
_registered = []


def _register():
    if not _registered:
        atexit.register(_at_exit)
        _registered.append(True)


def setup(env, verbose):
    """Quiet command lines unless `verbose`; progress on a terminal."""
    global _progress
    if verbose:
        return
    env.Replace(**COMSTR)
    from rich.console import Console

    console = Console()
    _progress = _Progress(console) if console.is_terminal else None
    env["PRINT_CMD_LINE_FUNC"] = _progress.show if _progress else _line
    _register()


def expect(net):
    """Totals for the progress display: one tiling solve per layer."""
    if _progress is not None:
        _progress.expect("tile", len(net["tilings"]))


def summary_at_exit(net):
    """Print this network's summary and verdict when the build is over."""
    _register()
    _networks.append(net)


_lines = threading.Lock()


def _line(s, target, source, env):
    """A step's line in a log (one write, under a lock: with -j the steps
    start in SCons's worker threads)."""
    if not s.startswith("Install file: "):
        with _lines:
            sys.stdout.write(s + "\n")
            sys.stdout.flush()


def _at_exit():
    global _progress
    if _progress is not None:
        _progress.stop()
        _progress = None
    if not _networks:
        return
    from SCons.Script import GetBuildFailures

    failed = [os.path.abspath(str(f.node)) for f in GetBuildFailures()]
    for net in _networks:
        outdir = net["outdir"]
        mine = [p for p in failed if p.startswith(outdir + os.sep)]
        # a failed step before the gate: its own error line says what, and
        # no report of this build exists
        if [p for p in mine if os.path.basename(p) != ".passed"]:
            continue
        path = os.path.join(outdir, "report.json")
        if os.path.exists(path):
            from tessera.util import canon

            print(reporting.show(canon.read_json(path), outdir), flush=True)
    _networks.clear()


class _Progress:
    """rich's progress display, fed the steps' lines (PRINT_CMD_LINE_FUNC,
    called as each step starts, from SCons's worker threads with -j)."""

    def __init__(self, console):
        from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self.display = Progress(SpinnerColumn(finished_text="[green]✓"), TextColumn("{task.description}"),
                                BarColumn(bar_width=24), TimeElapsedColumn(), console=console)
        self.lock = threading.Lock()
        self.tasks, self.done, self.totals = {}, {}, {}
        self.single = set()
        self.started = False

    def expect(self, verb, n):
        self.totals[verb] = self.totals.get(verb, 0) + n

    def _describe(self, verb, what=""):
        total = self.totals.get(verb)
        count = f"{self.done[verb]}/{total}" if total else str(self.done[verb])
        return f"{verb:<16} {count:>9}  {what}"

    def show(self, s, target, source, env):
        with self.lock:
            if not self.started:
                self.display.start()
                self.started = True
            m = STEP.match(s)
            if m is None:
                if not s.startswith("Install file: "):
                    self.display.console.print(s, markup=False, highlight=False)
                return
            verb, what = m.group(1), os.path.basename(m.group(2))
            # a step that is one per network (the run, the plan...) is over
            # when a step of another kind starts (the next stage reads it)
            for other in [v for v in self.single if v != verb]:
                self.display.update(self.tasks[other], total=self.done[other], completed=self.done[other])
                self.single.discard(other)
            self.done[verb] = self.done.get(verb, 0) + 1
            if verb not in self.tasks:
                self.tasks[verb] = self.display.add_task("", total=self.totals.get(verb))
            task = self.tasks[verb]
            if verb in SINGLE:
                self.single.add(verb)
                self.display.update(task, description=self._describe(verb, what), total=None)
            else:
                self.display.update(task, description=self._describe(verb, what), advance=1)

    def stop(self):
        with self.lock:
            if not self.started:
                return
            for verb, task in self.tasks.items():
                self.display.update(task, description=self._describe(verb), total=self.done[verb],
                                    completed=self.done[verb])
            self.display.stop()

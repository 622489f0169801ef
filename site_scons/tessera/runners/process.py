"""Run a command under a timeout and turn every way it can fail into one
RunError line."""

import signal
import subprocess

from ..errors import RunError

# signals a program does not send itself by faulting
OUTSIDE = {signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT}


def killed_from_outside(where, returncode):
    """The emulator, simulator or program stopped by someone else (a kill,
    the out-of-memory killer, a closed terminal), not by the firmware."""
    return RunError(where, f"killed by {signal.Signals(-returncode).name} from outside before it finished",
                    "run the build again; if something keeps killing it, look for what (out of memory?)")


def run_command(cmd, where, timeout, merge_stderr=True, explain=None, cwd=None):
    """stdout (+stderr) text of cmd; RunError on timeout, signal or non-zero exit.
    explain(text, returncode), when given, may name the failure better than
    the last lines of output do (e.g. a fault report); the RunError carries
    the whole output as `.output`."""
    try:
        res = subprocess.run(cmd, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
                             timeout=timeout, cwd=cwd)
    except subprocess.TimeoutExpired as exc:
        err = RunError(where, f"no result within {timeout} s (hung?)",
                       "raise runner.timeout in the target YAML if the network is just slow")
        err.output = (exc.stdout or b"").decode(errors="replace")
        raise err from None
    except OSError as err:
        raise RunError(where, f"cannot start {cmd[0]}: {err.strerror}") from None
    text = res.stdout.decode(errors="replace")
    reason = explain(text, res.returncode) if explain and res.returncode != 0 else None
    if res.returncode < 0 and -res.returncode in OUTSIDE:
        err = killed_from_outside(where, res.returncode)
    elif res.returncode < 0:
        sig = signal.Signals(-res.returncode).name
        err = RunError(where, f"killed by {sig}" + (f": {reason}" if reason else ""),
                       "the firmware faulted; see the run log")
    elif res.returncode != 0:
        tail = " | ".join(text.strip().splitlines()[-2:])
        err = RunError(where, reason or f"exit status {res.returncode} ({tail or 'no output'})")
    else:
        return text
    err.output = text
    raise err

"""Run a command under a timeout and turn every way it can fail into one
RunError line."""

import signal
import subprocess

from ..errors import RunError


def run_command(cmd, where, timeout, merge_stderr=True):
    """stdout (+stderr) text of cmd; RunError on timeout, signal or non-zero exit."""
    try:
        res = subprocess.run(cmd, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
                             timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RunError(where, f"no result within {timeout} s (hung?)",
                       "raise runner.timeout in the target YAML if the network is just slow") from None
    except OSError as err:
        raise RunError(where, f"cannot start {cmd[0]}: {err.strerror}") from None
    text = res.stdout.decode(errors="replace")
    if res.returncode < 0:
        sig = signal.Signals(-res.returncode).name
        raise RunError(where, f"killed by {sig}", "the firmware faulted; see the run log")
    if res.returncode != 0:
        tail = " | ".join(text.strip().splitlines()[-2:])
        raise RunError(where, f"exit status {res.returncode} ({tail or 'no output'})")
    return text

"""The host runner: the firmware is a native program."""

from .process import run_command


def run(runner, firmware, args, timeout, cwd=None):
    return run_command([firmware, *args], f"run of {firmware}", timeout, cwd=cwd)

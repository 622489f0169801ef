"""The command line's variables, checked before anything is built: a value
a variable cannot take is one line naming `name=value`, never a silent
default (overlap=2 used to plan with overlap on, as if 1 had been given).

Variables with a fixed set of values are checked where they are used
(fusion=, export=, target=, model=, out=); these are the flags and
numbers, for every variable that exists in this checkout.
"""

from ..errors import ConfigError

# on/off flags: their words, exactly as the build reads them (an empty
# value keeps the default)
FLAGS = ("overlap", "guard", "direct", "verbose", "patch", "chw")
FLAG_WORDS = {"0": False, "no": False, "false": False, "1": True, "yes": True, "true": True}
# sizes in bytes
POSITIVE_INTS = ("ram_cap",)


def check_arguments(arguments):
    """arguments: the command line's {variable: value} (SCons' ARGUMENTS)."""
    for key in sorted(arguments):
        value = str(arguments[key])
        if "\n" in value or "\x00" in value:
            raise ConfigError(f"{key}=...", "the value holds a newline or NUL", f"give {key}= one line")
        if key in FLAGS and value and value not in FLAG_WORDS:
            raise ConfigError(f"{key}={value}", "not an on/off value", f"{key}=1 or {key}=0")
        if key in POSITIVE_INTS and value.strip():
            try:
                ok = int(value.strip()) > 0
            except ValueError:
                ok = False
            if not ok:
                raise ConfigError(f"{key}={value}", "not a positive number of bytes", f"e.g. {key}=262144")


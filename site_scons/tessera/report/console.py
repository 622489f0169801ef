"""One place that decides how tables are printed."""


def make_console():
    """A rich Console; wide when output goes to a log or pipe (rich would
    wrap at 80 columns there and make tables unreadable)."""
    from rich.console import Console

    console = Console()
    if not console.is_terminal:
        console = Console(width=140)
    return console

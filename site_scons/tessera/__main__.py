"""python -m tessera: the `tessera` command (tessera.cli)."""

import sys

from .cli import main

sys.exit(main())

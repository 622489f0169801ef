"""Shared pytest setup: the library lives in site_scons/."""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "site_scons"))

# Property tests draw the same examples on every run, so CI's verdict is a
# function of the code; `pytest --hypothesis-profile=explore` draws new ones.
from hypothesis import settings  # noqa: E402

settings.register_profile("default", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile("default")

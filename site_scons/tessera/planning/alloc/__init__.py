"""Static memory planning: every buffer gets its offset at build time.

plan_level: activation buffers of one level (L2) from their lifetimes.
l1_layout:  the L1 regions of one tiled layer.

ALLOC_VERSION goes into the build signature of every step that uses a plan;
bump it whenever the same input could give a different plan.
"""

from .l1 import l1_layout
from .level import plan_level

ALLOC_VERSION = "2"

__all__ = ["ALLOC_VERSION", "l1_layout", "plan_level"]

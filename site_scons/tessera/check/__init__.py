"""Checking a run: the firmware's output parsed (runlog) and compared
layer by layer with the golden model and a peer's reference files
(verdict)."""

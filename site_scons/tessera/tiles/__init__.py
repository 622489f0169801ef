"""The tiles of a layer: which output box each tile computes, the input
it reads and its padding, in execution order (geometry). The tiler sizes
the tiles; the planner, the hazard replay, the cost model, the code
generator and the out-of-core program walk the same tiles from here."""

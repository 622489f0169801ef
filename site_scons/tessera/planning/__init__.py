"""The memory plan: every buffer's place and offset, decided at build time.

    memplan     the plan of a network: activations, weights, tiles, spills,
                the weight stream; memplan.json and each layer's slice
    alloc       static allocators (offsets from lifetimes: greedy, CP-SAT)
    overlap     segment-level overlap: how far a layer's output may start
                below its consumed input, which layers run in row bands
    inplace     layers run in place from the activation buffers ("direct")
    hazard      the replay that proves a plan safe before code is generated
    guard       the free ranges a guard=1 harness fills and checks
    rambudget   ram_cap: the largest tile budget whose plan fits the cap
"""

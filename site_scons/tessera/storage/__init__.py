"""Out-of-core execution: the network's data in external storage, tiles
moved through SRAM pools by a static IO/compute program
(docs/out_of_core.md).

tasks.py     the problem and its task graph (reads, computes, writes)
schedule.py  the build-time scheduler (SwapNN's Algorithm 1, static)
replay.py    the program's timeline and the checker that proves it safe
estimate.py  latency, unlimited-SRAM latency, throughput, per-layer intensity
costs.py     task costs: storage level and cost model
chain.py     synthetic VGG/AlexNet-like chains for tests and measurements
exact.py     CP-SAT on small graphs (opt-in), to compare with the list scheduler
timeline.py  the schedule drawn as inline SVG
"""

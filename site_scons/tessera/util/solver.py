"""The one way tessera runs CP-SAT (the tilers, the allocator, the IO
scheduler's exact search): answers that depend only on the model, never on
the machine or on a Ctrl-C."""

from ortools.sat.python import cp_model


def deterministic_solver(seed, work_limit):
    """A CpSolver with one worker, a fixed seed and a bound in CP-SAT's
    deterministic time units (its own work count, not wall clock).

    CP-SAT would otherwise catch Ctrl-C and return its best answer so far as
    if the work bound had ended the search, and the build would record it
    as done. Left to Python, the signal reaches SCons, which lets the solve
    finish and then stops the build with an error."""
    solver = cp_model.CpSolver()
    p = solver.parameters
    p.num_workers = 1
    p.random_seed = seed
    p.max_deterministic_time = float(work_limit)
    p.log_search_progress = False
    p.catch_sigint_signal = False
    return solver


def lean_search(solver):
    """Turn off CP-SAT's presolve, probing, inprocessing and LP relaxation:
    for the tilers' small models (three tile sizes through tables) they
    cost most of the solve and prune little (mbv1_128's 19 distinct layers
    on host: 2.1 s -> about 0.2 s; 8x over every bundled model, target and
    L1 at 1, 1/2 and 1/5 of its size). Only for models whose optimum is
    unique (the tilers break ties): the answer is then the same whatever
    the search, only faster to prove, and it is still proven."""
    p = solver.parameters
    p.cp_model_presolve = False
    p.cp_model_probing_level = 0
    p.use_sat_inprocessing = False
    p.linearization_level = 0
    return solver

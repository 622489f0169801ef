"""Running a sweep's points on an existing engine: local processes
(concurrent.futures, bounded by cores and memory) or Ray tasks on a cluster
(`ray=ADDRESS`). Each point is an ordinary build in its own folder with the
shared cache; the driver writes each finished point's result file
(atomically), so an interrupted sweep resumes with the missing points only.
"""

import concurrent.futures
import os
import socket

from ..errors import TesseraError
from . import point as sweep_point

# a QEMU build of a MobileNet takes about 1 GiB at its peak (the compiler,
# the model stage, QEMU): no more workers than the free memory holds
POINT_MEMORY = 1 << 30


def default_jobs():
    """Points at once on this machine: the cores, fewer when memory is short."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return cores
    return max(1, min(cores, free // POINT_MEMORY))


def _guarded(point, sweep_dir, cache):
    """run_point, with an unexpected exception turned into the point's
    one-line error (a sweep records it and goes on)."""
    try:
        return sweep_point.run_point(point, sweep_dir, cache)
    except Exception as err:   # noqa: BLE001  (recorded, not hidden: the point's error)
        return {"id": point["id"], "digest": None, "status": "failed",
                "error": f"{err.__class__.__name__}: {' '.join(str(err).split())}"}


def run(spec, points, sweep_dir, cache=None, jobs=None, ray=None, on_result=None):
    """Run the points not done yet; return every point's result, in the
    points' order. `on_result(point, result, fresh)` is called as each one
    is known (done before: fresh False)."""
    sweep_dir = os.path.abspath(sweep_dir)
    results, todo = {}, []
    for p in points:
        done = sweep_point.read_result(sweep_dir, p)
        if done is not None:
            results[p["id"]] = done
            if on_result:
                on_result(p, done, False)
        else:
            todo.append(p)

    def finish(p, result):
        if result.get("digest") is None:
            result["digest"] = sweep_point.sweep_spec.digest(p)
        sweep_point.write_result(sweep_dir, p, result)
        results[p["id"]] = result
        if on_result:
            on_result(p, result, True)

    if todo:
        if ray:
            _run_ray(todo, sweep_dir, cache, ray, finish)
        else:
            _run_local(todo, sweep_dir, cache, jobs or default_jobs(), finish)
    return [results[p["id"]] for p in points]


def _run_local(todo, sweep_dir, cache, jobs, finish):
    with concurrent.futures.ProcessPoolExecutor(max_workers=max(1, min(jobs, len(todo)))) as pool:
        futures = {pool.submit(_guarded, p, sweep_dir, cache): p for p in todo}
        for fut in concurrent.futures.as_completed(futures):
            finish(futures[fut], fut.result())


def _reachable(address):
    """Ray retries an address that does not answer for ever: a host:port
    that refuses a connection is one line at once."""
    hostport = address.split("://", 1)[-1]
    host, _, port = hostport.rpartition(":")
    if address == "auto" or not port.isdigit():
        return
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=10).close()
    except OSError as err:
        raise TesseraError(f"--ray {address}", f"no Ray cluster answers there ({err.strerror or err})",
                           "start one (ray start --head --port=6379) or give its address") from None


def _run_ray(todo, sweep_dir, cache, address, finish):
    try:
        import ray
    except ImportError:
        raise TesseraError("--ray", "Ray is not installed", "pip install ray, or run without --ray") from None
    _reachable(address)
    # workers import tessera from this same folder (a shared file system, as
    # for the sweep folder and the cache): the checkout's or the install's
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        ray.init(address=address, runtime_env={"env_vars": {"PYTHONPATH": here}}, log_to_driver=False,
                 logging_level="ERROR")
    except (ConnectionError, RuntimeError, ValueError) as err:
        raise TesseraError(f"--ray {address}", f"cannot connect to the Ray cluster ({' '.join(str(err).split())[:200]})",
                           "start one (ray start --head) or give its address") from None
    try:
        task = ray.remote(num_cpus=1, max_retries=0)(_guarded)
        pending = {task.remote(p, sweep_dir, cache): p for p in todo}
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                p = pending.pop(ref)
                try:
                    result = ray.get(ref)
                except Exception as err:   # noqa: BLE001  (a worker that died: the point's error)
                    result = {"id": p["id"], "digest": None, "status": "failed",
                              "error": f"Ray task failed: {' '.join(str(err).split())[:300]}"}
                finish(p, result)
    finally:
        ray.shutdown()

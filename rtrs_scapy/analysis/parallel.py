"""Many capture files of one capture, analysed in parallel: map on the local
cores or on a Dask cluster, reduce in this process.

The map (``analysis.parts.map_file``) runs one file through the engine's
transport with a fresh state and returns a picklable part: its completed
messages, CM MADs, anomalies and the state at its edges.  The reduce
(``analysis.parts.reduce_parts``) stitches the parts in time order and runs
the analysis over them, so the result equals ``analyze(files)``: the same
counts, pairs and latencies, also for an IO whose request and response lie in
two files.  Only the parts travel (to the process that reduces); the capture
files are read where the map runs, so on a cluster every worker must see them
under the same path.

The map/reduce needs files that follow each other in time (a ring buffer,
``tcpdump -C/-W/-G``).  Files that overlap in time (the same traffic captured
on two hosts) are merged frame by frame by ``analyze(files)`` instead, in
this process: the parts say so (their time ranges overlap) and are dropped.
"""

import contextlib
import os
import sys

from ..engine.ahead import usable_cores


def follow_each_other(parts):
    """Whether the parts' time ranges are disjoint (a ring buffer's files)."""
    spans = sorted((p.first_stamp, p.last_stamp) for p in parts if p.first_stamp is not None)
    return all(later[0] >= earlier[1] for earlier, later in zip(spans, spans[1:]))


class Runner:
    """``analyze(inputs, keep_messages, queue_depth, io_sink, progress, until_frame,
    keep_latencies)`` that maps
    the files of ``inputs`` with ``map_many(files) -> parts`` and reduces here.

    One file, or standard input, is analysed here directly: nothing to split."""

    def __init__(self, map_many, warn=None):
        self.map_many = map_many
        self.warn = warn or (lambda text: print(text, file=sys.stderr))
        self.mapped = 0          # files mapped in parallel by the last call

    def __call__(self, inputs, keep_messages=True, queue_depth=None, io_sink=None,
                 progress=None, until_frame=None, keep_latencies=True):
        from . import analyze
        self.mapped = 0
        whole = dict(keep_messages=keep_messages, queue_depth=queue_depth, io_sink=io_sink,
                     progress=progress, until_frame=until_frame, keep_latencies=keep_latencies)
        single = isinstance(inputs, (str, os.PathLike))
        if single and (inputs == "-" or not os.path.isdir(inputs)) or until_frame is not None:
            return analyze(inputs, **whole)
        from .parts import reduce_parts
        from ..capture.inputs import expand
        files = expand([inputs] if single else inputs)
        if len(files) < 2 or "-" in files:
            return analyze(files, **whole)
        parts = self.map_many(files)
        if not follow_each_other(parts):
            self.warn("the files overlap in time (several hosts?): merged frame by frame "
                      "in one process")
            return analyze(files, **whole)
        self.mapped = len(files)
        return reduce_parts(parts, keep_messages=keep_messages, queue_depth=queue_depth,
                            io_sink=io_sink, keep_latencies=keep_latencies)


def _map_file(path):
    from .parts import map_file
    return map_file(path)


@contextlib.contextmanager
def local_runner(jobs=None):
    """A Runner mapping on ``jobs`` local processes (default: every core this process
    may use); one job maps the files one after the other in this process."""
    jobs = jobs or usable_cores()
    pool = []

    def map_many(files):
        if jobs == 1:
            return [_map_file(f) for f in files]
        if not pool:
            # imported here: 10 ms (logging, multiprocessing) that one file never needs
            from concurrent.futures import ProcessPoolExecutor
            pool.append(ProcessPoolExecutor(min(jobs, len(files))))
        return list(pool[0].map(_map_file, files))

    try:
        yield Runner(map_many)
    finally:
        if pool:
            pool[0].shutdown()


@contextlib.contextmanager
def dask_runner(address, workers=None):
    """A Runner mapping with Dask futures: on the scheduler at ``address``, or on a
    ``LocalCluster`` of ``workers`` processes (default: every core this process may use)
    for ``local``."""
    from distributed import Client, LocalCluster
    with contextlib.ExitStack() as stack:
        if address == "local":
            cluster = stack.enter_context(LocalCluster(
                n_workers=workers or usable_cores(), threads_per_worker=1,
                processes=True, host="127.0.0.1", dashboard_address="127.0.0.1:0"))
            client = stack.enter_context(Client(cluster))
        else:
            client = stack.enter_context(Client(address))

        def map_many(files):
            futures = client.map(_map_file, files, pure=False)
            return client.gather(futures)

        yield Runner(map_many)

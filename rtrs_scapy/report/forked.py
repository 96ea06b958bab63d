"""Blocks of output made on every core (``messages``' lines): where processes start
by fork, the parent makes every n-th block and a forked worker each of the others,
sent through a pipe.

The workers read what the parent holds (the analysis' records) without a copy, and
nothing of the parent's exit runs in them.  A fork copies only the thread that
forks: a caller asks for the first block before it starts threads of its own, so
that no lock another thread holds is copied held.
"""

import contextlib
import os
import signal

from ..engine.ahead import usable_cores

try:
    from fcntl import F_SETPIPE_SZ, fcntl
except ImportError:         # not Linux: pipes of the system's size
    F_SETPIPE_SZ = None

#: the size asked for each worker's pipe (Linux; its default limit for a process without
#: privileges): a block is a few MB, and each time the pipe is full or empty the worker
#: and this process take turns; with the default 64 KiB, those switches cost the JSON
#: lines of 3 M load packets a sixth of their time (docs/benchmarks.md)
PIPE_BYTES = 1 << 20


def blocks(make, count):
    """``make(k)`` (bytes) for k in range(count), in order, made on every core the
    process may use: where processes start by fork, this process makes every n-th
    block and a forked worker each of the others, sent through a pipe (whose capacity
    bounds how far a worker runs ahead: what waits does not grow with the output).  The
    workers read what the parent holds without a copy.  A block a worker could not
    send is made here."""
    stride = usable_cores() if hasattr(os, "fork") else 1
    if stride < 2 or count < 2 * stride:
        yield from map(make, range(count))
        return
    pipes = {}
    try:
        for i in range(1, stride):
            try:
                pid, read = _fork(make, range(i, count, stride), pipes)
            except OSError:     # no more processes (a limit): the rest is made here
                break
            pipes[i] = (pid, read)
        for k in range(count):
            i = k % stride
            yield (i in pipes and _receive(pipes[i][1])) or make(k)
    finally:
        for pid, stream in pipes.values():
            stream.close()
            with contextlib.suppress(ProcessLookupError, ChildProcessError):  # gone already
                os.kill(pid, signal.SIGTERM)
                os.waitpid(pid, 0)


def _fork(make, ks, others):
    """A worker making the blocks ``ks``: its pid and the pipe it sends them through."""
    read, write = os.pipe()
    if F_SETPIPE_SZ is not None:
        with contextlib.suppress(OSError):  # a lower limit (fs.pipe-max-size): as it is
            fcntl(write, F_SETPIPE_SZ, PIPE_BYTES)
    try:
        pid = os.fork()
    except OSError:
        os.close(read)
        os.close(write)
        raise
    if pid == 0:
        os.close(read)
        _serve(make, ks, write, others)
    os.close(write)
    return pid, os.fdopen(read, "rb")


def _serve(make, ks, fd, others):
    """A forked worker: the blocks ``ks``, each after its length, into ``fd``; never
    returns (nothing of the parent's exit runs here)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)    # Ctrl-C is the parent's to handle
    for _, stream in others.values():
        stream.close()
    try:
        with os.fdopen(fd, "wb") as out:
            for k in ks:
                block = make(k)
                out.write(len(block).to_bytes(8, "little"))
                out.write(block)
    finally:
        os._exit(0)


def _receive(stream):
    """The next block of a worker's pipe, or None: the worker is gone."""
    size = stream.read(8)
    if len(size) < 8:
        return None
    size = int.from_bytes(size, "little")
    block = stream.read(size)
    return block if len(block) == size else None

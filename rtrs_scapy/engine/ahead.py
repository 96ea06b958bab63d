"""Reading ahead on the other core.

Walking the records and decoding their headers (numba, without the GIL) and
decompressing gzip (zlib, without the GIL) run in a thread of their own while
the main thread runs the transport and the analysis on the chunks already
read.  A bounded queue keeps at most ``depth`` chunks in memory, each up to 8 MB of
the file mapped.  The two threads take about as long over a chunk on average, but the
main thread's pace is uneven: most chunks only go through the transport, every fifth or
so also hands a batch of messages to the analysis, several times as long.  Three queued
chunks let the reader bank what it walks during those batches (docs/benchmarks.md);
with two, the main thread waited for chunks a fifth of its time.  A fourth saves a
little more, but its 8 MB would take the largest export of many short sessions at 10 M
packets past 300 MB.  With three the main thread still waited for chunks a fifth of the
analysis, and the reader for room as long: when no chunk is ready the main thread hands
its batch of messages to the analysis early (``idle``), in time that waiting would
have taken.

On one core (``taskset -c 0``, a container given one CPU) the two threads could only
take turns: the records are then walked in the consumer's thread as it asks for them,
and a chunk's columns are still in the cache when the transport reads them: the summary
of the 3 M-packet load benchmark took a tenth less (docs/benchmarks.md, "One core, one
thread").
"""

import collections
import os
import queue
import threading

_END = object()
#: chunks queued ahead of the consumer (the module's docstring says why three)
DEPTH = 3


def usable_cores():
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def ahead(iterable, depth=DEPTH, behind=None, idle=None):
    """Iterate ``iterable`` in a background thread; items come out in order, an
    exception comes out where it happened.  Stopping early stops the thread.

    ``behind(item)`` is called in the background thread on each item the consumer
    is through with: once ``depth`` later items are queued, the consumer has asked
    for the next one (releasing a mapped file's pages costs the main thread nothing).
    ``idle()`` is called in the consumer's thread before it waits for an item that
    is not ready yet.  On one core, no thread: see the module's docstring."""
    if usable_cores() == 1:
        return _in_turn(iterable, behind)
    return _read_ahead(iterable, depth, behind, idle)


def _in_turn(iterable, behind):
    """The items made as the consumer asks for them; ``behind(item)`` once it asks for
    the next one.  Nothing is ever waited for, so ``idle`` has no moment to run in."""
    for item in iterable:
        yield item
        if behind is not None:
            behind(item)


def _read_ahead(iterable, depth, behind, idle):
    items = queue.Queue(maxsize=depth)
    stop = threading.Event()
    handed = collections.deque()

    def hand(entry):
        """Queue ``entry`` unless the consumer has stopped; True when queued.
        Every put waits this way, the last one too: a consumer that stops with
        the queue full would otherwise wait for a producer that waits for room."""
        while not stop.is_set():
            try:
                items.put(entry, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce():
        try:
            for item in iterable:
                if not hand((item, None)):
                    return
                if behind is not None:
                    handed.append(item)
                    if len(handed) > depth + 1:
                        behind(handed.popleft())
            hand((_END, None))
        except BaseException as exc:  # handed to the consumer, raised there
            hand((_END, exc))

    thread = threading.Thread(target=produce, name="rtrs-read-ahead", daemon=True)
    thread.start()
    try:
        while True:
            if idle is not None and items.empty():
                idle()
            item, exc = items.get()
            if exc is not None:
                raise exc
            if item is _END:
                return
            yield item
    finally:
        stop.set()
        thread.join()

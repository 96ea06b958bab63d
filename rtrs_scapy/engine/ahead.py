"""Reading ahead on the other core.

Walking the records and decoding their headers (numba, without the GIL) and
decompressing gzip (zlib, without the GIL) run in a thread of their own while
the main thread runs the transport and the analysis on the chunks already
read.  A bounded queue keeps at most ``depth`` chunks in memory: two keep the main
thread fed (more made no summary faster) and each is up to 8 MB of the file mapped.
"""

import collections
import queue
import threading

_END = object()


def ahead(iterable, depth=2, behind=None):
    """Iterate ``iterable`` in a background thread; items come out in order, an
    exception comes out where it happened.  Stopping early stops the thread.

    ``behind(item)`` is called in the background thread on each item the consumer
    is through with: once ``depth`` later items are queued, the consumer has asked
    for the next one (releasing a mapped file's pages costs the main thread nothing)."""
    items = queue.Queue(maxsize=depth)
    stop = threading.Event()
    handed = collections.deque()

    def produce():
        try:
            for item in iterable:
                while not stop.is_set():
                    try:
                        items.put((item, None), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
                if behind is not None:
                    handed.append(item)
                    if len(handed) > depth + 1:
                        behind(handed.popleft())
            items.put((_END, None))
        except BaseException as exc:  # handed to the consumer, raised there
            items.put((_END, exc))

    thread = threading.Thread(target=produce, name="rtrs-read-ahead", daemon=True)
    thread.start()
    try:
        while True:
            item, exc = items.get()
            if exc is not None:
                raise exc
            if item is _END:
                return
            yield item
    finally:
        stop.set()
        thread.join()

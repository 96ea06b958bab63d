"""Cutting the input into intervals.

A capture file follows its own clock: an interval ends when a record is stamped
at or past its end, so the intervals are the capture's seconds whether it is
read as fast as possible or replayed at its pace (``speed``: capture seconds
per wall-clock second).  A gap of more than ``MAX_GAP`` intervals (captures
concatenated, a night without traffic) is skipped, not filled with empty
intervals.  Its records are walked and decoded ahead on the other core
(engine/ahead.py).  Live input (a pipe, an interface) follows the wall clock: an
interval ends every ``seconds`` whether packets came or not, so the records are
read in a thread of their own.
"""

import queue
import threading
import time

import numpy as np

from ..capture.files import Chunk
from ..engine.ahead import ahead

MAX_GAP = 60            # intervals
NS = 1_000_000_000
_END = object()


def part(chunk, a, b):
    """Records ``a:b`` of a chunk as a chunk of their own."""
    if a == 0 and b == len(chunk):
        return chunk
    return Chunk(chunk.data, chunk.buf, chunk.first_frame + a, chunk.offs[a:b],
                 chunk.caplens[a:b], chunk.stamps[a:b], chunk.links[a:b], chunk.packets[a:b],
                 extra=chunk.extra[a:b])


class _Stop(Exception):
    pass


def capture_intervals(capture, watcher, seconds, speed=None, stop=None, records=8192):
    """Intervals of a capture file on its own clock (``speed`` None: no waiting)."""
    step = int(seconds * NS)
    boundary = origin = None
    wall0 = None
    last_stamp = None

    def wait(stamp_ns):
        if speed is None:
            return
        delay = wall0 + (stamp_ns - origin) / NS / speed - time.monotonic()
        if stop is not None:
            if stop.wait(max(delay, 0)):
                raise _Stop
        elif delay > 0:
            time.sleep(delay)

    try:
        # the records walked and decoded on the other core, as the analysis reads them
        for chunk in ahead(capture.chunks(records), behind=capture.done,
                           idle=watcher.engine.flush_waiting):
            stamps = chunk.stamps
            start, n = 0, len(chunk)
            while start < n:
                if boundary is None:
                    origin, wall0 = int(stamps[start]), time.monotonic()
                    boundary = origin + step
                later = np.flatnonzero(stamps[start:] >= boundary)
                cut = n if not len(later) else start + int(later[0])
                if cut > start:
                    watcher.feed(part(chunk, start, cut))
                    last_stamp = int(stamps[cut - 1])
                start = cut
                if cut == n:
                    break
                wait(boundary)
                yield watcher.interval(boundary / NS, seconds)
                boundary += step
                gap = int(stamps[cut]) - boundary
                if gap >= MAX_GAP * step:       # skip the gap
                    wall0 -= (gap - gap % step) / NS / (speed or 1)
                    boundary += gap - gap % step
                while int(stamps[cut]) >= boundary:
                    wait(boundary)
                    yield watcher.interval(boundary / NS, seconds)
                    boundary += step
            if stop is not None and stop.is_set():
                return
        if boundary is None:
            yield watcher.interval(time.time(), 0.0, final=True)
            return
        end = max(last_stamp, boundary - step)
        wait(end)
        yield watcher.interval(end / NS, (end - (boundary - step)) / NS, final=True)
    except _Stop:
        return


def live_intervals(capture, watcher, seconds, stop=None, records=8192):
    """Intervals of the wall clock; the records are read in a thread."""
    items = queue.Queue(maxsize=16)

    def read():
        try:
            for chunk in capture.chunks(records):
                items.put(chunk)
            items.put(_END)
        except BaseException as exc:     # raised where the intervals are consumed
            items.put(exc)
        finally:
            capture.close()

    threading.Thread(target=read, name="rtrs-watch-reader", daemon=True).start()
    started = last = time.time()
    tick = time.monotonic() + seconds
    while stop is None or not stop.is_set():
        timeout = tick - time.monotonic()
        if timeout <= 0:
            now = time.time()
            yield watcher.interval(now, now - last)
            last = now
            tick += seconds
            if tick < time.monotonic():     # fell behind: start the beat again
                tick = time.monotonic() + seconds
            continue
        try:
            item = items.get(timeout=min(timeout, 0.25))
        except queue.Empty:
            continue
        if item is _END:
            now = time.time()
            yield watcher.interval(now, now - last if now > started else 0.0, final=True)
            return
        if isinstance(item, BaseException):
            raise item
        watcher.feed(item)
        capture.done(item)

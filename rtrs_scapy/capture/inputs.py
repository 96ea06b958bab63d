"""The inputs of one capture as production hands them over: a file, ``-``
(standard input: a ``tcpdump -w - |`` pipe), a directory (the capture files in
it), or several of those, merged in time order whatever order they are given
in (a ``tcpdump -C/-W/-G`` ring buffer, or the files of two hosts).

Merging is a k-way merge on the record timestamps that hands out slices of
each file's chunks, so the bytes are never copied.  Frames are numbered in the
merged capture, as ``mergecap`` would number them.

The same traffic captured on two hosts is counted once: a frame that another
file already holds (the same bytes from the BTH on, or the same frame for
non-IB traffic) within ``dedup_window`` seconds is a duplicate of the capture,
not a go-back-N retransmission, and it is dropped (``duplicates``).  Within one
file identical frames stay: there they are retransmissions.  Two hosts' clocks
differ: a file whose first records match the first file's is shifted by the
median difference of the matched timestamps (``clock_offsets``), so that the
copies fall together and a frame one host missed takes its place in order.
"""

import heapq
import os
from dataclasses import replace

import numpy as np

from .files import CHUNK_RECORDS, Capture, CaptureError, CutRecords, open_capture
from .columns import P_KIND, P_VIS, X_BTH
from .jit import compiled

#: two copies of a frame on different hosts are at most this far apart (seconds),
#: once their clocks are aligned
DEDUP_WINDOW = 0.005
MIN_MATCHES = 8   # shared frames needed to measure two files' clock offset
#: two hosts' clocks (NTP, PTP) differ by less; frames alike further apart are not
#: the same frames (a capture repeated, as the benchmarks build them)
MAX_CLOCK_OFFSET_NS = 1_000_000_000


def expand(paths):
    """The capture files of the given arguments: files, ``-``, directories (their
    regular files, sorted by name; files that are no capture are skipped)."""
    files = []
    for path in paths:
        path = os.fspath(path)
        if path != "-" and os.path.isdir(path):
            entries = sorted(os.path.join(path, n) for n in os.listdir(path))
            found = [e for e in entries if os.path.isfile(e) and _is_capture(e)]
            if not found:
                raise CaptureError("%s: a directory without capture files" % path)
            files.extend(found)
        else:
            files.append(path)
    return files


def _is_capture(path):
    try:
        with open_capture(path):
            return True
    except CaptureError:
        return False


def open_inputs(paths, dedup_window=DEDUP_WINDOW):
    """One :class:`Capture` for a single file, else a :class:`Merged` capture."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    files = expand(paths)
    if len(files) == 1:
        return open_capture(files[0])
    return Merged(files, dedup_window)


class Merged:
    """Several captures read as one, in time order (the Capture interface)."""

    def __init__(self, files, dedup_window=DEDUP_WINDOW):
        if files.count("-") > 1:
            raise CaptureError("standard input can be read only once")
        self.captures = []
        try:
            for path in files:
                self.captures.append(open_capture(path))
        except CaptureError:
            self.close()
            raise
        self.path = ", ".join(c.path for c in self.captures)
        self.window = int(dedup_window * 1e9)
        first = self.captures[0]
        self.link_type = first.link_type
        self.fmt = "+".join(sorted({c.fmt for c in self.captures}))
        totals = [c.bytes_total for c in self.captures]
        self.bytes_total = None if None in totals else sum(totals)
        self.snaplen = max(c.snaplen for c in self.captures)
        self.frames = 0
        self.duplicates = 0
        self.clock_offsets = [0] * len(self.captures)   # ns subtracted, per file
        self._started = False

    @property
    def files(self):
        return [c.path for c in self.captures]

    @property
    def truncated(self):
        return any(c.truncated for c in self.captures)

    @property
    def cut(self):
        """The records the snaplen cut, over all files."""
        total = CutRecords()
        for c in self.captures:
            total.merge(c.cut)
        return total

    @property
    def problems(self):
        """The files' problems, each naming its file; frames are the file's own."""
        return [(frame, kind, "%s: %s" % (c.path, detail))
                for c in self.captures for frame, kind, detail in c.problems]

    @property
    def link_name(self):
        return self.captures[0].link_name

    def position(self):
        return sum(c.position() for c in self.captures)

    def done(self, part):
        """Pages of a file go once the last slice of its chunk is through."""
        origin = part.origin
        if part.offs[-1] == origin.offs[-1]:
            part.capture.done(origin)

    def close(self):
        for capture in self.captures:
            capture.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def chunks(self, records=CHUNK_RECORDS):
        """Slices of the files' chunks, in time order (ties: the order of the files)."""
        if self._started:
            raise RuntimeError("a Capture can be read only once; open it again")
        self._started = True
        streams = [c.chunks(records) for c in self.captures]
        heads = []
        for index, stream in enumerate(streams):
            self._push(heads, index, stream)
        self._align(heads)
        recent = _Recent(self.window)
        last = [None] * len(streams)      # the last stamp handed out, per file
        while heads:
            stamp, index, at, chunk = heapq.heappop(heads)
            limit = heads[0][0] if heads else None
            stop = len(chunk) if limit is None else int(
                np.searchsorted(chunk.stamps, limit, side="right" if index < heads[0][1]
                                else "left"))
            stop = max(stop, at + 1)
            near = self._near(last, index, heads, stamp, int(chunk.stamps[stop - 1]))
            part = self._slice(chunk, at, stop, index, recent if near else None)
            last[index] = int(chunk.stamps[stop - 1])
            if part is not None:
                yield part
            if stop < len(chunk):
                heapq.heappush(heads, (int(chunk.stamps[stop]), index, stop, chunk))
            else:
                self._push(heads, index, streams[index])

    def _near(self, last, index, heads, first, final):
        """Whether another file has frames within the window of first..final (only
        then can a frame be a copy of another file's)."""
        before = [s for i, s in enumerate(last) if i != index and s is not None]
        after = [h[0] for h in heads if h[1] != index]
        return bool((before and first - max(before) <= self.window)
                    or (after and min(after) - final <= self.window))

    def _push(self, heads, index, stream):
        for chunk in stream:
            if len(chunk):
                chunk.capture = self.captures[index]
                if self.clock_offsets[index]:
                    chunk.stamps = chunk.stamps - self.clock_offsets[index]
                heapq.heappush(heads, (int(chunk.stamps[0]), index, 0, chunk))
                return

    def _align(self, heads):
        """Clock offsets of the files against the first one, from the frames their
        first chunks share, for the files whose first chunk lies beside the first
        file's in time (others, like a ring buffer's files: offset 0)."""
        first = {h[1]: h[3] for h in heads}
        if 0 not in first:
            return
        ref = dict(zip(_prints(first[0]).tolist(), first[0].stamps.tolist()))
        low = int(first[0].stamps[0]) - MAX_CLOCK_OFFSET_NS
        high = int(first[0].stamps[-1]) + MAX_CLOCK_OFFSET_NS
        for index, chunk in first.items():
            if not index or chunk.stamps[0] > high or chunk.stamps[-1] < low:
                continue     # not beside the first file in time: a ring buffer's next one
            diffs = [stamp - ref[fp] for fp, stamp in zip(_prints(chunk).tolist(),
                                                          chunk.stamps.tolist()) if fp in ref]
            offset = int(np.median(diffs)) if len(diffs) >= MIN_MATCHES else 0
            if abs(offset) <= MAX_CLOCK_OFFSET_NS:
                self.clock_offsets[index] = offset
                chunk.stamps = chunk.stamps - offset
        heads[:] = [(int(c.stamps[0]), i, 0, c) for i, c in first.items()]
        heapq.heapify(heads)

    def _slice(self, chunk, start, stop, index, recent):
        """Records start..stop of a chunk as a chunk of the merged capture, without the
        frames another file already had (``recent``: None when none can be)."""
        keep = recent.filter(chunk, start, stop, index) if recent is not None else None
        pick = slice(start, stop) if keep is None else np.arange(start, stop)[keep]
        count = stop - start if keep is None else int(np.count_nonzero(keep))
        self.duplicates += stop - start - count
        if not count:
            return None
        part = replace(chunk, first_frame=self.frames + 1, offs=chunk.offs[pick],
                       caplens=chunk.caplens[pick], stamps=chunk.stamps[pick],
                       links=chunk.links[pick], packets=chunk.packets[pick],
                       extra=chunk.extra[pick],
                       origlens=None if chunk.origlens is None else chunk.origlens[pick])
        part.capture, part.origin = chunk.capture, chunk
        self.frames += count
        return part


class _Recent:
    """Fingerprints of the frames of the last ``window`` ns, with the file they came
    from: a frame another file already brought within the window is a duplicate."""

    def __init__(self, window):
        self.window = window
        self.seen = {}            # fingerprint -> (file index, stamp)
        self.order = []           # (stamp, fingerprint) in arrival order, for expiry
        self.head = 0

    def filter(self, chunk, start, stop, index):
        prints = _prints(chunk, start, stop)
        stamps = chunk.stamps[start:stop]
        keep = np.ones(stop - start, dtype=bool)
        seen, order = self.seen, self.order
        for k, (fp, stamp) in enumerate(zip(prints.tolist(), stamps.tolist())):
            while self.head < len(order) and order[self.head][0] < stamp - self.window:
                old_stamp, old_fp = order[self.head]
                if seen.get(old_fp, (None, None))[1] == old_stamp:
                    del seen[old_fp]
                self.head += 1
            known = seen.get(fp)
            if known is not None and known[0] != index and stamp - known[1] <= self.window:
                keep[k] = False
                continue
            seen[fp] = (index, stamp)
            order.append((stamp, fp))
        if self.head > 4096 and self.head > len(order) // 2:
            del order[:self.head]
            self.head = 0
        return keep


def _prints(chunk, start=0, stop=None):
    stop = len(chunk) if stop is None else stop
    return _fingerprints(chunk.buf, chunk.offs[start:stop], chunk.caplens[start:stop],
                         chunk.packets[start:stop], chunk.extra[start:stop])


@compiled(allocates=True)
def _fingerprints(buf, offs, caplens, packets, extra):
    """FNV-1a of each frame's IB packet from the BTH on (the part both hosts see
    alike), or of the whole frame when it is no IB packet."""
    n = offs.shape[0]
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        if packets[i, P_KIND]:
            start, end = extra[i, X_BTH], packets[i, P_VIS]
        else:
            start, end = offs[i], offs[i] + caplens[i]
        h = np.uint64(0xCBF29CE484222325)
        for p in range(start, end):
            h = (h ^ np.uint64(buf[p])) * np.uint64(0x100000001B3)
        out[i] = np.int64(h)
    return out


__all__ = ["Capture", "CaptureError", "Merged", "expand", "open_inputs", "DEDUP_WINDOW"]

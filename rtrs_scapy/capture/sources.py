"""Byte sources of a capture: the mapped file, a stream (pipe, stdin) read in
chunks, and gzip decompressed as a stream.

A source hands out ``data`` (an ``mmap`` or a ``bytes`` chunk) and ``end``;
``refill(p, need)`` keeps ``data[p:]`` and reads until ``need`` bytes follow
(or the input ends); ``release_before(upto)`` lets a mapped file drop pages
already read, so the process's memory stays flat with the file size.
"""

import ctypes
import mmap
import zlib

import numpy as np

#: Read size for gzip and non-seekable inputs (decompressed bytes per refill).
CHUNK = 4 * 1024 * 1024
#: Compressed bytes read from the file at a time.
GZ_IN_CHUNK = 1024 * 1024
#: mmap: drop already-read pages from the process every this many bytes.  Each drop
#: interrupts the other core to flush its address translations (the main thread's, while
#: the reader's thread drops): every 2 MiB, once a chunk, it cost the summary of 3 M
#: packets 15-30 ms.  The peak grows by the pages held longer (docs/benchmarks.md).
RELEASE_EVERY = 16 * 1024 * 1024


def _libc_madvise():
    """The C library's ``madvise`` through ctypes, which lets go of the GIL while it
    runs (``mmap.madvise`` holds it: 60 ms of a 3 M-packet summary in which the main
    thread's Python waited for the reader's thread); None where there is none."""
    try:
        madvise = ctypes.CDLL(None, use_errno=True).madvise
    except (AttributeError, OSError, TypeError):
        return None
    madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    madvise.restype = ctypes.c_int
    return madvise


_madvise = _libc_madvise()


class MapSource:
    """The whole (uncompressed, regular) file mapped in memory."""

    base = 0
    error = None

    def __init__(self, f):
        self.data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        self._released = 0
        self._can_release = (hasattr(self.data, "madvise")
                             and hasattr(mmap, "MADV_DONTNEED"))
        # where the mapping starts, for _madvise (a view's address, the view let go:
        # the mapping could not be closed while one is alive)
        self._address = np.frombuffer(self.data, dtype=np.uint8).ctypes.data \
            if len(self.data) else None
        if self._can_release and hasattr(mmap, "MADV_SEQUENTIAL"):
            try:
                self.data.madvise(mmap.MADV_SEQUENTIAL)
            except (OSError, ValueError):  # pragma: no cover
                pass
        self.end = len(self.data)

    def refill(self, p, need):
        return self.data, p, self.end

    def release_before(self, upto):
        """Unmap the pages before ``upto`` from this process (RSS stays flat), every
        RELEASE_EVERY bytes.

        The mapping is read-only and shared: the pages stay in the page cache
        and fault back in if the caller reads them again, so offsets already
        handed out remain valid.
        """
        if self._can_release and upto >= self._released + RELEASE_EVERY:
            b = upto - upto % mmap.PAGESIZE
            if _madvise is not None and self._address is not None:
                if _madvise(self._address + self._released, b - self._released,
                            mmap.MADV_DONTNEED) != 0:   # pragma: no cover
                    self._can_release = False
            else:
                try:
                    self.data.madvise(mmap.MADV_DONTNEED, self._released, b - self._released)
                except (OSError, ValueError):  # pragma: no cover
                    self._can_release = False
            self._released = b

    def close(self):
        try:
            self.data.close()
        except BufferError:  # a caller still holds a memoryview: let GC do it
            pass


class StreamSource:
    """Chunked reading from a file object; ``data`` is an immutable bytes chunk.

    ``base`` is the file offset (of the decompressed stream) of ``data[0]``.
    ``live``: a refill returns once ``need`` bytes are there, with what the pipe
    had (a live capture is seen as it comes, not 4 MiB later).
    """

    def __init__(self, f, live=False):
        self.f = f
        self.live = live
        self.data = b""
        self.end = 0
        self.base = 0
        self.error = None       # (kind, detail) once the stream broke
        self.eof = False

    def release_before(self, upto):
        """Chunks are bytes objects: they go with the last reference."""

    def _read(self, n):
        return self.f.read(n)

    def refill(self, p, need):
        """Keep ``data[p:]`` and read until ``need`` bytes are there (or EOF)."""
        keep = self.data[p:self.end]
        self.base += p
        target = need if self.live else max(need, CHUNK)
        parts = [keep]
        have = len(keep)
        while have < target and not self.eof:
            try:
                piece = self.f.read1(CHUNK) if self.live else self._read(target - have)
            except (OSError, EOFError, zlib.error) as e:  # pragma: no cover
                self.error = ("read_error", str(e) or type(e).__name__)
                piece = b""
            if not piece:
                self.eof = True
                break
            parts.append(piece)
            have += len(piece)
        self.data = b"".join(parts) if len(parts) > 1 else keep
        self.end = len(self.data)
        return self.data, 0, self.end

    def position(self, rel):
        return self.base + rel

    def close(self):
        self.f.close()


class GzipSource(StreamSource):
    """Stream-decompresses gzip (multi-member) with bounded output per call."""

    def __init__(self, f):
        StreamSource.__init__(self, f)
        self._d = None          # current member's decompressor
        self._pending = b""     # compressed bytes not yet given to zlib
        self._dead = False
        self._consumed = 0      # compressed bytes read: a pipe has no tell()

    def position(self, rel):
        return self._consumed

    def _take(self):
        data = self.f.read(GZ_IN_CHUNK)
        self._consumed += len(data)
        return data

    def _input(self):
        if self._pending:
            inp, self._pending = self._pending, b""
            return inp
        return self._take()

    def _read(self, n):
        n = max(1, min(n, CHUNK))
        if self._dead:
            return b""
        while True:
            d = self._d
            if d is not None and d.unconsumed_tail:
                inp = d.unconsumed_tail
            else:
                inp = self._input()
            if not inp:
                if d is not None:
                    self.error = ("gzip_error",
                                  "compressed data ends before the end of the gzip stream (file cut?)")
                return b""
            if d is None:
                # between members: a new member, zero padding, or garbage
                if len(inp) < 2:
                    more = self._take()
                    if more:
                        self._pending = inp + more
                        continue
                if inp[:2] == b"\x1f\x8b":
                    d = self._d = zlib.decompressobj(31)
                elif not inp.strip(b"\x00"):
                    continue        # trailing zero padding (as gzip(1) does)
                else:
                    self.error = ("gzip_error", "garbage after the end of the gzip stream")
                    return b""
            saved = d.copy()
            try:
                out = d.decompress(inp, n)
            except zlib.error as e:
                # keep what decompresses before the bad spot, then stop
                self.error = ("gzip_error", "corrupt gzip data: %s" % e)
                self._d = None
                self._dead = True
                return _salvage(saved, inp, n)
            if d.eof:
                self._pending = d.unused_data
                self._d = None
            if out:
                return out


def _salvage(d, inp, n, step=64):
    """Output of ``d`` for ``inp`` up to the first zlib error (at most ``n`` bytes)."""
    out = []
    got = 0
    for i in range(0, len(inp), step):
        piece = inp[i:i + step]
        while piece and got < n:
            try:
                o = d.decompress(piece, n - got)
            except zlib.error:
                return b"".join(out)
            out.append(o)
            got += len(o)
            piece = d.unconsumed_tail
        if got >= n or d.eof:
            break
    return b"".join(out)

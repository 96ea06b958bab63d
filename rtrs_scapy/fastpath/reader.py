"""Fast, streaming, robust pcap / pcapng reader (stdlib only, no Scapy).

Usage::

    with open_capture("trace.pcapng.gz") as cap:
        for frame_no, ts, buf, start, end, link_type in cap:
            hit = ib_offset(buf, start, end, link_type)
            ...
        if cap.truncated:
            print(cap.problems)

Each frame is ``buf[start:end]``.  ``buf`` is an ``mmap`` (uncompressed regular
files) or a ``bytes`` chunk (gzip, pipes); read it with
``struct.unpack_from(fmt, buf, start + off)`` or ``buf[i]`` without copying.
A ``bytes`` chunk stays valid for as long as you keep a reference; an ``mmap``
only until the capture is closed, so do not keep ``buf`` after ``close()``.

Formats: pcap (both byte orders, microsecond and nanosecond magic), pcapng
(SHB in both byte orders and multiple sections, IDB with ``if_tsresol`` and
``if_tsoffset``, EPB, SPB, the obsolete Packet Block; all other blocks are
skipped), and gzip-compressed versions of both (detected by the magic bytes,
decompressed as a stream: memory does not grow with the file size).

Robustness policy (iteration never raises for bad data and always advances):

* A pcap record whose ``incl_len`` is larger than ``max(MAX_RECORD, snaplen)``
  (capped at ``MAX_BLOCK``) is treated as corruption: problem
  ``bad_record_length``.  No buffer is ever sized from a length field beyond
  those caps.
* A record or block that is cut by the end of the file: ``truncated_record``
  (pcap) / ``truncated_block`` (pcapng).
* A pcapng block whose length is < 12, not a multiple of 4, larger than
  ``MAX_BLOCK`` or too small for its type: ``bad_block_length``; whose trailing
  length differs from the leading one: ``bad_block_trailer``; a captured length
  larger than its block: ``bad_record_length``; an SHB with a bad byte-order
  magic: ``bad_section_header``.
* gzip data that is corrupt or cut: ``gzip_error`` (frames already yielded are
  valid).

All of these stop the iteration cleanly, set ``truncated = True`` and append
``(frame_no, kind, detail)`` to ``problems``, where ``frame_no`` is the number
the next frame would have had.  One problem does not stop the iteration: a
pcapng packet referring to an interface that was never described
(``bad_interface``) is skipped, ``truncated`` is left unchanged.

Nothing readable (missing file, empty file, shorter than a header, unknown
magic, gzip corrupt before the first bytes) raises :class:`CaptureError` from
:func:`open_capture`, with a one-line message.
"""

import mmap
import os
import stat
import struct
import zlib

__all__ = [
    "CaptureError", "Capture", "open_capture", "ib_offset", "link_name",
    "LINK_NAMES", "SUPPORTED_LINK_TYPES", "MAX_RECORD", "MAX_BLOCK", "CHUNK",
]

#: Smallest per-record limit for pcap ``incl_len`` (the snaplen raises it).
MAX_RECORD = 256 * 1024
#: Absolute cap for a pcap record and a pcapng block (same as libpcap/Wireshark).
MAX_BLOCK = 16 * 1024 * 1024
#: Read size for gzip and non-seekable inputs (decompressed bytes per refill).
CHUNK = 4 * 1024 * 1024
#: Compressed bytes read from the file at a time.
GZ_IN_CHUNK = 1024 * 1024
#: mmap: drop already-read pages from the process every this many bytes.
RELEASE_EVERY = 16 * 1024 * 1024
_NEVER = 1 << 62

LINK_NAMES = {
    0: "null",
    1: "ethernet",
    12: "raw_ip",
    14: "raw_ip",
    101: "raw_ip",
    113: "linux_sll",
    197: "erf",
    228: "ipv4",
    229: "ipv6",
    247: "infiniband",
    276: "linux_sll2",
}


#: Link types that ib_offset() can look into.
SUPPORTED_LINK_TYPES = frozenset((1, 12, 14, 101, 113, 197, 228, 229, 247, 276))


def link_name(link_type):
    """Short name of a LINKTYPE_ value, ``"unknown(N)"`` when not known."""
    return LINK_NAMES.get(link_type, "unknown(%d)" % link_type)


class CaptureError(Exception):
    """Nothing readable: missing, empty, not a capture, unknown format."""


_PCAP_MAGICS = {
    b"\xd4\xc3\xb2\xa1": ("<", False),
    b"\xa1\xb2\xc3\xd4": (">", False),
    b"\x4d\x3c\xb2\xa1": ("<", True),
    b"\xa1\xb2\x3c\x4d": (">", True),
}
_SHB = 0x0A0D0D0A
_BOM_LE = b"\x4d\x3c\x2b\x1a"
_BOM_BE = b"\x1a\x2b\x3c\x4d"
_OTHER_MAGICS = (
    (b"\xfd7zXZ", "xz-compressed data"),
    (b"BZh", "bzip2-compressed data"),
    (b"\x28\xb5\x2f\xfd", "zstd-compressed data"),
    (b"\x04\x22\x4d\x18", "lz4-compressed data"),
    (b"PK\x03\x04", "a zip archive"),
    (b"\xa1\xb2\xcd\x34", "a modified (Kuznetsov) pcap, not supported"),
    (b"\x34\xcd\xb2\xa1", "a modified (Kuznetsov) pcap, not supported"),
)


# --------------------------------------------------------------------------
# byte sources

class _MapSource:
    """The whole (uncompressed, regular) file mapped in memory."""

    base = 0
    error = None

    def __init__(self, f):
        self.data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        self._released = 0
        self._can_release = (hasattr(self.data, "madvise")
                             and hasattr(mmap, "MADV_DONTNEED"))
        if self._can_release and hasattr(mmap, "MADV_SEQUENTIAL"):
            try:
                self.data.madvise(mmap.MADV_SEQUENTIAL)
            except (OSError, ValueError):  # pragma: no cover
                pass
        self.end = len(self.data)

    def refill(self, p, need):
        return self.data, p, self.end

    def release(self, upto):
        """Unmap the pages before ``upto`` from this process (RSS stays flat).

        The mapping is read-only and shared: the pages stay in the page cache
        and fault back in if the caller reads them again, so offsets already
        handed out remain valid.  Returns the next offset to call at.
        """
        if self._can_release:
            b = upto - upto % mmap.PAGESIZE
            if b > self._released:
                try:
                    self.data.madvise(mmap.MADV_DONTNEED, self._released, b - self._released)
                except (OSError, ValueError):  # pragma: no cover
                    self._can_release = False
                self._released = b
        return upto + RELEASE_EVERY

    def close(self):
        try:
            self.data.close()
        except BufferError:  # a caller still holds a memoryview: let GC do it
            pass


class _StreamSource:
    """Chunked reading from a file object; ``data`` is an immutable bytes chunk.

    ``base`` is the file offset (of the decompressed stream) of ``data[0]``.
    """

    def __init__(self, f):
        self.f = f
        self.data = b""
        self.end = 0
        self.base = 0
        self.error = None       # (kind, detail) once the stream broke
        self.eof = False

    def release(self, upto):
        return _NEVER

    def _read(self, n):
        return self.f.read(n)

    def refill(self, p, need):
        """Keep ``data[p:]`` and read until ``need`` bytes are there (or EOF)."""
        keep = self.data[p:self.end]
        self.base += p
        target = max(need, CHUNK)
        parts = [keep]
        have = len(keep)
        while have < target and not self.eof:
            try:
                piece = self._read(target - have)
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


class _GzipSource(_StreamSource):
    """Stream-decompresses gzip (multi-member) with bounded output per call."""

    def __init__(self, f):
        _StreamSource.__init__(self, f)
        self._d = None          # current member's decompressor
        self._pending = b""     # compressed bytes not yet given to zlib
        self._dead = False
        self._consumed = 0

    def position(self, rel):
        if not self.f.closed:
            self._consumed = self.f.tell()
        return self._consumed

    def close(self):
        self.position(0)
        self.f.close()

    def _input(self):
        if self._pending:
            inp, self._pending = self._pending, b""
            return inp
        return self.f.read(GZ_IN_CHUNK)

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
                    more = self.f.read(GZ_IN_CHUNK)
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


# --------------------------------------------------------------------------
# capture

def open_capture(path):
    """Open a pcap/pcapng file (optionally gzip-compressed).

    Returns a :class:`Capture` (a context manager).  Raises :class:`CaptureError`
    when the file is missing, unreadable, empty or not a capture.
    """
    return Capture(path)


class Capture:
    """An open capture; iterate it once for ``(frame_no, ts, buf, start, end, link_type)``.

    ``frame_no`` counts from 1 like Wireshark; ``ts`` is seconds (float; an
    SPB, which has no timestamp, repeats the last one seen, 0.0 at first);
    ``link_type`` is the packet's interface link type.

    Attributes:
        link_type: link type of the first interface (pcap header / first IDB;
            -1 for a pcapng whose first IDB was not yet seen).
        link_name: ``"ethernet"``, ``"linux_sll"``, ... or ``"unknown(N)"``.
        fmt: ``"pcap"``, ``"pcap-ns"`` or ``"pcapng"``, plus ``"+gzip"``.
        snaplen: the pcap header's snaplen (0 for pcapng).
        truncated: True once iteration stopped at a cut/corrupt record.
        problems: ``[(frame_no, kind, detail)]``, see the module docstring.
        bytes_total: file size (compressed size for gzip), None for pipes.
    """

    def __init__(self, path):
        self.path = os.fspath(path)
        self.link_type = -1
        self.fmt = ""
        self.truncated = False
        self.problems = []
        self.bytes_total = None
        self.snaplen = 0
        self._src = None
        self._pos = 0
        self._started = False
        shown = self.path
        try:
            f = open(self.path, "rb")
        except FileNotFoundError:
            raise CaptureError("%s: no such file" % shown) from None
        except IsADirectoryError:
            raise CaptureError("%s: is a directory, not a capture file" % shown) from None
        except OSError as e:
            raise CaptureError("%s: cannot open: %s" % (shown, e.strerror or e)) from None
        try:
            self._setup(f)
        except BaseException:
            if self._src is not None:
                self._src.close()
            f.close()
            raise

    # -- opening -----------------------------------------------------------
    def _setup(self, f):
        shown = self.path
        st = os.fstat(f.fileno())
        regular = stat.S_ISREG(st.st_mode)
        if regular:
            self.bytes_total = st.st_size
            if st.st_size == 0:
                raise CaptureError("%s: empty file, not a pcap or pcapng capture" % shown)
            head = f.read(2)
            f.seek(0)
        else:
            head = f.peek(2)[:2]
        gz = head == b"\x1f\x8b"
        if gz:
            src = _GzipSource(f)
        elif regular:
            src = _MapSource(f)
            f.close()  # the mapping stays valid
        else:
            src = _StreamSource(f)
        self._src = src
        data, p, end = src.refill(0, max(CHUNK, 65536))
        what = "gzip-compressed data" if gz else "file"
        if end == 0:
            if src.error:
                raise CaptureError("%s: %s" % (shown, src.error[1]))
            raise CaptureError("%s: empty %s, not a pcap or pcapng capture" % (shown, what))
        magic = bytes(data[0:4])
        if magic in _PCAP_MAGICS:
            if end < 24:
                raise CaptureError("%s: %s too short for a pcap header (%d of 24 bytes)"
                                   % (shown, what, end))
            bo, ns = _PCAP_MAGICS[magic]
            self._bo = bo
            self._ns = ns
            (self.snaplen, network) = struct.unpack_from(bo + "II", data, 16)
            self.link_type = network & 0xFFFF
            self.fmt = "pcap-ns" if ns else "pcap"
            self._kind = "pcap"
        elif magic == b"\x0a\x0d\x0d\x0a":
            if end < 28:
                raise CaptureError("%s: %s too short for a pcapng section header (%d of 28 bytes)"
                                   % (shown, what, end))
            bom = bytes(data[8:12])
            if bom not in (_BOM_LE, _BOM_BE):
                raise CaptureError("%s: pcapng section header with bad byte-order magic 0x%s"
                                   % (shown, bom.hex()))
            self._bo = "<" if bom == _BOM_LE else ">"
            self.fmt = "pcapng"
            self._kind = "pcapng"
            self.link_type = _pcapng_first_linktype(data, end, self._bo)
        else:
            hint = ""
            for m, name in _OTHER_MAGICS:
                if bytes(data[0:len(m)]) == m:
                    hint = "; looks like %s" % name
                    break
            if end < 4:
                raise CaptureError("%s: %s too short (%d bytes), not a pcap or pcapng capture"
                                   " (magic 0x%s)" % (shown, what, end, magic.hex()))
            raise CaptureError("%s: %snot a pcap or pcapng capture (magic 0x%s%s)"
                               % (shown, "gzip-compressed data is " if gz else "",
                                  magic.hex(), hint))
        if gz:
            self.fmt += "+gzip"

    @property
    def link_name(self):
        return "none" if self.link_type < 0 else link_name(self.link_type)

    def position(self):
        """Bytes consumed so far, comparable to ``bytes_total`` (compressed for gzip)."""
        src = self._src
        if isinstance(src, _GzipSource):
            return src.position(0)
        return self._pos

    def close(self):
        if self._src is not None:
            self._src.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        return "<Capture %s %s %s>" % (self.path, self.fmt, self.link_name)

    def _problem(self, frame_no, kind, detail, stop=True):
        self.problems.append((frame_no, kind, detail))
        if stop:
            self.truncated = True

    def _src_problem(self, frame_no):
        err = self._src.error
        if err is not None:
            self._problem(frame_no, err[0], err[1])

    # -- iteration ---------------------------------------------------------
    def __iter__(self):
        if self._started:
            raise RuntimeError("a Capture can be iterated only once; open it again")
        self._started = True
        if self._kind == "pcap":
            return self._iter_pcap()
        return self._iter_pcapng()

    def batches(self, size=65536):
        """Frames in groups: ``(first_frame_no, ts, buf, starts, ends, link_type)`` with
        lists of up to ``size`` consecutive frames sharing one buffer and link type."""
        if self._started:
            raise RuntimeError("a Capture can be iterated only once; open it again")
        self._started = True
        if self._kind == "pcap":
            return self._pcap_batches(size)
        return _group(self._iter_pcapng(), size)

    def _iter_pcap(self):
        for first, ts, data, starts, ends, lt in self._pcap_batches(1024):
            for i, s in enumerate(starts):
                yield (first + i, ts[i], data, s, ends[i], lt)

    def _pcap_batches(self, size):
        """The pcap record walk (one loop for both iteration styles)."""
        src = self._src
        data, end = src.data, src.end
        base = src.base
        p = 24
        self._pos = 24
        hdr = struct.Struct(self._bo + "IIII").unpack_from
        scale = 1e-9 if self._ns else 1e-6
        limit = min(max(MAX_RECORD, self.snaplen), MAX_BLOCK)
        lt = self.link_type
        frame_no = 0
        release_at = src.release(0)
        ts, starts, ends = [], [], []
        while True:
            need = 16
            if end - p >= 16:
                sec, frac, incl, _orig = hdr(data, p)
                if incl > limit:
                    self._problem(frame_no + 1, "bad_record_length",
                                  "record says %d bytes, more than the limit %d (corrupt file?)"
                                  % (incl, limit))
                    break
                need = 16 + incl
            if end - p < need or len(starts) == size:
                if starts:  # hand the batch over before the buffer moves on
                    self._pos = base + ends[-1]
                    yield frame_no - len(starts) + 1, ts, data, starts, ends, lt
                    ts, starts, ends = [], [], []
                    # pages are released only once the consumer is done with them
                    if p > release_at:
                        release_at = src.release(p)
                if end - p < need:
                    data, p, end = src.refill(p, need)
                    base = src.base
                    if end - p < need:
                        if need > 16:
                            self._problem(frame_no + 1, "truncated_record",
                                          "record says %d bytes, %d left" % (need - 16,
                                                                             end - p - 16))
                        elif end - p:
                            self._problem(frame_no + 1, "truncated_record",
                                          "record header cut: %d of 16 bytes left" % (end - p))
                        self._src_problem(frame_no + 1)
                        break
                continue
            frame_no += 1
            ts.append(sec + frac * scale)
            starts.append(p + 16)
            p += need
            ends.append(p)
        if starts:
            self._pos = base + ends[-1]
            yield frame_no - len(starts) + 1, ts, data, starts, ends, lt

    def _iter_pcapng(self):
        src = self._src
        data, end = src.data, src.end
        base = src.base
        p = 0
        bo = self._bo
        u32 = struct.Struct(bo + "I").unpack_from
        u32x2 = struct.Struct(bo + "II").unpack_from
        epb = struct.Struct(bo + "IIIII").unpack_from
        opb = struct.Struct(bo + "HHIIII").unpack_from
        ifaces = []             # [(link_type, divisor, offset_seconds, snaplen)]
        frame_no = 0
        last_ts = 0.0
        release_at = src.release(0)
        while True:
            if end - p < 12:
                data, p, end = src.refill(p, 12)
                base = src.base
                if end - p < 12:
                    if end - p:
                        self._problem(frame_no + 1, "truncated_block",
                                      "block header cut: %d of 12 bytes left" % (end - p))
                    self._src_problem(frame_no + 1)
                    break
            btype, blen = u32x2(data, p)
            if btype == _SHB:
                bom = bytes(data[p + 8:p + 12])
                if bom == _BOM_LE:
                    nbo = "<"
                elif bom == _BOM_BE:
                    nbo = ">"
                else:
                    self._problem(frame_no + 1, "bad_section_header",
                                  "section header with bad byte-order magic 0x%s" % bom.hex())
                    break
                if nbo != bo:
                    bo = nbo
                    u32 = struct.Struct(bo + "I").unpack_from
                    u32x2 = struct.Struct(bo + "II").unpack_from
                    epb = struct.Struct(bo + "IIIII").unpack_from
                    opb = struct.Struct(bo + "HHIIII").unpack_from
                    btype, blen = u32x2(data, p)
            if blen < 12 or blen & 3 or blen > MAX_BLOCK:
                self._problem(frame_no + 1, "bad_block_length",
                              "block type 0x%x says %d bytes (corrupt file?)" % (btype, blen))
                break
            if end - p < blen:
                data, p, end = src.refill(p, blen)
                base = src.base
                if end - p < blen:
                    self._problem(frame_no + 1, "truncated_block",
                                  "block says %d bytes, %d left" % (blen, end - p))
                    self._src_problem(frame_no + 1)
                    break
            if u32(data, p + blen - 4)[0] != blen:
                self._problem(frame_no + 1, "bad_block_trailer",
                              "block type 0x%x: leading length %d, trailing length %d"
                              % (btype, blen, u32(data, p + blen - 4)[0]))
                break
            nxt = p + blen
            if btype == 6 or btype == 2:            # EPB / obsolete PB
                if blen < 32:
                    self._problem(frame_no + 1, "bad_block_length",
                                  "packet block of %d bytes (minimum 32)" % blen)
                    break
                if btype == 6:
                    iface, hi, lo, caplen, _orig = epb(data, p + 8)
                else:
                    iface, _drops, hi, lo, caplen, _orig = opb(data, p + 8)
                s = p + 28
                e = s + caplen
                if e > nxt - 4:
                    self._problem(frame_no + 1, "bad_record_length",
                                  "packet says %d bytes, block holds %d" % (caplen, blen - 32))
                    break
                if iface >= len(ifaces):
                    self._problem(frame_no + 1, "bad_interface",
                                  "packet on interface %d, only %d described; skipped"
                                  % (iface, len(ifaces)), stop=False)
                    p = nxt
                    continue
                lt, div, off, _snap = ifaces[iface]
                last_ts = ((hi << 32) | lo) / div + off
                frame_no += 1
                self._pos = base + nxt
                yield (frame_no, last_ts, data, s, e, lt)
            elif btype == 3:                        # SPB
                if blen < 16:
                    self._problem(frame_no + 1, "bad_block_length",
                                  "simple packet block of %d bytes (minimum 16)" % blen)
                    break
                if not ifaces:
                    self._problem(frame_no + 1, "bad_interface",
                                  "simple packet block before any interface; skipped",
                                  stop=False)
                    p = nxt
                    continue
                lt, _div, _off, snap = ifaces[0]
                caplen = min(u32(data, p + 8)[0], blen - 16)
                if snap and caplen > snap:
                    caplen = snap
                frame_no += 1
                self._pos = base + nxt
                yield (frame_no, last_ts, data, p + 12, p + 12 + caplen, lt)
            elif btype == 1:                        # IDB
                if blen < 20:
                    self._problem(frame_no + 1, "bad_block_length",
                                  "interface description block of %d bytes (minimum 20)" % blen)
                    break
                ifaces.append(_parse_idb(data, p, blen, bo))
                if self.link_type < 0:
                    self.link_type = ifaces[-1][0]
            elif btype == _SHB:
                if blen < 28:
                    self._problem(frame_no + 1, "bad_block_length",
                                  "section header block of %d bytes (minimum 28)" % blen)
                    break
                ifaces = []
            p = nxt
            self._pos = base + p
            if p > release_at:
                release_at = src.release(p)


def _parse_idb(data, p, blen, bo):
    """(link_type, divisor, offset_seconds, snaplen) from an IDB at ``p``."""
    lt, _res, snap = struct.unpack_from(bo + "HHI", data, p + 8)
    div = 1000000
    off = 0
    q = p + 16
    oend = p + blen - 4
    hh = struct.Struct(bo + "HH").unpack_from
    while q + 4 <= oend:
        code, olen = hh(data, q)
        if code == 0:
            break
        v = q + 4
        if v + olen > oend:
            break                       # malformed option: keep what we have
        if code == 9 and olen >= 1:     # if_tsresol
            r = data[v]
            div = (1 << (r & 0x7F)) if r & 0x80 else 10 ** r
        elif code == 14 and olen >= 8:  # if_tsoffset (signed seconds)
            off = struct.unpack_from(bo + "q", data, v)[0]
        q = v + ((olen + 3) & ~3)
    return lt, div, off, snap


def _pcapng_first_linktype(data, end, bo):
    """Link type of the first IDB found in the already-read prefix, else -1."""
    p = 0
    for _ in range(256):
        if end - p < 12:
            break
        btype, blen = struct.unpack_from(bo + "II", data, p)
        if blen < 12 or blen & 3 or end - p < blen:
            break
        if btype == _SHB and p:
            break                       # a new section may change byte order
        if btype == 1 and blen >= 20:
            return struct.unpack_from(bo + "H", data, p + 8)[0]
        p += blen
    return -1


# --------------------------------------------------------------------------
# InfiniBand / RoCE locator

_ROCE_PORT = 4791
_GRH_NEXT_BTH = 0x1B             # GRH next header: IBA transport


def ib_offset(buf, start, end, link_type):
    """Find the InfiniBand transport inside frame ``buf[start:end]``.

    Returns ``(kind, bth_off, ib_end, src, dst)`` or ``None`` when the frame is
    not InfiniBand/RoCE or is too short for what its headers announce.  All
    offsets are absolute indexes into ``buf``.

    * ``"rocev2"``: ``bth_off`` is the BTH (after UDP, destination port 4791);
      ``ib_end = udp_off + udp_length`` (just after the ICRC; Ethernet padding
      and FCS excluded); ``src``/``dst`` are the IPv4 (4 bytes) or IPv6
      (16 bytes) addresses.
    * ``"rocev1"`` (EtherType 0x8915): ``bth_off`` is the **GRH** (BTH at
      ``bth_off + 40``); ``ib_end = grh + 40 + PayLen``; ``src``/``dst`` are the
      source/destination GIDs (16 bytes).  Only GRH next-header 0x1B (BTH) is
      accepted.
    * ``"ib"`` (link type 247, or ERF type InfiniBand): ``bth_off`` is the
      **LRH**; the BTH is at ``bth_off + 8`` when ``buf[bth_off+1] & 3 == 2``
      (LNH IBA local) or at ``bth_off + 48`` when it is 3 (a GRH follows the
      LRH, next header 0x1B checked); ``ib_end = lrh + PktLen*4`` (after the
      ICRC, VCRC excluded); ``src``/``dst`` are the SLID/DLID (2 bytes each).

    Link layers: Ethernet (1) with any number of 802.1Q/802.1ad tags, Linux
    cooked v1 (113) and v2 (276), raw IP (101, 12, 14: version nibble; 228
    IPv4; 229 IPv6), InfiniBand (247) and ERF (197: Ethernet and InfiniBand
    records).  IPv4 options are honoured, fragments rejected; IPv6 must carry
    UDP directly (extension headers: ``None``).
    """
    if link_type == 1:
        if end - start < 14:
            return None
        p = start + 14
        et = (buf[start + 12] << 8) | buf[start + 13]
        while et == 0x8100 or et == 0x88A8 or et == 0x9100:
            if end - p < 4:
                return None
            et = (buf[p + 2] << 8) | buf[p + 3]
            p += 4
    elif link_type == 113:
        if end - start < 16:
            return None
        et = (buf[start + 14] << 8) | buf[start + 15]
        p = start + 16
    elif link_type == 276:
        if end - start < 20:
            return None
        et = (buf[start] << 8) | buf[start + 1]
        p = start + 20
    elif link_type in (101, 12, 14, 228, 229):
        if end - start < 1:
            return None
        v = buf[start] >> 4
        if v == 4 and link_type != 229:
            et = 0x0800
        elif v == 6 and link_type != 228:
            et = 0x86DD
        else:
            return None
        p = start
    elif link_type == 247:
        return _ib_lrh(buf, start, end)
    elif link_type == 197:
        return _erf(buf, start, end)
    else:
        return None
    return _from_ethertype(buf, p, end, et)


def _from_ethertype(buf, p, end, et):
    if et == 0x0800:
        if end - p < 20:
            return None
        vihl = buf[p]
        ihl = (vihl & 0x0F) * 4
        if vihl >> 4 != 4 or ihl < 20 or buf[p + 9] != 17:
            return None
        if ((buf[p + 6] & 0x3F) << 8) | buf[p + 7]:
            return None                 # fragment (MF set or offset != 0)
        tot = (buf[p + 2] << 8) | buf[p + 3]
        u = p + ihl
        if end - u < 8:
            return None
        ulen = (buf[u + 4] << 8) | buf[u + 5]
        if tot and ulen > tot - ihl:
            return None
        src = bytes(buf[p + 12:p + 16])
        dst = bytes(buf[p + 16:p + 20])
    elif et == 0x86DD:
        if end - p < 40:
            return None
        if buf[p] >> 4 != 6 or buf[p + 6] != 17:
            return None
        u = p + 40
        if end - u < 8:
            return None
        ulen = (buf[u + 4] << 8) | buf[u + 5]
        plen = (buf[p + 4] << 8) | buf[p + 5]
        if plen and ulen > plen:
            return None
        src = bytes(buf[p + 8:p + 24])
        dst = bytes(buf[p + 24:p + 40])
    elif et == 0x8915:
        grh = _grh_after(buf, p, end)
        if grh is None:
            return None
        ib_end, sgid, dgid = grh
        if ib_end - p - _ib().grh_size < _ib().min_packet:
            return None
        return ("rocev1", p, ib_end, sgid, dgid)
    else:
        return None
    if ((buf[u + 2] << 8) | buf[u + 3]) != _ROCE_PORT:
        return None
    ib_end = u + ulen
    if ulen < 8 + _ib().min_packet or ib_end > end:
        return None
    return ("rocev2", u + 8, ib_end, src, dst)


class _IbHeaders:
    """LRH and GRH readers from the Scapy layers' plans (loaded on first use, so that
    opening a capture does not import Scapy)."""

    def __init__(self):
        from ..layers.ib import BTH, GRH, LNH_IBA_GLOBAL, LNH_IBA_LOCAL, LRH
        from .plan import plan
        bth = plan(BTH)
        self.min_packet = bth.size + bth.layout.trailer_size  # BTH + ICRC
        self.lrh = plan(LRH).reader("lnh", "pktlen", "dlid", "slid")
        self.lrh_size = plan(LRH).size
        self.grh = plan(GRH).reader("ipver", "paylen", "nexthdr", "sgid", "dgid")
        self.grh_size = plan(GRH).size
        self.local, self.global_ = LNH_IBA_LOCAL, LNH_IBA_GLOBAL


_IB = []


def _ib():
    if not _IB:
        _IB.append(_IbHeaders())
    return _IB[0]


def _grh_after(buf, p, end):
    """(end of the IB packet, SGID, DGID) of a GRH at ``p`` carrying a BTH, or None."""
    ib = _ib()
    if end - p < ib.grh_size:
        return None
    ipver, paylen, nexthdr, sgid, dgid = ib.grh(buf, p)
    if ipver != 6 or nexthdr != _GRH_NEXT_BTH or p + ib.grh_size + paylen > end:
        return None
    return p + ib.grh_size + paylen, sgid.to_bytes(16, "big"), dgid.to_bytes(16, "big")


def _ib_lrh(buf, p, end):
    ib = _ib()
    if end - p < ib.lrh_size:
        return None
    lnh, words, dlid, slid = ib.lrh(buf, p)
    ib_end = p + words * 4
    if lnh == ib.local:
        need = ib.lrh_size + ib.min_packet
    elif lnh == ib.global_ and _grh_after(buf, p + ib.lrh_size, end) is not None:
        need = ib.lrh_size + ib.grh_size + ib.min_packet
    else:
        return None
    if words * 4 < need or ib_end > end:
        return None
    return ("ib", p, ib_end, slid.to_bytes(2, "big"), dlid.to_bytes(2, "big"))


def _erf(buf, start, end):
    """ERF record (pcap link type 197): 16-byte header, extension headers."""
    if end - start < 16:
        return None
    rtype = buf[start + 8]
    p = start + 16
    ext = rtype & 0x80
    while ext:
        if end - p < 8:
            return None
        ext = buf[p] & 0x80
        p += 8
    rtype &= 0x7F
    if rtype == 21:                     # ERF_TYPE_INFINIBAND
        return _ib_lrh(buf, p, end)
    if rtype == 2:                      # ERF_TYPE_ETH: 2 bytes offset/pad
        return ib_offset(buf, p + 2, end, 1) if end - p >= 2 else None
    return None


# --------------------------------------------------------------------------
# batches: many frames of one buffer at once, for numpy column work

def batches(capture, size=65536):
    """``capture.batches(size)``: frames grouped for numpy column work."""
    return capture.batches(size)


def _group(frames, size):
    """Group ``(frame_no, ts, buf, start, end, link_type)`` tuples into batches."""
    ts, starts, ends = [], [], []
    first = cur_buf = cur_lt = None
    for frame_no, t, buf, s, e, lt in frames:
        if buf is not cur_buf or lt != cur_lt or len(starts) == size:
            if starts:
                yield first, ts, cur_buf, starts, ends, cur_lt
            ts, starts, ends = [], [], []
            first, cur_buf, cur_lt = frame_no, buf, lt
        ts.append(t)
        starts.append(s)
        ends.append(e)
    if starts:
        yield first, ts, cur_buf, starts, ends, cur_lt


def rocev2_ipv4_columns(np, b, starts, ends):
    """Vectorised ``ib_offset`` for the common frame shape Ethernet (no VLAN) /
    IPv4 without options / UDP to port 4791; other frames are left to
    ``ib_offset``.  Returns ``(mask, bth_off, ib_end, src_u32, dst_u32)``."""
    length = ends - starts
    min_packet = _ib().min_packet
    shape_ok = length >= 14 + 20 + 8 + min_packet
    s = np.where(shape_ok, starts, 0)
    u8 = lambda off: b[s + off].astype(np.int64)  # noqa: E731
    be16 = lambda off: (u8(off) << 8) | u8(off + 1)  # noqa: E731
    be32 = lambda off: (be16(off) << 16) | be16(off + 2)  # noqa: E731
    ulen = be16(38)
    ib_end = starts + 34 + ulen
    mask = (shape_ok & (be16(12) == 0x0800) & (u8(14) == 0x45) & (u8(23) == 17)
            & ((be16(20) & 0x3FFF) == 0) & (be16(36) == _ROCE_PORT)
            & (ulen >= 8 + min_packet) & (ib_end <= ends)
            & ((be16(16) == 0) | (ulen <= be16(16) - 20)))
    return mask, starts + 42, ib_end, be32(26), be32(30)

"""Opening a capture file and reading it as chunks of record columns.

Formats: pcap (both byte orders, microsecond and nanosecond magic), pcapng
(SHB in both byte orders and multiple sections, IDB with ``if_tsresol`` and
``if_tsoffset``, EPB, SPB, the obsolete Packet Block; all other blocks are
skipped), and gzip-compressed versions of both (decompressed as a stream:
memory does not grow with the file size).  ``-`` is standard input.  A pcap
stream may start over with a new global header at a record boundary (a
``tcpdump -w -`` restarted into the same pipe, or pcap files concatenated):
reading goes on with its byte order, resolution, snaplen and link type.

Robustness (reading never raises for bad data and always advances):

* a pcap record whose ``incl_len`` is larger than ``max(MAX_RECORD, snaplen)``
  (capped at ``MAX_BLOCK``): problem ``bad_record_length``; no buffer is ever
  sized from a length field beyond those caps;
* a record or block cut by the end of the file: ``truncated_record`` (pcap) /
  ``truncated_block`` (pcapng);
* a pcapng block whose length is < 12, not a multiple of 4, larger than
  ``MAX_BLOCK`` or too small for its type: ``bad_block_length``; a trailing
  length that differs: ``bad_block_trailer``; a captured length larger than
  its block: ``bad_record_length``; an SHB with a bad byte-order magic:
  ``bad_section_header``;
* gzip data that is corrupt or cut: ``gzip_error`` (records already read are
  valid).

These stop the reading, set ``truncated`` and append ``(frame_no, kind,
detail)`` to ``problems`` (``frame_no``: the number the next frame would have
had).  A pcapng packet on an interface that was never described
(``bad_interface``) is skipped without stopping.  Nothing readable (missing,
empty, shorter than a header, unknown magic) raises :class:`CaptureError` from
:func:`open_capture` with a one-line message.
"""

import os
import stat
import struct
import sys
from dataclasses import dataclass

import numpy as np

from . import records as R
from . import sources
from . import columns, ib
from .ib import decode_chunk
from .jit import byte_array
from .links import GEOMETRY, link_name, mirror_codes

#: Smallest per-record limit for pcap ``incl_len`` (the snaplen raises it).
MAX_RECORD = 256 * 1024
#: Absolute cap for a pcap record and a pcapng block (same as libpcap/Wireshark).
MAX_BLOCK = R.MAX_BLOCK
#: Records per chunk of columns.
CHUNK_RECORDS = 1 << 13
#: ... or this many bytes of the file: what a chunk keeps mapped while it waits
CHUNK_BYTES = 8 << 20

_PCAP_MAGICS = {
    b"\xd4\xc3\xb2\xa1": (False, False),
    b"\xa1\xb2\xc3\xd4": (True, False),
    b"\x4d\x3c\xb2\xa1": (False, True),
    b"\xa1\xb2\x3c\x4d": (True, True),
}
_SHB_MAGIC = b"\x0a\x0d\x0d\x0a"
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


class CaptureError(Exception):
    """Nothing readable: missing, empty, not a capture, unknown format."""


@dataclass
class Chunk:
    """Consecutive records of one buffer, as columns.

    ``buf`` is the buffer as a uint8 array (``data`` the object behind it, kept
    alive); record ``i`` is ``buf[offs[i]:offs[i] + caplens[i]]``, frame number
    ``first_frame + i``, captured at ``stamps[i]`` ns, with link type ``links[i]``;
    ``packets`` and ``extra`` hold its IB headers (a row per record, columns.P_* and
    columns.X_*), from ``decoded()``;
    ``origlens[i]`` is the record's length on the wire (above ``caplens[i]`` when the
    snaplen cut it; None: every record whole).
    """
    data: object
    buf: np.ndarray
    first_frame: int
    offs: np.ndarray
    caplens: np.ndarray
    stamps: np.ndarray
    links: np.ndarray
    packets: np.ndarray = None
    origlens: np.ndarray = None
    extra: np.ndarray = None
    counted: tuple = None
    tally: tuple = None         # (records with IB headers, any mirrored, several link
    #                             types), by the walk

    def __len__(self):
        return len(self.offs)

    def decoded(self):
        if self.packets is None:
            self.packets, self.extra = decode_chunk(self.buf, self.offs, self.caplens,
                                                    self.links, self.origlens)
        return self

    def counts(self):
        """(records with IB headers, distinct link types, distinct mirror codes), made
        once, where first asked for: from the walk's ``tally`` where it has one (each
        record counted as it was decoded; a pass over the rows' columns took 0.03 s of
        3 M load packets, in whichever thread ran it), the mirror codes from their column
        only where the walk saw any (docs/benchmarks.md)."""
        if self.counted is None:
            self.decoded()
            if self.tally is None:
                ib_frames = int(np.count_nonzero(self.packets[:, columns.P_KIND]))
                mirrored = mixed = True
            else:
                ib_frames, mirrored, mixed = self.tally
            self.counted = (ib_frames, _distinct(self.links) if mixed else [int(self.links[0])],
                            mirror_codes(self.extra[:, columns.X_MIRROR]) if mirrored else [])
        return self.counted


def _distinct(values):
    """The distinct values, sorted (a chunk's records nearly always share one)."""
    if len(values) and (values == values[0]).all():
        return [int(values[0])]
    return np.unique(values).tolist()


def open_capture(path, live=False):
    """Open a pcap/pcapng file (optionally gzip-compressed; ``-`` for stdin).

    ``live``: a pipe is read as its bytes arrive (a chunk holds what was there,
    not 4 MiB), for watching a capture as it is written.  Returns a
    :class:`Capture` (a context manager).  Raises :class:`CaptureError` when the
    file is missing, unreadable, empty or not a capture.
    """
    return Capture(path, live)


class Capture:
    """An open capture; read it once with ``chunks()`` (columns) or by iterating
    it for ``(frame_no, ts, buf, start, end, link_type)`` tuples.

    Attributes:
        link_type: link type of the first interface (pcap header / first IDB;
            -1 for a pcapng whose first IDB was not yet seen).
        fmt: ``"pcap"``, ``"pcap-ns"`` or ``"pcapng"``, plus ``"+gzip"``.
        snaplen: the pcap header's snaplen, or the smallest nonzero one of the pcapng
            interface descriptions (0: none given).
        cut: the records the snaplen cut (:class:`CutRecords`).
        truncated: True once reading stopped at a cut/corrupt record.
        problems: ``[(frame_no, kind, detail)]``, see the module docstring.
        bytes_total: file size (compressed size for gzip), None for pipes.
    """

    def __init__(self, path, live=False):
        self.path = os.fspath(path)
        self.live = live
        self.link_type = -1
        self.fmt = ""
        self.truncated = False
        self.problems = []
        self.bytes_total = None
        self.snaplen = 0
        self.cut = CutRecords()
        self.frames = 0
        self._src = None
        self._pos = 0
        self._started = False
        shown = "standard input" if self.path == "-" else self.path
        self.shown = shown
        try:
            if self.path == "-":
                f = os.fdopen(os.dup(sys.stdin.fileno()), "rb")
            else:
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
        shown = self.shown
        st = os.fstat(f.fileno())
        regular = stat.S_ISREG(st.st_mode) and st.st_size > 0
        if regular:
            self.bytes_total = st.st_size
            head = f.read(2)
            f.seek(0)
        elif stat.S_ISREG(st.st_mode):
            raise CaptureError("%s: empty file, not a pcap or pcapng capture" % shown)
        else:
            head = f.peek(2)[:2]
        gz = head == b"\x1f\x8b"
        if gz:
            src = sources.GzipSource(f)
        elif regular:
            src = sources.MapSource(f)
            f.close()  # the mapping stays valid
        else:
            src = sources.StreamSource(f, self.live)
        self._src = src
        # live: the pcap header alone (a capture tool writes it before any packet)
        data, _p, end = src.refill(0, 24 if self.live else max(sources.CHUNK, 65536))
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
            self._big, self._nano = _PCAP_MAGICS[magic]
            self.snaplen, network = struct.unpack_from(">II" if self._big else "<II", data, 16)
            self.link_type = network & 0xFFFF
            self.fmt = "pcap-ns" if self._nano else "pcap"
            self._kind = "pcap"
        elif magic == _SHB_MAGIC:
            if end < 28 and self.live:
                data, _p, end = src.refill(0, 28)
            if end < 28:
                raise CaptureError("%s: %s too short for a pcapng section header (%d of 28 bytes)"
                                   % (shown, what, end))
            bom = bytes(data[8:12])
            if bom not in (_BOM_LE, _BOM_BE):
                raise CaptureError("%s: pcapng section header with bad byte-order magic 0x%s"
                                   % (shown, bom.hex()))
            self._big = bom == _BOM_BE
            self.fmt = "pcapng"
            self._kind = "pcapng"
            self.link_type = _pcapng_first_linktype(data, end, self._big)
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

    @property
    def files(self):
        return [self.path]

    duplicates = 0    # frames dropped as copies of another file's (several files only)

    def position(self):
        """Bytes consumed so far, comparable to ``bytes_total`` (compressed for gzip)."""
        if isinstance(self._src, sources.GzipSource):
            return self._src.position(0)
        return self._pos

    def done(self, chunk):
        """The consumer is through with ``chunk``: the pages before its end may go
        (a mapped file: the process's memory stays flat with the file size)."""
        if len(chunk):
            self._src.release_before(int(chunk.offs[-1] + chunk.caplens[-1]))

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

    def _problem(self, kind, detail, stop=True):
        self.problems.append((self.frames + 1, kind, detail))
        if stop:
            self.truncated = True

    def _source_problem(self):
        err = self._src.error
        if err is not None:
            self._problem(err[0], err[1])

    # -- reading -----------------------------------------------------------
    def chunks(self, records=CHUNK_RECORDS):
        """The records as :class:`Chunk` columns, ``records`` at most per chunk."""
        if self._started:
            raise RuntimeError("a Capture can be read only once; open it again")
        self._started = True
        walk = self._pcap if self._kind == "pcap" else self._pcapng
        return walk(records)

    def __iter__(self):
        return self._frames(self.chunks(1024))

    def _frames(self, chunks):
        for chunk in chunks:
            offs, ends = chunk.offs.tolist(), (chunk.offs + chunk.caplens).tolist()
            stamps, links = chunk.stamps.tolist(), chunk.links.tolist()
            for i, start in enumerate(offs):
                yield (chunk.first_frame + i, stamps[i] / 1e9, chunk.data, start, ends[i],
                       links[i])
            self.done(chunk)

    def _emit(self, data, buf, n, columns, base):
        """A chunk of the first ``n`` records the walk put in ``columns``: the chunk
        keeps them (the walk goes on in fresh ones, see _columns), not a copy."""
        offs, caplens, origlens, stamps, links, packets, extra = (column[:n]
                                                                  for column in columns[:7])
        ib_frames, mirrored, mixed, cut, cut_caplen = columns[7].tolist()
        chunk = Chunk(data, buf, self.frames + 1, offs, caplens, stamps, links, packets,
                      origlens, extra=extra, tally=(ib_frames, mirrored > 0, mixed > 0))
        self.cut.count(cut, cut_caplen)
        self.frames += n
        self._pos = base + int(offs[n - 1] + caplens[n - 1])
        return chunk

    def _pcap(self, records):
        src = self._src
        data, end, base = src.data, src.end, src.base
        buf = byte_array(data)
        pos = self._pos = 24
        big, nano, link = self._big, self._nano, self.link_type
        limit = min(max(MAX_RECORD, self.snaplen), MAX_BLOCK)
        columns = _columns(records)
        while True:
            n, pos, why, value = R.walk_pcap(buf, pos, end, pos + CHUNK_BYTES, big, nano,
                                                limit, link, *columns, *_DECODE)
            if n:
                yield self._emit(data, buf, n, columns, base)
                columns = _columns(records)
            if why == R.FULL:
                continue
            if why == R.PCAP_HEADER and end - pos >= 24:
                big, nano = _PCAP_MAGICS[bytes(data[pos:pos + 4])]
                snaplen, network = struct.unpack_from(">II" if big else "<II", data, pos + 16)
                link = network & 0xFFFF
                limit = min(max(MAX_RECORD, snaplen), MAX_BLOCK)
                pos += 24
                self._pos = base + pos
                continue
            if why == R.BAD_LENGTH:
                self._problem("bad_record_length", "record says %d bytes, more than the limit "
                              "%d (corrupt file?)" % (value, limit))
                return
            data, pos, end = src.refill(pos, value)
            base = src.base
            buf = byte_array(data)
            if end - pos >= value:
                continue
            if value > 16:
                self._problem("truncated_record", "record says %d bytes, %d left"
                              % (value - 16, end - pos - 16))
            elif end - pos:
                self._problem("truncated_record", "record header cut: %d of 16 bytes left"
                              % (end - pos))
            self._source_problem()
            return

    def _pcapng(self, records):
        src = self._src
        data, end, base = src.data, src.end, src.base
        buf = byte_array(data)
        pos = 0
        big = self._big
        ifaces = _Interfaces()
        last_stamp = 0
        columns = _columns(records)
        while True:
            n, pos, why, value, last_stamp = R.walk_pcapng(
                buf, pos, end, pos + CHUNK_BYTES, big, *ifaces.columns(), last_stamp, *columns,
                *_DECODE)
            self._pos = base + pos
            if n:
                yield self._emit(data, buf, n, columns, base)
                columns = _columns(records)
                self._pos = base + pos
            if why == R.FULL:
                continue
            if why == R.NEED:
                data, pos, end = src.refill(pos, value)
                base = src.base
                buf = byte_array(data)
                if end - pos >= value:
                    continue
                if value > 12:
                    self._problem("truncated_block", "block says %d bytes, %d left"
                                  % (value, end - pos))
                elif end - pos:
                    self._problem("truncated_block", "block header cut: %d of 12 bytes left"
                                  % (end - pos))
                self._source_problem()
                return
            if why == R.SECTION:
                big = self._section(data, pos, end)
                if big is None:
                    return
                blen = _u32(data, pos + 4, big)
                if blen < 12 or blen & 3 or blen > MAX_BLOCK:
                    self._block_problem(R.BAD_BLOCK, blen, data, pos, big)
                    return
                if end - pos < blen:
                    data, pos, end = src.refill(pos, blen)
                    base = src.base
                    buf = byte_array(data)
                    if end - pos < blen:
                        self._problem("truncated_block", "block says %d bytes, %d left"
                                      % (blen, end - pos))
                        self._source_problem()
                        return
                trailer = _u32(data, pos + blen - 4, big)
                if trailer != blen:
                    self._block_problem(R.BAD_TRAILER, trailer, data, pos, big)
                    return
                if blen < 28:
                    self._problem("bad_block_length", "section header block of %d bytes "
                                  "(minimum 28)" % blen)
                    return
                ifaces = _Interfaces()
                pos += blen
            elif why == R.INTERFACE:
                blen = _u32(data, pos + 4, big)
                if blen < 20:
                    self._problem("bad_block_length", "interface description block of %d "
                                  "bytes (minimum 20)" % blen)
                    return
                link, mode, exp, offset_s, snap = _parse_idb(data, pos, blen, big)
                if abs(offset_s) > MAX_OFFSET_S:
                    self._problem("bad_option", "interface %d: if_tsoffset of %d s is beyond "
                                  "a clock of 64-bit nanoseconds; read as 0"
                                  % (ifaces.count, offset_s), stop=False)
                    offset_s = 0
                ifaces.add((link, mode, exp, offset_s, snap))
                snap = ifaces.snap[-1]
                if snap and (not self.snaplen or snap < self.snaplen):
                    self.snaplen = snap
                if self.link_type < 0:
                    self.link_type = ifaces.link[0]
                pos += blen
            elif why == R.NO_INTERFACE:
                blen = _u32(data, pos + 4, big)
                if value < 0:
                    self._problem("bad_interface", "simple packet block before any interface; "
                                  "skipped", stop=False)
                else:
                    self._problem("bad_interface", "packet on interface %d, only %d described; "
                                  "skipped" % (value, ifaces.count), stop=False)
                pos += blen
            else:
                self._block_problem(why, value, data, pos, big)
                return
            self._pos = base + pos

    def _section(self, data, pos, end):
        """Byte order of a section header at ``pos`` (None: bad magic, reported)."""
        bom = bytes(data[pos + 8:pos + 12]) if end - pos >= 12 else b""
        if bom == _BOM_LE:
            return False
        if bom == _BOM_BE:
            return True
        self._problem("bad_section_header", "section header with bad byte-order magic 0x%s"
                      % bom.hex())
        return None

    def _block_problem(self, why, value, data, pos, big):
        btype = _u32(data, pos, big)
        if why == R.BAD_BLOCK:
            self._problem("bad_block_length", "block type 0x%x says %d bytes (corrupt file?)"
                          % (btype, value))
        elif why == R.BAD_TRAILER:
            self._problem("bad_block_trailer", "block type 0x%x: leading length %d, trailing "
                          "length %d" % (btype, _u32(data, pos + 4, big), value))
        elif why == R.SHORT_PACKET:
            if btype == 3:
                self._problem("bad_block_length", "simple packet block of %d bytes (minimum 16)"
                              % value)
            else:
                self._problem("bad_block_length", "packet block of %d bytes (minimum 32)"
                              % value)
        elif why == R.CAPLEN:
            self._problem("bad_record_length", "packet says %d bytes, block holds %d"
                          % (value, _u32(data, pos + 4, big) - 32))


_DECODE = (GEOMETRY, ib.OPCODE_TABLE, ib.FIELDS)


def _columns(records):
    """The walk's output: record offsets, captured and original lengths, stamps, link
    types, the two packet tables.  Each chunk gets its own: the walk fills the next chunk's
    while the analysis reads this one, and handing them over costs nothing (copying the
    packet columns out of one reused set was 6 % of the reader's time)."""
    return tuple(np.empty(records, np.int64) for _ in range(5)) + (
        np.empty((records, columns.P_COLUMNS), np.int64),
        np.empty((records, columns.X_COLUMNS), np.int64), np.zeros(5, np.int64))


class CutRecords:
    """Records the snaplen cut (captured length below the original length): how many,
    and the longest captured length among them (the snaplen they show)."""

    def __init__(self):
        self.records = 0
        self.caplen = 0

    def count(self, records, caplen):
        """``records`` more, the longest of them ``caplen`` bytes."""
        self.records += records
        self.caplen = max(self.caplen, caplen)

    def merge(self, other):
        self.records += other.records
        self.caplen = max(self.caplen, other.caplen)


class _Interfaces:
    """The interfaces of a pcapng section, as the columns the walk reads."""

    def __init__(self):
        self.link, self.mode, self.exp, self.offset, self.snap = [], [], [], [], []

    @property
    def count(self):
        return len(self.link)

    def add(self, idb):
        link, mode, exp, offset_s, snap = idb
        self.link.append(link)
        self.mode.append(mode)
        self.exp.append(exp)
        self.offset.append(offset_s * 1_000_000_000)
        self.snap.append(snap)
        self._columns = None

    def columns(self):
        if getattr(self, "_columns", None) is None:
            cols = [np.array(c or [0], dtype=np.int64) for c in
                    (self.link, self.mode, self.exp, self.offset, self.snap)]
            self._columns = cols + [self.count]
        return self._columns


#: the largest interface clock offset (seconds) whose nanoseconds an int64 holds
MAX_OFFSET_S = (2 ** 63 - 1) // 1_000_000_000


def _u32(data, pos, big):
    return struct.unpack_from(">I" if big else "<I", data, pos)[0]


def _parse_idb(data, p, blen, big):
    """(link_type, resolution base 10 or 2, exponent, offset seconds, snaplen) of an IDB."""
    bo = ">" if big else "<"
    lt, _res, snap = struct.unpack_from(bo + "HHI", data, p + 8)
    mode, exp, off = 10, 6, 0
    q = p + 16
    oend = p + blen - 4
    while q + 4 <= oend:
        code, olen = struct.unpack_from(bo + "HH", data, q)
        if code == 0:
            break
        v = q + 4
        if v + olen > oend:
            break                       # malformed option: keep what we have
        if code == 9 and olen >= 1:     # if_tsresol
            r = data[v]
            mode, exp = (2, min(r & 0x7F, 62)) if r & 0x80 else (10, min(r, 18))
        elif code == 14 and olen >= 8:  # if_tsoffset (signed seconds)
            off = struct.unpack_from(bo + "q", data, v)[0]
        q = v + ((olen + 3) & ~3)
    return lt, mode, exp, off, snap


def _pcapng_first_linktype(data, end, big):
    """Link type of the first IDB found in the already-read prefix, else -1."""
    p = 0
    for _ in range(256):
        if end - p < 12:
            break
        btype, blen = _u32(data, p, big), _u32(data, p + 4, big)
        if blen < 12 or blen & 3 or end - p < blen:
            break
        if btype == R.SHB_TYPE and p:
            break                       # a new section may change byte order
        if btype == 1 and blen >= 20:
            return struct.unpack_from(">H" if big else "<H", data, p + 8)[0]
        p += blen
    return -1

"""The record walks of pcap and pcapng, compiled (numba).

Finding where each record starts is a serial pointer chase: every length
decides where the next header is.  Python does it at about 2 M records/s; these
loops do it at memory speed and fill columns (record offset, captured length,
original length on the wire, timestamp in ns, link type) for the columnar engine, and decode each record's
IB headers (ib.decode_one) while its first bytes are in the cache.  The chase
waits on memory at every record unless the lines ahead of it are already on their
way: the walk asks for every cache line up to ``AHEAD`` bytes past the record it
reads (``_fetch_ahead``), so the next headers arrive while this one is decoded.

Each walk stops at the end of the bytes it was given, at a record it cannot
trust, or at a block Python handles itself (pcapng section and interface
headers, which change byte order, link types and clocks); it returns the
number of records found, where it stopped and why.  The caller turns a stop
into a refill or a problem (see files.py).
"""

import numpy as np

from .columns import P_KIND, X_MIRROR
from .jit import compiled, helper, prefetch

from .ib import decode_one

# why a walk stopped
FULL = 0           # the output columns are full
NEED = 1           # the bytes end inside a header or a record (value: bytes needed)
BAD_LENGTH = 2     # pcap: incl_len above the limit (value: incl_len)
SECTION = 3        # pcapng: a section header block at the position
INTERFACE = 4      # pcapng: an interface description block at the position
BAD_BLOCK = 5      # pcapng: block length < 12, unaligned or too large (value: length)
BAD_TRAILER = 6    # pcapng: trailing length differs (value: trailing length)
SHORT_PACKET = 7   # pcapng: EPB/PB shorter than 32 bytes or SPB shorter than 16 (value: length)
CAPLEN = 8         # pcapng: captured length beyond the block (value: caplen)
NO_INTERFACE = 9   # pcapng: packet on an undescribed interface (value: interface id)
PCAP_HEADER = 10   # pcap: a new global header where a record should start (a writer restarted)

SHB_TYPE = 0x0A0D0D0A
MAX_BLOCK = 16 * 1024 * 1024
NS = 1_000_000_000
AHEAD = 4096       # bytes ahead of the walk asked of the memory system
LINE = 64          # bytes of a cache line


@helper
def _fetch_ahead(buf, fetched, p, end):
    """Prefetch the lines from ``fetched`` (where the last call stopped) to ``AHEAD``
    bytes past ``p``; returns where it stopped."""
    until = min(p + AHEAD, end)
    while fetched < until:
        prefetch(buf, fetched)
        fetched += LINE
    return fetched


@helper
def u32(buf, p, big):
    if big:
        return ((np.int64(buf[p]) << 24) | (np.int64(buf[p + 1]) << 16)
                | (np.int64(buf[p + 2]) << 8) | np.int64(buf[p + 3]))
    return (np.int64(buf[p]) | (np.int64(buf[p + 1]) << 8)
            | (np.int64(buf[p + 2]) << 16) | (np.int64(buf[p + 3]) << 24))


@helper
def u16(buf, p, big):
    if big:
        return (np.int64(buf[p]) << 8) | np.int64(buf[p + 1])
    return np.int64(buf[p]) | (np.int64(buf[p + 1]) << 8)


@helper
def _pcap_header(buf, p):
    """A pcap global header at ``p`` (8 bytes there): a magic, then version 2.4,
    in either byte order.  A record header looks like it only when stamped at one
    particular second (in 2011, 2055 or 2083) and fraction."""
    a, b, c, d = buf[p], buf[p + 1], buf[p + 2], buf[p + 3]
    if c == 0xB2 and d == 0xA1 and ((a == 0xD4 and b == 0xC3) or (a == 0x4D and b == 0x3C)):
        return buf[p + 4] == 2 and buf[p + 5] == 0 and buf[p + 6] == 4 and buf[p + 7] == 0
    if a == 0xA1 and b == 0xB2 and ((c == 0xC3 and d == 0xD4) or (c == 0x3C and d == 0x4D)):
        return buf[p + 4] == 0 and buf[p + 5] == 2 and buf[p + 6] == 0 and buf[p + 7] == 4
    return False


@compiled
def walk_pcap(buf, pos, end, stop, big, nano, limit, link, offs, caplens, origlens, stamps,
              links, packets, extra, tally, geometry, optable, fields):
    """pcap records from ``pos`` (a chunk ends past ``stop``): returns (count, position,
    why, value); ``tally``: see _tally."""
    n = 0
    tally[:] = 0
    room = offs.shape[0]
    scale = 1 if nano else 1000
    fetched = pos
    while n < room and pos < stop:
        if end - pos < 16:
            return n, pos, NEED, 16
        fetched = _fetch_ahead(buf, fetched, pos, end)
        if _pcap_header(buf, pos):
            return n, pos, PCAP_HEADER, 24
        incl = u32(buf, pos + 8, big)
        if incl > limit:
            return n, pos, BAD_LENGTH, incl
        if end - pos - 16 < incl:
            return n, pos, NEED, 16 + incl
        offs[n] = pos + 16
        caplens[n] = incl
        origlens[n] = max(incl, u32(buf, pos + 12, big))
        stamps[n] = u32(buf, pos, big) * NS + u32(buf, pos + 4, big) * scale
        links[n] = link
        decode_one(buf, pos + 16, incl, origlens[n], link, geometry, optable, fields, packets,
                   extra, n)
        _tally(n, packets, extra, links, caplens, origlens, tally)
        pos += 16 + incl
        n += 1
    return n, pos, FULL, 0


@helper
def _tally(n, packets, extra, links, caplens, origlens, tally):
    """Count record ``n`` as it is decoded, so that no pass over a chunk's columns is
    made for it after (files.Chunk.counts, files.CutRecords): ``tally[0]`` the records
    with IB headers, ``tally[1]`` those a mirror carried, ``tally[2]`` those of another
    link type than the chunk's first, ``tally[3]`` those the snaplen cut and
    ``tally[4]`` the longest captured length of these."""
    if packets[n, P_KIND] != 0:
        tally[0] += 1
    if extra[n, X_MIRROR] != 0:
        tally[1] += 1
    if links[n] != links[0]:
        tally[2] += 1
    if caplens[n] < origlens[n]:
        tally[3] += 1
        tally[4] = max(tally[4], caplens[n])


@helper
def _stamp(units, mode, exp, offset_ns):
    """Interface timestamp units -> ns: resolution 10**-exp (mode 10) or 2**-exp."""
    if mode == 10:
        if exp <= 9:
            ns = units * 10 ** (9 - exp)
        else:
            ns = units // 10 ** (exp - 9)
    else:
        whole = units >> exp
        frac = units - (whole << exp)
        ns = whole * NS + np.int64(frac * (NS / 2.0 ** exp))
    return ns + offset_ns


@compiled
def walk_pcapng(buf, pos, end, stop, big, if_link, if_mode, if_exp, if_offset, if_snap, n_if,
                last_stamp, offs, caplens, origlens, stamps, links, packets, extra, tally, geometry,
                optable, fields):
    """pcapng packet blocks from ``pos`` (a chunk ends past ``stop``); returns (count,
    position, why, value, last_stamp); ``tally``: see _tally."""
    n = 0
    tally[:] = 0
    room = offs.shape[0]
    fetched = pos
    while n < room and pos < stop:
        if end - pos < 12:
            return n, pos, NEED, 12, last_stamp
        fetched = _fetch_ahead(buf, fetched, pos, end)
        btype = u32(buf, pos, big)
        if btype == SHB_TYPE:
            return n, pos, SECTION, 0, last_stamp
        blen = u32(buf, pos + 4, big)
        if blen < 12 or blen & 3 or blen > MAX_BLOCK:
            return n, pos, BAD_BLOCK, blen, last_stamp
        if end - pos < blen:
            return n, pos, NEED, blen, last_stamp
        trailer = u32(buf, pos + blen - 4, big)
        if trailer != blen:
            return n, pos, BAD_TRAILER, trailer, last_stamp
        if btype == 6 or btype == 2:                  # EPB, obsolete packet block
            if blen < 32:
                return n, pos, SHORT_PACKET, blen, last_stamp
            if btype == 6:
                iface = u32(buf, pos + 8, big)
            else:
                iface = u16(buf, pos + 8, big)
            caplen = u32(buf, pos + 20, big)
            if caplen > blen - 32:
                return n, pos, CAPLEN, caplen, last_stamp
            if iface >= n_if:
                return n, pos, NO_INTERFACE, iface, last_stamp
            units = (u32(buf, pos + 12, big) << 32) | u32(buf, pos + 16, big)
            last_stamp = _stamp(units, if_mode[iface], if_exp[iface], if_offset[iface])
            offs[n] = pos + 28
            caplens[n] = caplen
            origlens[n] = max(caplen, u32(buf, pos + 24, big))
            stamps[n] = last_stamp
            links[n] = if_link[iface]
            decode_one(buf, pos + 28, caplen, origlens[n], links[n], geometry, optable, fields,
                       packets, extra, n)
            _tally(n, packets, extra, links, caplens, origlens, tally)
            n += 1
        elif btype == 3:                              # simple packet block
            if blen < 16:
                return n, pos, SHORT_PACKET, blen, last_stamp
            if n_if == 0:
                return n, pos, NO_INTERFACE, -1, last_stamp
            original = u32(buf, pos + 8, big)
            caplen = min(original, blen - 16)
            if if_snap[0] and caplen > if_snap[0]:
                caplen = if_snap[0]
            offs[n] = pos + 12
            caplens[n] = caplen
            origlens[n] = max(caplen, original)
            stamps[n] = last_stamp
            links[n] = if_link[0]
            decode_one(buf, pos + 12, caplen, origlens[n], links[n], geometry, optable, fields,
                       packets, extra, n)
            _tally(n, packets, extra, links, caplens, origlens, tally)
            n += 1
        elif btype == 1:
            return n, pos, INTERFACE, 0, last_stamp
        pos += blen
    return n, pos, FULL, 0, last_stamp

"""Small formatters shared by the renderers: sizes, times, errno and RNBD names,
so that no Python representation (None, bytes, dicts) reaches the output."""

import functools
import math
from datetime import datetime, timezone

import numpy as np

from ..spec.constants import (
    RNBD_OP_FLUSH, RNBD_OP_MASK, errno_name, rnbd_access_mode, short_name,
)
from ..layout.wire import ENUMS



def size(n):
    """Bytes as '4.0 KiB'."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return "%d %s" % (n, unit) if unit == "B" else "%.1f %s" % (n, unit)
        n /= 1024.0


def plural(count, word, words=None):
    return "%d %s" % (count, word if count == 1 else (words or word + "s"))


def utc_iso(ts):
    """Epoch seconds as UTC ISO 8601 with microseconds: 2026-11-29T12:34:56.123456Z.

    The date and time of a whole second are formatted once (message lines come many
    per second); the microseconds are rounded as ``datetime.fromtimestamp`` does
    (half to even, of the float's fraction)."""
    fraction, whole = math.modf(ts)
    micro = round(fraction * 1e6)
    if micro >= 1000000:
        whole, micro = whole + 1, micro - 1000000
    elif micro < 0:
        whole, micro = whole - 1, micro + 1000000
    return "%s.%06dZ" % (_second_iso(int(whole)), micro)


def rounded(values, digits):
    """``round(v, digits)`` of each value (Python's: correctly rounded), NaN kept.

    ``rint(v * 10**digits) / 10**digits`` is Python's result unless the scaled value,
    rounded to a double, fell on the other side of a half (or on it): the values
    within a few units in the last place of a half are rounded by Python."""
    scale = 10.0 ** digits
    scaled = values * scale
    out = np.rint(scaled) / scale
    near_half = np.abs(scaled - np.floor(scaled) - 0.5) <= 4 * np.spacing(np.abs(scaled))
    for k in np.flatnonzero(near_half).tolist():
        out[k] = round(float(values[k]), digits)
    return out


@functools.lru_cache(maxsize=4096)
def _second_iso(second):
    return datetime.fromtimestamp(second, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")


def errno_text(errno):
    """-5 -> '-5 EIO'."""
    return "%d %s" % (errno, errno_name(errno))


def reason_name(reason):
    """IBTA CM REJ reason name (8 -> 'Invalid Service ID')."""
    return ENUMS["cm_rej_reasons"].get(reason, "reason %d" % reason)



#: the summary's mirror and tunnel encapsulations (capture/links.py MIRRORS): their words,
#: and whether the capture is a switch's mirror or an overlay's underlay
ENCAPSULATIONS = {
    "erspan1": ("ERSPAN type I", "mirrored"), "erspan2": ("ERSPAN type II", "mirrored"),
    "erspan3": ("ERSPAN type III", "mirrored"),
    "gre_teb": ("GRE transparent Ethernet bridging", "mirrored"),
    "gre": ("GRE", "tunnelled"), "vxlan": ("VXLAN", "tunnelled"),
    "geneve": ("Geneve", "tunnelled"), "mpls": ("MPLS", "tunnelled"),
}


def encapsulation_texts(mirror):
    """``capture.mirror`` (an entry or a list of them) as ``mirrored: ERSPAN type II,
    session 7``, one text per entry."""
    texts = []
    for entry in mirror if isinstance(mirror, list) else [mirror]:
        words, verb = ENCAPSULATIONS[entry["encapsulation"]]
        ids = ["%s %d" % ("VNI" if key == "vni" else key, value)
               for key, value in entry.items() if key != "encapsulation"]
        texts.append("%s: %s" % (verb, ", ".join([words] + ids)))
    return texts


def has_sector(rw):
    """A FLUSH carries no sector: the kernel sends blk_rq_pos() of a flush, (u64)-1."""
    return rw & RNBD_OP_MASK != RNBD_OP_FLUSH


def access_mode(mode):
    """enum rnbd_access_mode -> 'ro', 'rw', 'migration'."""
    return short_name(rnbd_access_mode, mode, "RNBD_ACCESS_").lower()


def version_text(version):
    """The 16-bit RTRS protocol version (major << 8 | minor) as '2.0'."""
    return "%d.%d" % (version >> 8, version & 0xFF)


#: values json_value passes through as they are (most of a record's fields)
_PLAIN = frozenset((int, float, str, bool, type(None)))


def json_value(value):
    """Bytes as hex strings (recursively), everything else unchanged."""
    if type(value) in _PLAIN:
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, dict):
        if _PLAIN.issuperset(map(type, value.values())):   # nothing to convert: a copy
            return dict(value)
        return {k: v if type(v) in _PLAIN else json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    return value


def clock_offset_text(entry):
    """A merged kernel log's clock (kernel_log/merge.py): 'capture time = uptime +
    1795965426.337336 s ± 0.3 ms (13 events, boot at …); rnbd0 = /dev/loop0@lab1'."""
    clock = "uptime" if entry["clock"] == "uptime" else "its clock"
    if entry["offset_s"] is None:
        return "%d lines, no event shared with the capture: not placed" % entry["lines"]
    if not entry["events_matched"]:
        text = "%d lines, no event shared with the capture: placed by its own clock (UTC)" \
            % entry["lines"]
    else:
        spread = "± %s" % _seconds(entry["uncertainty_s"]) \
            if entry["uncertainty_s"] is not None else "uncertainty unknown"
        text = "capture time = %s %+.6f s %s (%s)" % (
            clock, entry["offset_s"], spread, plural(entry["events_matched"], "event"))
        if entry["clock"] == "uptime":
            text += ", booted %s" % utc_iso(entry["offset_s"])
    names = ", ".join("%s = %s" % kv for kv in sorted(entry["device_names"].items()))
    return text + ("; " + names if names else "")


def _seconds(value):
    if value < 1e-3:
        return "%.0f µs" % (value * 1e6)
    if value < 1:
        return "%.1f ms" % (value * 1e3)
    return "%.1f s" % value

"""The RTRS/RNBD lines of a kernel log file, with their stamps.

A stamp is either the kernel's uptime (dmesg, a serial console: ``[  8.564334]``)
or a wall clock (``dmesg -T``, ``journalctl -k -o short-precise`` or
``short-iso-precise``, ``dmesg --time-format iso``), read as UTC: the offset
found against the capture absorbs a time zone.  Other lines are skipped.
"""

import calendar
import gzip
import os
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import List

MAX_LINE = 4096          # characters of a line that are read (a log line is short)

WANTED = re.compile(r"rtrs|rnbd", re.IGNORECASE)
UPTIME = re.compile(r"^(?:<\d+>)?\[\s*(\d{1,10}\.\d{1,9})\]\s?(.*)$")
DMESG_T = re.compile(r"^\[(\w{3} +\w{3} +\d{1,2} +\d\d:\d\d:\d\d +\d{4})\]\s?(.*)$")
JOURNAL = re.compile(r"^(\w{3} +\d{1,2} +\d\d:\d\d:\d\d(?:\.\d{1,9})?) +\S+ +kernel: ?(.*)$")
ISO = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d{1,9})?)([+-]\d\d:?\d\d|Z)?"
                 r"(?: +\S+ +kernel:)? ?(.*)$")


@dataclass
class Line:
    stamp: float        # seconds: uptime, or epoch when the log's clock is a wall clock
    text: str
    number: int         # 1-based line number in the file


@dataclass
class KernelLog:
    """One file's RTRS/RNBD lines; ``clock`` is "uptime" or "wall"; ``resolution``
    the stamps' step in seconds (1 for ``dmesg -T``)."""
    name: str
    clock: str = "uptime"
    resolution: float = 1e-6
    lines: List[Line] = field(default_factory=list)
    skipped: int = 0    # lines that are not RTRS/RNBD kernel lines


def _open(path):
    with open(path, "rb") as probe:
        magic = probe.read(2)
    if magic == b"\x1f\x8b":
        return gzip.open(path, "rt", encoding="utf-8", errors="replace")
    return open(path, "rt", encoding="utf-8", errors="replace")


def read_log(path, year=None):
    """The RTRS/RNBD lines of ``path`` (gzip too).  ``year``: for journal stamps,
    which have none (the capture's).  OSError when it cannot be read."""
    log = KernelLog(os.path.basename(path))
    with _open(path) as text:
        for number, raw in enumerate(_lines(text), 1):
            parsed = parse_line(raw.rstrip("\r\n"), year)
            if parsed is None or not WANTED.search(parsed[2]):
                log.skipped += 1
                continue
            clock, stamp, body, resolution = parsed
            if not log.lines:
                log.clock, log.resolution = clock, resolution
            elif clock != log.clock:   # one clock per file
                log.skipped += 1
                continue
            log.lines.append(Line(stamp, body.strip(), number))
    return log


def _lines(text):
    """The lines of ``text``, each cut at MAX_LINE characters: a line without an end
    costs no more memory than a short one."""
    while True:
        line = text.readline(MAX_LINE)
        if not line:
            return
        rest = line
        while not rest.endswith("\n"):     # skip the rest of an overlong line
            rest = text.readline(MAX_LINE)
            if not rest:
                break
        yield line


def parse_line(raw, year=None):
    """(clock, stamp, text, resolution) of one log line, None without a stamp."""
    line = raw.lstrip("\x00")
    match = UPTIME.match(line)
    if match:
        return "uptime", float(match.group(1)), match.group(2), 1e-6
    match = DMESG_T.match(line)
    if match:
        try:
            when = datetime.strptime(" ".join(match.group(1).split()), "%a %b %d %H:%M:%S %Y")
        except ValueError:
            return None
        return "wall", float(calendar.timegm(when.timetuple())), match.group(2), 1.0
    match = JOURNAL.match(line)
    if match:
        stamp, _, fraction = match.group(1).partition(".")
        try:
            when = datetime.strptime("%d %s" % (year or 1970, " ".join(stamp.split())),
                                     "%Y %b %d %H:%M:%S")
        except ValueError:
            return None
        return ("wall", calendar.timegm(when.timetuple()) + float("0." + (fraction or "0")),
                match.group(2), 10.0 ** -len(fraction) if fraction else 1.0)
    match = ISO.match(line)
    if match:
        stamp, _, fraction = match.group(1).replace(",", ".").partition(".")
        try:
            when = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc)
        except ValueError:
            return None
        zone = _zone_seconds(match.group(2))
        return ("wall", when.timestamp() + float("0." + (fraction or "0")) - zone,
                match.group(3), 10.0 ** -len(fraction) if fraction else 1.0)
    return None


def _zone_seconds(zone):
    if not zone or zone == "Z":
        return 0
    sign = -1 if zone[0] == "-" else 1
    digits = zone[1:].replace(":", "")
    return sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)

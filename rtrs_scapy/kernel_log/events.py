"""What a kernel line says that the capture shows too (the printk formats of
drivers/infiniband/ulp/rtrs and drivers/block/rnbd, and the block layer's
``I/O error`` line).

Each event is a dict with ``kind``: ``io_error`` (block layer: ``dev`` rnbdN,
``sector``, ``op``), ``io_failed`` (RTRS: ``session``, ``errno``, ``client``,
``server``), ``open_failed`` (RNBD: ``session``, ``device`` path, ``errno``),
``reject`` (a CM REJ, or the connection attempt it ended: ``session``, or the path's
``client`` and ``server``), ``disconnect`` (``session``, ``device``).
"""

import re

_CLIENT = r"ip:(?P<client>[0-9A-Fa-f:.]+)"
_SERVER = r"ip:(?P<server>[0-9A-Fa-f:.]+)"
PATTERNS = (
    ("io_error", re.compile(r"I/O error, dev (?P<dev>rnbd\d+), sector (?P<sector>\d+) "
                            r"op 0x[0-9a-f]+:\((?P<op>[A-Z_]+)\)")),
    ("io_failed", re.compile(r"<(?P<session>[^>]+)>: IO request failed: error=-(?P<errno>\d+) "
                             r"path=" + _CLIENT + "@" + _SERVER)),
    ("io_failed", re.compile(r"<(?P<session>[^>]+)>: Processing (?:read|write) request "
                             r"failed, .*err: -(?P<errno>\d+)")),
    ("open_failed", re.compile(r"<(?P<device>/[^@>]+)@(?P<session>[^>]+)> Opening failed, "
                               r"server responded: -(?P<errno>\d+)")),
    ("open_failed", re.compile(r"Opening device '(?P<device>[^']+)' on session "
                               r"(?P<session>\S+) failed.*err: -(?P<errno>\d+)")),
    ("reject", re.compile(r"<(?P<session>[^>]+)>: Connect rejected")),
    ("reject", re.compile(r"<(?P<session>[^>]+)>: init_conns\(\) failed: err=-\d+ path=" +
                          _CLIENT + "@" + _SERVER)),
    ("reject", re.compile(r"<" + _SERVER + "@" + _CLIENT + r">: CM error \(CM event: "
                          r"rejected")),
    ("disconnect", re.compile(r"<(?P<device>/[^@>]+)@(?P<session>[^>]+)> "
                              r"Device disconnected")),
)

#: the block layer's op names as RNBD's (the summary's ``rnbd_op``)
BLOCK_OPS = {"READ": "read", "WRITE": "write", "FLUSH": "flush", "DISCARD": "discard",
             "SECURE_ERASE": "secure_erase", "WRITE_ZEROES": "write_zeroes"}


def event_of(text):
    """The event a line shows, or None."""
    for kind, pattern in PATTERNS:
        match = pattern.search(text)
        if match is None:
            continue
        found = {k: v for k, v in match.groupdict().items() if v is not None}
        event = {"kind": kind}
        if kind == "io_error":
            event.update(dev=found["dev"], sector=int(found["sector"]),
                         op=BLOCK_OPS.get(found["op"], found["op"].lower()))
            return event
        if "session" in found:
            event["session"] = found["session"]
        if "errno" in found:
            event["errno"] = -int(found["errno"])
        if "device" in found:
            event["device"] = found["device"]
        if "client" in found:
            event["client"], event["server"] = found["client"], found["server"]
        return event
    return None

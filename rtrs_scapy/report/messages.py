"""The analyzer's message records as ``rtrs-dissect messages`` shows them: the
session each belongs to, filters, one text line (with a column header), the JSON
object per record, and the session context of one frame (``rtrs-dissect show``).

A record, as the analyzer builds it: frame, time (epoch s), src, dst, qpn (the
destination QPN), cid, msg, fields, rnbd, rnbd_reply (OPEN/SESS_INFO), paired_frame,
latency (s), sess_uuid, client, server.  What the summary knows (session name,
paths_uuid, device names) and the capture start are added here.
"""

import heapq
import re

import numpy as np

from ..analysis.records import RecordList
from ..analysis.naming import match_device, match_sessions, summary_label
from ..spec.constants import RNBD_OP_NAMES, RNBD_SECTOR_SIZE as SECTOR, RTRS_MSG_NEW_RKEY_F, \
    rnbd_end_sector, rnbd_op_name
from .words import (
    access_mode, errno_text, has_sector, json_value, reason_name, size,
    utc_iso, version_text,
)

#: what a record's ``msg`` can be (``--msg``)
MESSAGE_KINDS = ("conn_req", "conn_rsp", "conn_rej", "info_req", "info_rsp", "read", "write",
                 "io_rsp", "hb_msg", "hb_ack", "disconnect", "kernel_log")
#: the messages of other RDMA protocols' connections (``--other``), not RTRS's
OTHER = "other"
#: RNBD IO operations and control messages (``--op``)
RNBD_OPS = RNBD_OP_NAMES
RNBD_CONTROL = ("sess_info", "open", "close")
REQUESTS = ("read", "write")
#: kernel lines that ``--errors`` keeps: failure events, and lines that say so
FAILURES = ("io_error", "io_failed", "open_failed", "reject")
FAILED = re.compile(r"fail|error", re.IGNORECASE)
#: one text line: frame, time (UTC), seconds since the first frame, session, src → dst,
#: dst_qpn, cid, message, details (the one place the columns' widths are written)
LINE = "%6s  %-27s %11.6f  %-8s %-31s %7s %3s  %-10s %s"
HEADER = LINE.replace("%11.6f", "%11s") % (
    "frame", "time (UTC)", "+s", "session", "src → dst", "dst_qpn", "cid", "message",
    "details")


class SessionRef:
    """One session of the summary, as records and ``--session`` refer to it."""

    def __init__(self, session, index):
        self.index = index
        self.label = summary_label(session)
        self.name = session["sessname"]
        self.paths_uuid = session["paths_uuid"]
        self.sess_uuids = [p["sess_uuid"] for p in session["paths"] if p["sess_uuid"]]
        self.unnamed_paths = ["%s → %s" % (p["client"], p["server"]) for p in session["paths"]
                              if not p["sess_uuid"]]
        devices = (session.get("rnbd") or {}).get("devices")
        if devices is not None:
            self.devices = {str(k): d["name"] for k, d in devices.items() if d.get("name")}
        else:  # per path (before the session-level RNBD view)
            self.devices = {str(k): v for p in session["paths"]
                            for k, v in p.get("devices", {}).items()}

    def describe(self):
        """The session and its ids, in one line."""
        ids = ["paths_uuid " + self.paths_uuid] if self.paths_uuid else []
        ids += ["sess_uuid " + u for u in self.sess_uuids]
        name = self.label if self.name else "%s (no name in the capture)" % self.label
        if ids:
            return "%s: %s" % (name, ", ".join(ids))
        return "%s: handshake not captured (path %s)" % (name, ", ".join(self.unnamed_paths))


class MessageView:
    """The records of one analysis with what the summary knows about them."""

    def __init__(self, summary, records, kernel_lines=()):
        self.records = records
        self.kernel_lines = [dict(line, msg="kernel_log", frame=None) for line in kernel_lines]
        self.summary = summary
        self.first_ts = summary["capture"]["first_ts"]
        self.sessions = [SessionRef(s, i) for i, s in enumerate(summary["sessions"])]
        self._by_path = {}
        for ref, session in zip(self.sessions, summary["sessions"]):
            for path in session["paths"]:
                self._by_path[_path_key(path)] = ref
        # response frame -> request record, request frame -> response record
        self.request_of, self.response_of = _partners(records)

    # -- sessions ------------------------------------------------------------

    def session_of(self, rec):
        if rec["msg"] == "kernel_log":
            return next((r for r in self.sessions if r.label == rec["session"]), None)
        return self._by_path.get(_path_key(rec))

    def find_sessions(self, wanted):
        """The sessions ``wanted`` names (naming.py); LookupError listing them."""
        return [self.sessions[i] for i in match_sessions(self.summary["sessions"], wanted)]

    def find_device(self, wanted):
        """The devices ``wanted`` names (naming.py); LookupError listing them."""
        return match_device(self.summary["sessions"], wanted)

    # -- what a record is about ------------------------------------------------

    def rnbd_of(self, rec):
        """The RNBD message of a request, or of the request a response answers."""
        if rec["msg"] == "io_rsp":
            req = self.request_of.get(rec["frame"])
            return req["rnbd"] if req is not None else None
        return rec["rnbd"]

    def failed(self, rec):
        """A reject, a refused connection, a failed IO response or its request."""
        msg = rec["msg"]
        if msg == "conn_rej":
            return True
        if msg in ("conn_rsp", "io_rsp"):
            return bool(rec["fields"].get("errno"))
        if msg in REQUESTS:
            rsp = self.response_of.get(rec["frame"])
            return rsp is not None and bool(rsp["fields"]["errno"])
        return False

    # -- filters -----------------------------------------------------------------

    def select(self, session=None, kinds=(), errors=False, device=None, op=None,
               sectors=None, min_latency_us=None):
        """Records (and kernel lines, in time order) matching every given filter;
        ``session``: SessionRefs (find_sessions), ``device``: entries (find_device)."""
        for rec in self._in_time_order():
            if kinds and rec["msg"] not in kinds:
                continue
            if session is not None and self.session_of(rec) not in session:
                continue
            if rec["msg"] == "kernel_log":
                if op is None and sectors is None and min_latency_us is None and \
                        self._kernel_line_wanted(rec, errors, device):
                    yield rec
                continue
            if errors and not self.failed(rec):
                continue
            if min_latency_us is not None and (
                    rec["latency"] is None or rec["latency"] * 1e6 < min_latency_us):
                continue
            if device is not None or op is not None or sectors is not None:
                rnbd = self.rnbd_of(rec)
                if rnbd is None:
                    continue
                if device is not None and not self._of_device(rec, rnbd, device):
                    continue
                if op is not None and _rnbd_kind(rnbd) != op:
                    continue
                if sectors is not None and not _overlaps(rnbd, sectors):
                    continue
            yield rec

    def _of_device(self, rec, rnbd, devices):
        """Is this RNBD message about one of ``devices`` (session index, id, path,
        client name)?  An OPEN by its path, the rest by the session's device id."""
        ref = self.session_of(rec)
        if ref is None:
            return False
        if rnbd.get("dev_name"):  # OPEN
            return any(ref.index == d[0] and rnbd["dev_name"] == d[2] for d in devices)
        return any(ref.index == d[0] and d[1] is not None and rnbd.get("device_id") == d[1]
                   for d in devices)

    def _kernel_line_wanted(self, rec, errors, devices):
        """A kernel line passes --errors when it tells of a failure, --device when it
        names the device (its path or the client's name)."""
        from ..kernel_log.events import event_of   # (8 ms of parsers, only with --log)
        event = event_of(rec["text"])
        if errors and not (event and event["kind"] in FAILURES or FAILED.search(rec["text"])):
            return False
        if devices is not None:
            names = {n for d in devices for n in (d[2], d[3]) if n}
            return any(re.search(r"(?<![\w/])%s(?!\w)" % re.escape(n), rec["text"]) for n in names)
        return True

    def _in_time_order(self):
        """The records, with the kernel lines merged in by time."""
        if not self.kernel_lines:
            return iter(self.records)
        return heapq.merge(self.records, self.kernel_lines, key=lambda r: r["time"])

    def _request(self, rec):
        return self.request_of.get(rec["frame"], rec) if rec["msg"] == "io_rsp" else rec

    # -- output ------------------------------------------------------------------

    def as_json(self, rec):
        """The documented JSON object of one record."""
        ref = self.session_of(rec)
        if rec["msg"] == "kernel_log":
            return {"frame": None, "time": rec["time"], "time_iso": utc_iso(rec["time"]),
                    "time_rel": round(rec["time"] - self.first_ts, 6),
                    "session": ref.label if ref else None, "client": rec["client"],
                    "server": rec["server"], "msg": "kernel_log", "log": rec["log"],
                    "text": rec["text"]}
        out = {
            "frame": rec["frame"], "time": rec["time"], "time_iso": utc_iso(rec["time"]),
            "time_rel": round(rec["time"] - self.first_ts, 6),
            "session": ref.label if ref else None,
            "paths_uuid": ref.paths_uuid if ref else None,
            "sess_uuid": rec["sess_uuid"], "client": rec["client"], "server": rec["server"],
            "src": rec["src"], "dst": rec["dst"], "dst_qpn": rec["qpn"], "cid": rec["cid"],
            "msg": rec["msg"], "fields": json_fields(rec["msg"], rec["fields"]),
            "rnbd": json_rnbd(rec["rnbd"]), "paired_frame": rec["paired_frame"],
            "latency_us": None if rec["latency"] is None else round(rec["latency"] * 1e6, 1),
        }
        if rec.get("rnbd_reply"):
            out["rnbd_reply"] = json_value(rec["rnbd_reply"])
        return out

    def line(self, rec):
        """One text line under HEADER."""
        ref = self.session_of(rec)
        session = ref.label if ref else None
        if rec["msg"] == "kernel_log":
            return (LINE % (
                "-", utc_iso(rec["time"]), rec["time"] - self.first_ts, session or "-",
                rec["log"], "-", "-", "kernel_log", rec["text"])).rstrip()
        text = LINE % (
            rec["frame"], utc_iso(rec["time"]), rec["time"] - self.first_ts, session or "-",
            "%s → %s" % (rec["src"], rec["dst"]), "0x%x" % rec["qpn"],
            "-" if rec["cid"] is None else rec["cid"], rec["msg"], self.details(rec, ref))
        return text.rstrip()

    def details(self, rec, ref=False):
        """The details column of a record (``ref``: its session, when known)."""
        fields = rec["fields"]
        msg = rec["msg"]
        parts = DETAILS.get(msg, _nothing)(fields)
        if rec["rnbd"]:
            parts.append(self._rnbd_text(rec, ref))
        if msg == "io_rsp":
            req = self.request_of.get(rec["frame"])
            if req is not None:
                parts.append("answers frame %d after %.1f µs" % (req["frame"],
                                                                 rec["latency"] * 1e6))
                if req["rnbd"]:
                    parts.append("(%s)" % self._rnbd_text(req))
        elif rec["paired_frame"] is not None:
            rsp = self.response_of.get(rec["frame"])
            result = "" if rsp is None or not rsp["fields"]["errno"] else \
                ": " + errno_text(rsp["fields"]["errno"])
            parts.append("answered in frame %d after %.1f µs%s" % (
                rec["paired_frame"], rec["latency"] * 1e6, result))
            if fields.get("failed_over_to") is not None:
                parts.append("response not delivered: re-sent in frame %d"
                             % fields["failed_over_to"])
        elif msg in REQUESTS:
            if fields.get("failed_over_to") is not None:
                parts.append("no response: re-sent in frame %d" % fields["failed_over_to"])
            else:
                parts.append("no response in the capture")
        return "  ".join(p for p in parts if p)

    def _rnbd_text(self, rec, ref=False):
        rnbd = rec["rnbd"]
        kind = rnbd["msg"]
        if kind == "io":
            text = "RNBD %s %s" % (rnbd["rw_str"],
                                   self._device_text(rec, rnbd["device_id"], ref))
            if has_sector(rnbd["rw"]):
                text += " sector %d" % rnbd["sector"]
            if rnbd["bi_size"]:
                text += " len %d" % rnbd["bi_size"]
            return text
        if kind == "open":
            text = "RNBD OPEN %s %s" % (rnbd["dev_name"], access_mode(rnbd["access_mode"]))
            reply = rec.get("rnbd_reply")
            if reply:
                text += " → dev %d, %d sectors (%s)" % (
                    reply["device_id"], reply["nsectors"], size(reply["nsectors"] * SECTOR))
            return text
        if kind == "close":
            return "RNBD CLOSE %s" % self._device_text(rec, rnbd["device_id"], ref)
        if kind == "sess_info":
            reply = rec.get("rnbd_reply")
            return "RNBD SESS_INFO ver %d%s" % (
                rnbd["ver"], " → ver %d" % reply["ver"] if reply else "")
        return "RNBD " + kind.upper()

    def _device_text(self, rec, device_id, ref=False):
        if ref is False:
            ref = self.session_of(rec)
        name = ref.devices.get(str(device_id)) if ref is not None else None
        return "dev %d%s" % (device_id, " (%s)" % name if name else "")


def _partners(records):
    """(request_of, response_of): the request record of a response's frame, the
    response record of a request's frame."""
    if isinstance(records, RecordList):
        return ByFrame(records, 0), ByFrame(records, 1)
    request_of, response_of = {}, {}
    responses = {r["frame"]: r for r in records if r["msg"] == "io_rsp"}
    for rec in records:
        if rec["msg"] in REQUESTS and rec["paired_frame"] in responses:
            request_of[rec["paired_frame"]] = rec
            response_of[rec["frame"]] = responses[rec["paired_frame"]]
    return request_of, response_of


class ByFrame:
    """The partner records of closed columnar records by frame (``which``: 0 the
    request of a response, 1 the response of a request)."""

    def __init__(self, records, which):
        self.records = records.records
        self.which = which

    def get(self, frame, default=None):
        partner = self.records.partners()[self.which]
        for i in self.records.in_frame(frame).tolist():
            if partner[i] >= 0:
                return self.records.record(int(partner[i]))
        return default


def _nothing(fields):
    return []


def _path_key(item):
    """Paths and records share sess_uuid, client, server; a path without handshake has
    no sess_uuid and is known by its endpoints."""
    return item["sess_uuid"] or (item["client"], item["server"])


def _rnbd_kind(rnbd):
    return rnbd_op_name(rnbd["rw"]) if rnbd["msg"] == "io" else rnbd["msg"]


def _overlaps(rnbd, sectors):
    """Does an IO touch sectors FROM..TO (inclusive)?  It covers [sector, end)
    (rnbd_end_sector: the block layer's rule)."""
    if rnbd["msg"] != "io" or not has_sector(rnbd["rw"]):
        return False
    first = rnbd["sector"]
    end = rnbd_end_sector(first, rnbd["bi_size"])
    return max(first, sectors[0]) < min(end, sectors[1] + 1)


def json_fields(msg, fields):
    """A record's fields as its JSON object shows them (names beside numbers)."""
    out = json_value(fields)
    if msg in ("conn_req", "conn_rsp", "conn_rej"):  # a REJ may carry a conn_rsp
        if "version" in out:
            out["version"] = version_text(out["version"])
        if "magic" in out:
            out["magic"] = "0x%04x" % out["magic"]
    if out.get("errno"):
        out["errno_name"] = errno_text(out["errno"]).split()[1]
    if out.get("reason") is not None:
        out["reason_name"] = reason_name(out["reason"])
    return out


def json_rnbd(rnbd):
    """A record's RNBD header as its JSON object shows it (None without one)."""
    if rnbd is None:
        return None
    out = json_value(rnbd)
    if rnbd["msg"] == "io":
        out["op"] = rnbd_op_name(rnbd["rw"])
        if not has_sector(rnbd["rw"]):
            out["sector"] = None  # a FLUSH has none (the wire says (u64)-1)
    elif rnbd["msg"] == "open":
        out["access_mode_name"] = access_mode(rnbd["access_mode"])
    return out


def _conn_req(f):
    return ["cid %d of %d" % (f["cid"], f["cid_num"]), "recon_cnt %d" % f["recon_cnt"],
            "first_conn" if f["first_conn"] else "", "protocol " + version_text(f["version"]),
            "sess_uuid " + f["sess_uuid"]]


def _conn_rsp(f):
    if not f:
        return ["no RTRS conn_rsp"]
    if f["errno"]:
        return ["refused: errno " + errno_text(f["errno"])]
    return ["queue_depth %d" % f["queue_depth"], "max_io_size %d" % f["max_io_size"],
            "max_hdr_size %d" % f["max_hdr_size"],
            "always_invalidate %s" % ("Y" if f["flags"] & RTRS_MSG_NEW_RKEY_F else "N")]


def _conn_rej(f):
    parts = ["reason %d %s" % (f["reason"], reason_name(f["reason"]))]
    if f.get("errno"):
        parts.append("errno " + errno_text(f["errno"]))
    if f.get("sender"):
        parts.append("sent by the " + f["sender"])
    return parts


def _io_rsp(f):
    parts = ["msg_id %d" % f["msg_id"], "errno " + errno_text(f["errno"]) if f["errno"]
             else "OK"]
    if f.get("rkey_rsp"):
        parts.append("new rkey %d" % f["rkey_rsp"]["rkey"])
    if f["with_invalidate"]:
        parts.append("with invalidate")
    if f.get("not_delivered"):
        parts.append("not delivered (never acknowledged by the client)")
    return parts


def _request(f):
    parts = ["buf_id %d" % f["buf_id"], "offset %d" % f["offset"]]
    if f.get("header_only"):      # the snaplen cut the trailer
        parts.append("header only (usr_len, data_len unknown)")
    else:
        parts += ["usr_len %d" % f["usr_len"], "data_len %d" % f["data_len"]]
    if f.get("failover_from") is not None:
        parts.append("failed over from frame %d" % f["failover_from"])
    elif f.get("failover_unseen"):
        parts.append("failed over from %s (original not on the wire)" % f["failover_unseen"])
    return parts


def _disconnect(f):
    return [f["cm"] + (" by the %s" % f["initiator"] if f.get("initiator") else "")]


DETAILS = {
    "conn_req": _conn_req, "conn_rsp": _conn_rsp, "conn_rej": _conn_rej,
    "info_req": lambda f: ["pathname " + f["pathname"]],
    "info_rsp": lambda f: ["%d chunks" % f["sg_cnt"]],
    "read": _request, "write": _request, "io_rsp": _io_rsp, "disconnect": _disconnect,
    OTHER: lambda f: [f["protocol"], "%s of %d bytes" % (f["op"], f["length"])],
}


def _read_frame(capture, frame_no):
    from scapy.config import conf
    from ..capture import open_capture
    with open_capture(capture) as cap:
        for number, _ts, buf, start, end, link_type in cap:
            if number == frame_no:
                cls = conf.l2types.get(link_type, conf.raw_layer)
                return cls(bytes(buf[start:end]))
    return None


def frame_context(result, capture, frame_no):
    """(Scapy packet, lines of session context) of one frame."""
    import rtrs_scapy  # noqa: F401  (layers bound)
    from ..layers.ib import ImmDt
    packet = _read_frame(capture, frame_no)
    if packet is None:
        return None, []
    view = MessageView(result.summary, result.messages)
    paths = {_path_key(p): p for s in result.summary["sessions"] for p in s["paths"]}
    lines = []
    records = _at_frame(result.messages, frame_no)
    if records:
        lines.append(HEADER.rstrip())
    for record in records:
        path = paths.get(_path_key(record))
        if path is not None and ImmDt in packet and path["queue_depth"]:
            packet[ImmDt].queue_depth = path["queue_depth"]
        lines.append(view.line(record))
        if path is not None:
            ref = view.session_of(record)
            lines.append("session %s, path %s → %s, queue_depth %s" % (
                ref.describe(), path["client"], path["server"], _queue_depth_text(path)))
    if not records:
        lines.append("no RTRS message completes in this frame (ACK, middle packet, "
                     "non-RTRS traffic, or a duplicate)")
    return packet, lines


def frame_settled(summary, records, frame_no):
    """Can the frames after the ones read still change what frame N says?  Not when its
    requests are answered and its path's queue depth came from the handshake (an
    inferred one may still narrow down)."""
    paths = {_path_key(p): p for s in summary["sessions"] for p in s["paths"]}
    for rec in _at_frame(records, frame_no):
        if rec["msg"] in REQUESTS and rec["paired_frame"] is None:
            return False
        path = paths.get(_path_key(rec))
        if path is not None and path["queue_depth_inferred"]:
            return False
    return True


def _at_frame(records, frame_no):
    """The records of one frame."""
    if isinstance(records, RecordList):
        return records.at_frame(frame_no)
    return [r for r in records if r["frame"] == frame_no]


def _queue_depth_text(path):
    if path["queue_depth"] is None:
        return "unknown (no conn_rsp)"
    source = path.get("queue_depth_source") or (
        "inferred" if path["queue_depth_inferred"] else "handshake")
    return "%d (%s)" % (path["queue_depth"], source)

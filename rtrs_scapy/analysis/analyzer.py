"""The analyzer: what the engine's rows mean for sessions, paths and IO.

It is the engine's consumer (see ``rtrs_scapy.engine``).  Per batch of
completed messages it works on columns: the path and direction of each row
(bound by the CM handshake, or inferred from what a stream carries when the
capture started mid-session), the kind of message, the requests' trailers and
RNBD headers, the responses' msg_id and errno, the pairing by (session,
buf_id) and the counters.  Python runs per row only for what is rare: the CM
(cm_tracker.py), the info exchange, RNBD control messages, errors, the queue
depth rule of paths without a handshake (until it decides), and the message
records of ``rtrs-dissect messages``.
"""

import numpy as np

from ..spec.constants import RTRS_MSG_INFO_REQ, RTRS_MSG_INFO_RSP
from ..engine import mads
from ..engine import transport as T
from ..engine.distinct import among, distinct_inverse
from ..spec.imm import mem_bits
from ..layout.plans import plan
from ..layout.wire import OPCODES
from . import decode as D
from . import failover, heartbeat, iorows, other_rdma, pairing, rnbd
from .bounds import Anomalies, Bounds
from .cm_tracker import CmTracker
from .controlreads import ControlReads
from .counts import CaptureCounts
from .io import IoBatch, acknowledged
from .linking import link_reconnected
from .settling import SettleQueue
from .model import Path
from .inflight import InFlight
from .qdepth import MemBitsInference
from .readdata import ReadData
from .records import CHUNK, Records
from .registry import AddressTexts, PathRegistry
from .rnbd_view import RnbdView
from .unbound import UnboundStreams

_info_req = plan("RtrsMsgInfoReq")
_info_rsp = plan("RtrsMsgInfoRsp")
_sg_desc = plan("RtrsSgDesc")
_sg_cnt = _info_rsp.reader("sg_cnt")
IMMEDIATE_KINDS = (D.K_REQUEST, D.K_RESPONSE, D.K_HB_MSG, D.K_HB_ACK)


def _view(part, name):
    """A read-only view of ``name`` of the analyzer's part ``part``."""
    return property(lambda self: getattr(getattr(self, part), name))


def _streams_of(conn):
    """(destination address, QP, client to server, first PSN) of a connection's two
    streams: packets to the server QP are client→server, and the REQ's starting PSN is
    the first of the server→client stream, the REP's of the client→server one
    (docs/PROTOCOL.md#identifiers-comm-ids-qpns-and-starting-psns)."""
    path = conn.path
    return ((path.server_raw, conn.server_qpn, True, conn.rep_psn),
            (path.client_raw, conn.client_qpn, False, conn.req_psn))


class Analyzer:
    """The engine's consumer; ``close()`` ends the capture.

    Its state is in named parts (docs/design.md#the-analyzers-parts): ``registry``
    and ``addresses`` (registry.py: sessions, paths, connections, the streams tied to
    them; the addresses' texts), ``counts`` (counts.py: the capture's frames and counts),
    ``failover_state`` (failover.py), ``pending`` (pairing.py: the requests awaiting
    their response), ``io_spans`` (iorows.py: each path's first and last IO),
    ``unbound`` (unbound.py: what waits for a stream to prove it is RTRS's),
    ``control_reads`` (controlreads.py), ``read_data`` (readdata.py), ``settle_queue``
    (settling.py), ``records`` (records.py), ``rnbd_view`` (rnbd_view.py),
    ``in_flight`` (inflight.py), ``cm`` (cm_tracker.py), ``bounds`` and
    ``anomaly_log`` (bounds.py).  Other modules read them through the read-only views
    below or the parts' methods, never by assigning the analyzer's attributes or
    changing its containers in place (tests/test_import_graph.py)."""

    sessions = _view("registry", "sessions")
    paths = _view("registry", "paths")
    path_list = _view("registry", "path_list")
    session_ids = _view("registry", "session_ids")
    conns = _view("registry", "conns")
    stream_paths = _view("registry", "stream_paths")
    frames = _view("counts", "frames")
    ib_frames = _view("counts", "ib_frames")
    malformed = _view("counts", "malformed")
    cnps = _view("counts", "cnps")
    capture_lost_packets = _view("counts", "capture_lost_packets")
    unmatched_responses = _view("counts", "unmatched_responses")
    first_ts = _view("counts", "first_ts")
    last_ts = _view("counts", "last_ts")
    link_types = _view("counts", "link_types")
    link_type = _view("counts", "link_type")
    mirrors = _view("counts", "mirrors")
    carry = _view("pending", "table")
    unattributed = _view("unbound", "unattributed")
    anomalies = _view("anomaly_log", "examples")

    def __init__(self, keep_messages=False, queue_depth=None, io_sink=None,
                 keep_latencies=True, limits=None, message_chunk=CHUNK):
        self.forced_queue_depth = queue_depth
        self.bounds = Bounds(limits)    # rtrs_scapy/spec/limits.py, and what reaching them cost
        self.io_sink = io_sink      # called with batches of IO rows (iorows.py), or None
        # False: no per-path latency lists (the summary's percentiles stay empty); a
        # stream watched for hours keeps constant memory, the IO rows carry latencies.
        # PATH_LATENCIES: the paths' only, not the RNBD view's nor the queues' figures
        self.keep_latencies = keep_latencies
        every_figure = keep_latencies is True
        if hasattr(io_sink, "bind_analyzer"):   # a sink that names its rows (tables/ios.py)
            io_sink.bind_analyzer(self)
        self.rnbd_view = RnbdView(every_figure)
        self.in_flight = InFlight() if every_figure else None    # the summary's queues
        self.io_spans = iorows.IoSpans()    # per path: its first and last IO
        self.records = Records(self, None if keep_messages is True else keep_messages,
                               message_chunk) if keep_messages else None
        self.registry = PathRegistry()
        self.anomaly_log = Anomalies(self.bounds.size["examples"])
        self.cm = CmTracker(self)
        self.engine = None          # set by the engine that feeds this analyzer
        self.addresses = AddressTexts(self.bounds)   # endpoints' texts, cached
        self.counts = CaptureCounts(self.bounds)
        self.frame = None
        self.closed = False
        self.pending = pairing.Pending()    # requests in flight, all sessions
        self.read_data = ReadData(self.bounds.size["requests"])   # READ data until paired
        self.failover_state = failover.FailoverState()
        self.settle_queue = SettleQueue(self)     # IO batches settled in capture order
        self.control_reads = ControlReads()    # RNBD control reads awaiting their reply
        self.unbound = UnboundStreams(self.bounds)  # what waits for a stream to prove RTRS's

    # -- model helpers (also used by the CM tracker) ------------------------------------

    def text(self, raw):
        """The text of the address ``raw`` (a 128-bit pair)."""
        return self.addresses.text(raw)

    def anomaly(self, frame, kind, detail, *args):
        """Counted by kind; the first ones kept with ``detail % args``."""
        self.anomaly_log.add(frame, kind, detail, args)

    def _room_for_path(self):
        """Room for one more path: paths without traffic are kept to the "idle_paths"
        limit, all paths to the "paths" limit, evicting the path idle the longest
        (no traffic, least recently named by a REQ); False when every path carries
        traffic (the new one is refused, counted)."""
        size, idle = self.bounds.size, self.registry.idle
        if len(idle) >= size["idle_paths"]:
            self._evict(next(iter(idle)))   # OrderedDict: O(1) at the front
        while self.registry.live_paths >= size["paths"]:
            if not idle:
                self.bounds.refuse("paths")
                return False
            self._evict(next(iter(idle)))
        return True

    def _evict(self, path):
        self.registry.remove(path)
        self.cm.forget(path)
        self.bounds.evict("idle_paths")
        for attempt in path.attempts:   # no cyclic GC while reading: break the cycles
            attempt.connections.clear()
        path.attempts.clear()
        path.connections.clear()

    def path_for(self, sess_uuid, paths_uuid, client, server, names=None):
        """The path of a conn_req; ``names``: (client, server) as the RDMA CM header
        gives them, else the packet's addresses."""
        path = self.paths.get(sess_uuid)
        if path is not None:
            if path in self.registry.idle:      # named again: the most recently used
                self.registry.idle.move_to_end(path)
            return path
        if not self._room_for_path():
            return None
        client_name, server_name = names or (self.text(client), self.text(server))
        path = Path(sess_uuid, paths_uuid=paths_uuid, client=client_name, server=server_name)
        path.client_raw, path.server_raw = client, server
        self.registry.add(sess_uuid, path, self.registry.session(paths_uuid, paths_uuid))
        self.registry.idle[path] = None
        return path

    def inferred_path(self, client, server):
        """The path of a QP pair whose handshake is not in the capture."""
        key = (client, server)
        path = self.paths.get(key)
        if path is not None:
            return path
        for known in self.path_list:   # a handshake seen for the same endpoints
            if known is not None and known.client_raw == client \
                    and known.server_raw == server:
                return known
        if not self._room_for_path():
            return None
        path = Path(None, client=self.text(client), server=self.text(server))
        path.client_raw, path.server_raw = client, server
        self.registry.add(key, path, self.registry.session(("inferred",) + key, None))
        if self.forced_queue_depth:
            self.set_queue_depth(path, self.forced_queue_depth, "forced")
        else:
            path.queue_depth_inferred = True
            path.inference = MemBitsInference()
        return path

    def set_queue_depth(self, path, queue_depth, source="handshake"):
        path.queue_depth = queue_depth
        path.mem_bits = mem_bits(queue_depth) if queue_depth else None
        path.queue_depth_source = source
        path.queue_depth_inferred = False
        if path.inference is not None:
            path.inference = None
            self.replay(path)

    def decided(self, path):
        """The queue depth rule of ``path`` decided: settle what waited for it."""
        rule, path.inference = path.inference, None
        path.mem_bits, path.queue_depth = rule.mem_bits, rule.queue_depth
        path.queue_depth_source = rule.source
        path.queue_depth_inferred = True
        self.replay(path)

    def replay(self, path):
        waiting, path.waiting = path.waiting, []
        for batch in waiting:
            batch.settle_path(path)
        self.settle_queue.drain()

    def bind_connection(self, conn):
        """After a REP: the connection's two streams (``_streams_of``) are bound to it
        and paired."""
        self.registry.idle.pop(conn.path, None)      # bound streams name it: it stays
        slots = []
        for addr, qpn, c2s, psn in _streams_of(conn):
            conn_id = self.registry.add_conn(conn, c2s)
            slots.append(self._take_over(self.engine.bind(
                addr, qpn, conn_id, psn if psn is not None else -1, self.frame), conn_id))
        self.engine.pair_streams(*slots)

    def connection_closed(self, conn):
        """After a DREQ: the connection's two streams are over, their slots recycled
        first once silent (engine/transport.py)."""
        conns = self.registry.conns
        for addr, qpn, _c2s, _psn in _streams_of(conn):
            slot = self.engine.stream(addr, qpn) if addr is not None and qpn is not None else -1
            owner = int(self.engine.streams.state[slot, T.CONN]) if slot >= 0 else -1
            if 0 <= owner < len(conns) and conns[owner][0] is conn:
                self.engine.stream_closed(slot)

    def bind_other(self, conn, rep_psn):
        """After the REP of another protocol's connection: its two streams carry a
        marker of their own (other_rdma.py), never an RTRS path's."""
        value = other_rdma.marker(conn.index)
        slots = [self._take_over(self.engine.bind(addr, qpn, value,
                                                  psn if psn is not None else -1, self.frame),
                                 value)
                 for addr, qpn, psn in ((conn.server_raw, conn.server_qpn, rep_psn),
                                        (conn.client_raw, conn.client_qpn, conn.req_psn))]
        self.engine.pair_streams(*slots)

    def _take_over(self, slot, value):
        """The stream in ``slot`` now belongs to ``value`` (an RTRS connection id or
        another protocol's marker): when a QP number comes back with the other kind of
        connection, what the stream counted so far goes to its former owner."""
        state = self.engine.streams.state
        gen = int(state[slot, T.GEN])
        owner = self.registry.slot_owner
        before = owner.get(slot)
        if (before is None or before[0] != gen) and (slot, gen) in self.stream_paths:
            before = (gen, -1)
        owner[slot] = (gen, value)
        if before is not None and before[0] == gen and (before[1] < -1) != (value < -1):
            self._harvest_slot(slot, state[slot], before[1])
            state[slot, list(T.COUNTED)] = 0
        return slot

    def abort_pending(self, path):
        """A path (re)connects: its unanswered requests will never be answered."""
        if path.first_traffic is None:   # no traffic, nothing pending
            return
        mine = self.carry["path"] == path.id
        path.aborted += int(np.count_nonzero(mine))
        if mine.any():
            self.io_rows(iorows.from_requests(self.carry, np.flatnonzero(mine), iorows.ABORTED))
        self.pending.keep(~mine)

    def release(self, frame, **columns):
        """The IO row held for ``frame`` (io.py) goes out, with ``columns`` set."""
        row = self._unheld(frame, columns)
        if row is not None:
            self.io_rows(row)

    def _unheld(self, frame, columns):
        """The IO row held for ``frame`` with ``columns`` set, no longer held; None."""
        held = self.failover_state.held_rows.pop(frame, None)
        if held is None:
            return None
        row = held[0]
        for name, value in columns.items():
            row[name] = np.array([value], dtype=np.int64)
        return row

    def release_acknowledged(self, at_end=False):
        """Held rows whose answer the client has acknowledged since go out delivered, in
        one batch in frame order; at the end all go out, as acknowledged or not by then."""
        held = self.failover_state.held_rows
        if not held:
            return
        frames = sorted(held)
        responses = np.array([held[frame][1] for frame in frames], dtype=np.int64)
        known = acknowledged(self.engine.streams.state, *responses.T).tolist()
        rows = [self._unheld(frame, {"delivered": k}) for frame, k in zip(frames, known)
                if k == 1 or at_end]
        if rows:
            self.io_rows(iorows.concat(rows))

    def io_rows(self, batch):
        """IO rows whose fate is known: the RNBD view, the paths' first and last IO, the
        failovers' events, then the caller's sink."""
        self.rnbd_view.rows(batch, self.path_list)
        self.failover_state.request_log.add(batch)
        if self.in_flight is not None:
            self.in_flight.add(batch)
        self.io_spans.add(batch)
        path_list = self.path_list
        for k in np.flatnonzero(batch["failover_from"] >= 0).tolist():
            self.listed(path_list[int(batch["path"][k])].events, {
                "time": int(batch["time_ns"][k]) / 1e9, "frame": int(batch["frame"][k]),
                "kind": "failover", "buf_id": int(batch["buf_id"][k]),
                "first_frame": int(batch["failover_from"][k])})
        if self.io_sink is not None:
            self.io_sink(batch)

    def session_of(self, path_ids):
        return self.registry.session_of(path_ids)

    def cid_of(self, conn_ids):
        return self.registry.cid_of(conn_ids)

    def record(self, frame, ts, src, dst, qpn, conn, msg, fields, rnbd=None, path=None):
        """A message record; ``path`` when there is no connection (no handshake seen)."""
        if self.records is not None:
            return self.records.add(frame, ts, src, dst, qpn, conn, msg, fields, rnbd, path)
        return None

    @property
    def messages(self):
        return self.records.list if self.records is not None else []

    # -- engine callbacks -------------------------------------------------------------

    def attach(self, engine):
        """The engine (or what stands for it, parts.py) that feeds this analyzer."""
        self.engine = engine

    def frames_seen(self, chunk, packets):
        if len(chunk):
            self.counts.frames_seen(chunk, packets)

    def cm_run(self, chunk, packets, first, last):
        """Consecutive CM MADs; a flood of REQs that open sessions nobody answers goes
        to the CM tracker in bulk (CmTracker.requests_in_bulk)."""
        self.frame = chunk.first_frame + first
        self.traffic()
        first += self.cm.requests_in_bulk(chunk, packets, first, last)
        for mad in mads(chunk, packets, first, last):
            self.cm_mad(*mad)

    def cm_mad(self, frame, stamp, src, dst, data, start, end):
        self.frame = frame
        self.traffic()
        self.cm.feed(frame, stamp / 1e9, self.addresses.one(src), self.addresses.one(dst),
                     data, start, end)

    def traffic(self):
        """Tell the CM tracker about RC traffic since the last MAD: the first new packet
        of a connection establishes it when its RTU is not in the capture, the last one
        per path and direction tells whether IO still flowed while heartbeats stopped."""
        slots, rows = self.engine.touched()
        if not len(slots):
            return
        for slot, row in zip(slots.tolist(), rows.tolist()):
            conn_id = row[T.CONN]
            if conn_id >= 0:
                conn, c2s = self.conns[conn_id]
                path = conn.path
            elif conn_id < -1:       # another protocol's connection
                continue
            else:
                known = self.stream_paths.get((slot, row[T.GEN]))
                if known is None:
                    continue
                conn, (pid, c2s) = None, known
                path = self.path_list[pid]
            if row[T.FRESH_FRAME] >= 0:
                self.cm.rc_traffic(path, conn, c2s, row[T.FRESH_FRAME], row[T.FRESH_TS] / 1e9)
                if path.first_traffic is None or row[T.FRESH_FRAME] < path.first_traffic:
                    path.first_traffic = row[T.FRESH_FRAME]
            path.last_traffic[c2s] = max(path.last_traffic.get(c2s, 0.0), row[T.LAST_TS] / 1e9)

    def events(self, rows):
        for row in rows:
            kind, frame, code = int(row[T.E_KIND]), int(row[T.E_FRAME]), int(row[T.E_A])
            if row[T.E_CONN] < -1:      # another protocol's connection: counted there
                if kind == T.EV_FOREIGN_OPCODE:
                    other = self.cm.others.of(row[T.E_CONN])
                    other.packets += 1
                    other.bytes += int(row[T.E_B])
                continue
            if kind == T.EV_PARTIAL_MESSAGE:
                self.stream_anomaly(row, frame, "partial_message",
                                    "last packet without its first")
            elif kind == T.EV_NAK:   # reported if the stream turns out to be RTRS's
                self.unbound.nak((frame, code, int(row[T.E_CONN]), int(row[T.E_SLOT]),
                                  int(row[T.E_GEN])))
            elif kind == T.EV_UNKNOWN_OPCODE:
                self.anomaly(frame, "unknown_opcode", "BTH opcode 0x%02x" % code)
            elif kind == T.EV_FOREIGN_OPCODE:
                if row[T.E_CONN] >= 0:
                    self.anomaly(frame, "foreign_opcode", "%s on an RTRS QP" % OPCODES[code][0])
            elif kind == T.EV_TRUNCATED:
                self.counts.malformed += 1
                detail = ("%s shorter than its headers" % OPCODES[code][0] if row[T.E_B]
                          else "IB packet shorter than BTH + ICRC")
                self.anomaly(frame, "truncated", detail)
            elif kind == T.EV_CNP:
                self.counts.cnps += 1

    def stream_anomaly(self, row, frame, kind, detail, *args):
        """An anomaly of a stream: at once when the stream is RTRS's, else kept until
        its content proves it (``_infer_stream``): traffic of other protocols without
        a handshake never makes one (docs/PROTOCOL.md#other-rdma-protocols)."""
        key = (int(row[T.E_SLOT]), int(row[T.E_GEN]))
        if row[T.E_CONN] >= 0 or key in self.stream_paths or key[0] < 0:
            self.anomaly(frame, kind, detail, *args)
            return
        self.unbound.anomaly(key, frame, kind, detail, args)
        if len(self.unbound.unproven) > 2 * self.bounds.size["streams"]:
            self._forget_evicted_streams()

    def foreign_stream(self, address, qpn):
        """Did the stream to ``address``/``qpn`` carry traffic that is not RTRS's: another
        protocol's connection, or messages without any RTRS immediate on a stream not
        proven RTRS's (other protocols send none)?"""
        slot = self.engine.stream(address, qpn)
        if slot < 0:
            return False
        state = self.engine.streams.state[slot]
        if state[T.CONN] != -1:
            return state[T.CONN] < -1
        key = (slot, int(state[T.GEN]))
        return key not in self.stream_paths and key not in self.unbound.immediates \
            and state[T.SEEN] > 0

    def stream_path(self, conn, slot, gen):
        return self.registry.stream_path(conn, slot, gen)

    def messages_done(self, rows, arena):
        """A batch of completed messages (transport.R_* columns)."""
        kind = D.kinds(rows)
        path_id, c2s = self._resolve(rows, arena, kind)
        record = self.records.rows(rows, arena, kind, path_id) if self.records is not None \
            else None
        self._other_messages(rows)
        self._immediates(rows, kind)
        self._heartbeats(rows, kind, path_id, c2s)
        for i in np.flatnonzero((kind == D.K_UNKNOWN_IMM) & (path_id >= 0)).tolist():
            self.anomaly(int(rows[i, T.R_LAST_FRAME]), "unknown_imm",
                         "immediate 0x%08x", rows[i, T.R_IMM])
        for i in np.flatnonzero((kind == D.K_SEND) & (rows[:, T.R_CONN] >= -1)).tolist():
            self._send(rows, arena, i, path_id)
        data = np.flatnonzero((kind == D.K_DATA) & (path_id >= 0) & ~c2s)
        self.read_data.add(path_id[data], rows[data, T.R_RKEY], rows[data, T.R_FIRST_TS],
                           rows[data, T.R_LAST_TS], rows[data, T.R_LAST_FRAME])
        req = np.flatnonzero((kind == D.K_REQUEST) & (path_id >= 0))
        rsp = np.flatnonzero((kind == D.K_RESPONSE) & (path_id >= 0))
        if len(req) or len(rsp):
            IoBatch(self, rows, arena, req, rsp, path_id, record).run()
        if self.control_reads:   # after the requests: READ data follows its request
            self._read_data(rows, arena, kind, path_id)
        if self.records is not None:
            inv = np.flatnonzero(kind == D.K_INVALIDATE)
            self.records.invalidate(rows[inv, T.R_IETH], rows[inv, T.R_LAST_FRAME])
            if self.settle_queue.idle:     # the READs before them are settled
                self.records.match_invalidations()

    def _resolve(self, rows, arena, kind):
        """Path id and direction of every row; -1 where no path can be told yet (or
        the row is another protocol's)."""
        conn = rows[:, T.R_CONN]
        bound = conn >= 0
        if bound.all():     # (the usual) every row of a CM-bound stream: no mask to apply
            return self._bound_paths(conn)
        path_id = np.full(len(rows), -1, dtype=np.int64)
        c2s = np.zeros(len(rows), dtype=bool)
        if bound.any():
            path_id[bound], c2s[bound] = self._bound_paths(conn[bound])
        free = np.flatnonzero(conn == -1)
        if len(free):
            stream = (rows[free, T.R_SLOT] << 32) + rows[free, T.R_GEN]
            values, where = distinct_inverse(stream)
            for k in range(len(values)):
                at = free[where == k]
                known = self._stream_path(rows, arena, at, kind)
                if known is not None:
                    path_id[at], c2s[at] = known
        return path_id, c2s

    def _bound_paths(self, conn):
        """Path id and direction of rows of the CM-bound connections ``conn``."""
        ids, where = distinct_inverse(conn)
        ids = ids.tolist()
        return (np.array([self.conns[i][0].path.id for i in ids], dtype=np.int64)[where],
                np.array([self.conns[i][1] for i in ids], dtype=bool)[where])

    def _stream_path(self, rows, arena, at, kind):
        """(path id, client→server) of an unbound stream, told by what it carries
        (docs/PROTOCOL.md#rtrs-without-a-handshake): requests whose trailer is an RTRS
        trailer go client→server, responses in the form only RTRS's have server→client."""
        key = (int(rows[at[0], T.R_SLOT]), int(rows[at[0], T.R_GEN]))
        known = self.stream_paths.get(key)
        if known is not None:
            return known
        requests = at[kind[at] == D.K_REQUEST]
        if len(requests) and D.requests(rows[requests], arena)["op"].any():
            return self._infer_stream(rows[requests[0]], key, True)
        responses = at[kind[at] == D.K_RESPONSE]
        if len(responses) and D.proven_responses(rows[responses], arena).any():
            return self._infer_stream(rows[responses[0]], key, False)
        return None

    def _immediates(self, rows, kind):
        """Unbound streams that carried an RTRS immediate type (requests, responses,
        heartbeats), proven or not: a DREQ naming their QP may be RTRS's."""
        rtrs = (rows[:, T.R_CONN] == -1) & among(kind, IMMEDIATE_KINDS)
        if rtrs.any():
            keys = np.unique(rows[rtrs][:, [T.R_SLOT, T.R_GEN]], axis=0)
            self.unbound.carried_immediates(map(tuple, keys.tolist()))
            if len(self.unbound.immediates) > 2 * self.bounds.size["streams"]:
                self._forget_evicted_streams()

    def _other_messages(self, rows):
        """Messages of other protocols' connections: counted there."""
        other = np.flatnonzero(rows[:, T.R_CONN] < -1)
        if not len(other):
            return
        values, where = distinct_inverse(rows[other, T.R_CONN])
        sizes = np.bincount(where.ravel(), weights=rows[other, T.R_LEN])
        counts = np.bincount(where.ravel())
        for value, size, count in zip(values.tolist(), sizes.tolist(), counts.tolist()):
            conn = self.cm.others.of(value)
            conn.bytes += int(size)
            conn.messages += int(count)

    def _infer_stream(self, row, key, c2s):
        src = (int(row[T.R_SRC_HI]), int(row[T.R_SRC_LO]))
        dst = (int(row[T.R_DST_HI]), int(row[T.R_DST_LO]))
        path = self.inferred_path(*((src, dst) if c2s else (dst, src)))
        if path is None:     # the paths are full (rtrs_scapy/spec/limits.py)
            return None
        known = self.registry.stream_paths[key] = (path.id, c2s)
        examples, counts = self.unbound.proven(key)
        for frame, kind, detail, args in examples:
            self.anomaly(frame, kind, detail, *args)
            counts[kind] -= 1
        for kind, more in counts.items():    # beyond the examples kept: counted
            self.anomaly_log.counts[kind] += more
        if len(self.stream_paths) > 2 * self.bounds.size["streams"]:
            self._forget_evicted_streams()
        return known

    def listed(self, items, item):
        """A path's failed request or timeline event, within the limit."""
        self.bounds.keep("listed", items, item)

    def bound_pending(self):
        """The requests awaiting their response, within the limit: the oldest go."""
        extra = len(self.carry["key"]) - self.bounds.size["requests"]
        if extra > 0:
            self.pending.keep(np.sort(np.argsort(self.carry["frame"], kind="stable")[extra:]))
            self.bounds.evict("requests", extra)

    def _forget_evicted_streams(self):
        """Streams the transport evicted (their slot has a newer generation) leave the
        table of streams tied to a path by their content."""
        gens = self.engine.streams.state[:, T.GEN]
        self.registry.forget_streams(gens)
        self.unbound.forget(gens)

    def _heartbeats(self, rows, kind, path_id, c2s):
        """Heartbeats of CM-bound streams count at once; the others once the capture
        has told which path their stream belongs to (at the end)."""
        heartbeats = ((kind == D.K_HB_MSG) | (kind == D.K_HB_ACK)) & (rows[:, T.R_CONN] >= -1)
        # a stream not tied to a path yet: only heartbeats in RTRS's own form wait for one
        unbound = np.flatnonzero(heartbeats & (path_id < 0))
        heartbeats[unbound] = D.bare_immediates(rows[unbound], exact=True)
        for i in np.flatnonzero(heartbeats).tolist():
            is_msg = kind[i] == D.K_HB_MSG
            row = rows[i]
            if row[T.R_CONN] >= 0:
                path = self.path_list[path_id[i]]
                frame, time = int(row[T.R_LAST_FRAME]), int(row[T.R_LAST_TS]) / 1e9
                self.count_heartbeat(path, bool(c2s[i]), is_msg, frame, time)
                self.cm.heartbeat(path, frame, time)
            else:
                self.unbound.heartbeat((
                    (int(row[T.R_SLOT]), int(row[T.R_GEN])), int(row[T.R_LAST_FRAME]),
                    int(row[T.R_LAST_TS]), (int(row[T.R_SRC_HI]), int(row[T.R_SRC_LO])),
                    (int(row[T.R_DST_HI]), int(row[T.R_DST_LO])), is_msg))

    def count_heartbeat(self, path, client_to_server, is_msg, frame=None, time=None):
        """A heartbeat; two HB_MSG of one side between which its timer missed ticks are
        a gap in the timeline, unless the timer gave up meanwhile (heartbeat.py)."""
        side = "client_to_server" if client_to_server else "server_to_client"
        path.heartbeats[side if is_msg else "acks_" + side] += 1
        if not is_msg or time is None:
            return
        last = path.heartbeat_seen.get(side)
        missed = heartbeat.missed_ticks(last[1], time) if last is not None else 0
        if not heartbeat.allowed(missed):    # did the timer give up meanwhile?
            self.traffic()
            self.cm.heartbeats_lost(path, time)
        if missed and path.heartbeat_epoch.get(side) == path.hb_epoch:
            self.listed(path.events, {"time": last[1], "frame": last[0],
                                      "kind": "heartbeat_gap", "side": side,
                                      "gap_s": round(time - last[1], 6), "next_frame": frame,
                                      "missed_ticks": missed})
        path.heartbeat_seen[side] = (frame, time)
        path.heartbeat_epoch[side] = path.hb_epoch

    def _send(self, rows, arena, i, path_id):
        """info_req / info_rsp (docs/PROTOCOL.md#info_req-and-info_rsp)."""
        row = rows[i]
        data = D.head_bytes(rows, arena, i)
        length = int(row[T.R_LEN])
        mtype = int.from_bytes(data[:2], "little") if len(data) >= 2 else None
        whole = not row[T.R_PARTIAL]
        cut = row[T.R_CUT] > 0       # the snaplen cut it: what it held is unknown
        if whole and mtype == RTRS_MSG_INFO_REQ and length == _info_req.size:
            path = self._send_path(row, path_id, i, True)
            if path is None or cut:
                return
            path.pathname = _info_req.decode(data, 0, len(data))["pathname"]
            if path.session.sessname is None:
                path.session.sessname = path.pathname
        elif whole and mtype == RTRS_MSG_INFO_RSP and len(data) >= _info_rsp.size \
                and _sg_cnt(data, 0)[0] and \
                length == _info_rsp.size + _sg_desc.size * _sg_cnt(data, 0)[0]:
            path = self._send_path(row, path_id, i, False)
            if path is None:
                return
            path.chunks = _sg_cnt(data, 0)[0]
            path.state = "connected"
        elif not cut and path_id[i] >= 0:     # an unproven stream's SEND may be anybody's
            self.anomaly(int(row[T.R_LAST_FRAME]), "unknown_send",
                         "SEND of %d bytes is no RTRS message" % length)

    def _send_path(self, row, path_id, i, c2s):
        """The path of an info message's stream (None: the paths are full)."""
        if path_id[i] < 0:
            known = self._infer_stream(row, (int(row[T.R_SLOT]), int(row[T.R_GEN])), c2s)
            if known is None:
                return None
            path_id[i] = known[0]
        return self.path_list[path_id[i]]

    def _read_data(self, rows, arena, kind, path_id):
        """The server's RDMA WRITE of READ data: RNBD replies to control reads
        (docs/PROTOCOL.md#rnbd-session-life-cycle)."""
        data = np.flatnonzero((kind == D.K_DATA) & (path_id >= 0))
        data = data[among(rows[data, T.R_RKEY], self.control_reads.rkeys())]
        for i in data.tolist():
            key = int(rows[i, T.R_RKEY])
            entry = self.control_reads.waiting(key, path_id[i])
            if entry is None:
                continue
            reply = rnbd.reply(D.head_bytes(rows, arena, i), int(rows[i, T.R_LEN]))
            if reply is None:
                continue
            self.control_reads.answered(key)
            path, request, index = self.path_list[path_id[i]], entry[1], entry[2]
            if reply["msg"] == "open_rsp" and request.get("dev_name") is not None:
                path.devices[reply["device_id"]] = request["dev_name"]
                self.rnbd_view.opened(path.session, request, reply,
                                      int(rows[i, T.R_LAST_FRAME]),
                                      int(rows[i, T.R_LAST_TS]) / 1e9)
            if self.records is not None:
                self.records.reply(index, int(rows[i, T.R_LAST_FRAME]), reply)

    # -- end ------------------------------------------------------------------------

    def close(self):
        if self.closed:
            return self
        self.closed = True
        self.cm.materialize()
        for path in self.live():
            if path.inference is not None:
                path.inference.finish()
                self.decided(path)
        self.settle_queue.drain()
        if self.records is not None:
            self.records.match_invalidations()
        self.traffic()
        self._tie_heartbeat_streams()
        self._harvest()
        self._unmatched()
        for frame, syndrome, conn, slot, gen in self.unbound.naks:
            if self.stream_path(conn, slot, gen) is not None:
                self.anomaly(frame, "nak", "AETH NAK syndrome 0x%02x" % syndrome)
        for stream, frame, stamp, src, dst, is_msg in self.unbound.unattributed:
            known = self.stream_paths.get(stream)
            if known is not None:
                path, c2s = self.path_list[known[0]], known[1]
            else:
                path = self.path_between(src, dst)
                if path is None:
                    continue
                c2s = src == path.client_raw
            self.count_heartbeat(path, c2s, is_msg, frame, stamp / 1e9)
            self.cm.heartbeat(path, frame, stamp / 1e9)
        failover.late_copies(self)
        link_reconnected(self)
        self.release_acknowledged(at_end=True)
        if len(self.carry["key"]):
            self.io_rows(iorows.from_requests(self.carry, np.arange(len(self.carry["key"])),
                                              iorows.IN_FLIGHT))
        for session in self.sessions.values():
            failover.infer(self, session)
        for path in self.live():
            if path.linked_to is not None:
                continue
            path.in_flight_at_end = int(np.count_nonzero(self.carry["path"] == path.id))
            path.errors.sort(key=lambda e: e["frame"])
            for error in path.errors:      # device names: from the OPEN replies
                if "device_id" in error:
                    error["device"] = path.devices.get(error["device_id"])
            self._io_events(path)
        if self.records is not None:
            self.records.close()
        self.anomalies.sort(key=lambda a: a["frame"])
        return self

    def _io_events(self, path):
        """The timeline's IO entries: first and last request, failed IOs."""
        span = self.io_spans.of(path.id)
        if span is not None:
            for kind, (stamp, frame) in zip(("first_io", "last_io"), span):
                path.events.append({"time": int(stamp) / 1e9, "frame": int(frame),
                                    "kind": kind})
        for error in path.errors:
            event = {k: error.get(k) for k in ("time", "frame", "errno", "name", "op",
                                                  "device", "sector", "bi_size")}
            path.events.append(dict(event, kind="io_error"))

    def _tie_heartbeat_streams(self):
        """A stream without its handshake that carried heartbeats only is its path's, by
        their addresses (as its heartbeats are counted, below): its transport counters
        count there too (docs/PROTOCOL.md#stalls)."""
        gens = self.engine.streams.state[:, T.GEN]
        for stream, _, _, src, dst, _ in self.unbound.unattributed:
            if stream not in self.stream_paths and gens[stream[0]] == stream[1]:
                path = self.path_between(src, dst)
                if path is not None:
                    self.registry.stream_paths[stream] = (path.id, src == path.client_raw)

    def _harvest(self):
        """Per-stream transport counters, summed into their paths; the packets the
        capture lost (docs/PROTOCOL.md#capture-loss) also for the whole capture.  A
        stream that no ACK paired with its reverse one adds its retransmissions to a
        stall its sender's paired streams prove, and starts none."""
        st = self.engine.streams.state
        used = np.flatnonzero(st[:, T.USED])
        self._harvest_rows(used, st[used])
        for path, s, slot in self.registry.unpaired_retransmitters:
            self._stall(path, s, slot, proven=False)

    def streams_evicted(self, slots, rows):
        """Streams the transport's bounded table evicted: what they counted is
        harvested now, as the end harvests the streams still in the table."""
        self._harvest_rows(slots, rows)

    def _harvest_rows(self, slots, rows):
        """The counters of streams (``rows``: their state rows, in ``slots``) into their
        paths; a stall each paired one proves; the unpaired ones kept for the end.  A
        stream no connection owns and no content tied to a path counts only the
        capture's loss (a flood of them evicted is not looped over)."""
        owner = rows[:, T.CONN]
        mine = owner != -1
        if self.stream_paths:
            unbound = np.flatnonzero(~mine)
            mine[unbound] = [(slot, gen) in self.stream_paths for slot, gen in
                             zip(slots[unbound].tolist(), rows[unbound, T.GEN].tolist())]
        self.counts.capture_lost_packets += int((rows[~mine, T.SKIPPED]
                                                 - rows[~mine, T.FILLED]).sum())
        for k in np.flatnonzero(mine).tolist():
            s, slot = rows[k], int(slots[k])
            path = self._harvest_slot(slot, s, s[T.CONN])
            if path is not None and s[T.UNACKED_FRAME] >= 0 and s[T.UNACKED_DUPS] > 0:
                if s[T.PEER] >= 0:
                    self._stall(path, s, slot)
                else:
                    self.registry.unpaired_retransmitters.append((path, s, slot))

    def _harvest_slot(self, slot, s, owner):
        """The counters of the stream in ``slot`` (state row ``s``) to ``owner`` (an
        RTRS connection id, -1: the path its content told, below: another protocol's
        connection); returns the RTRS path or None.  The packets the stream's gaps skipped
        and no retransmission filled are the capture's loss (docs/PROTOCOL.md#capture-loss),
        counted for the whole capture too."""
        lost = int(s[T.SKIPPED] - s[T.FILLED])
        self.counts.capture_lost_packets += lost
        if owner < -1:
            self.cm.others.of(owner).packets += int(s[T.SEEN] + s[T.ACKS])
            return None
        path = self.stream_path(owner, slot, s[T.GEN])
        if path is None:
            return None
        path.transport["acks"] += int(s[T.ACKS])
        path.transport["naks"] += int(s[T.NAKS])
        path.transport["rnr_naks"] += int(s[T.RNRS])
        path.transport["retransmissions"] += int(s[T.DUPS])
        path.transport["cnps"] += int(s[T.CNPS])
        path.transport["capture_lost_packets"] += lost
        path.rtrs_packets += int(s[T.SEEN] + s[T.ACKS])
        return path

    def _unmatched(self):
        """Responses no request waited for, on paths with a handshake: their requests
        were lost with the packets the capture lost (docs/PROTOCOL.md#capture-loss), else
        each is an anomaly."""
        for path in self.live():
            if not path.unmatched:
                continue
            if path.transport["capture_lost_packets"]:
                path.responses_without_request += path.unmatched
                continue
            for frame, msg_id in path.unmatched_examples:
                self.anomaly(frame, "unmatched_response", "no pending request for msg_id %d",
                             msg_id)
            self.anomaly_log.counts["unmatched_response"] += \
                path.unmatched - len(path.unmatched_examples)

    def _stall(self, path, s, slot, proven=True):
        """A stream whose sender retransmitted a packet the peer never acknowledged: the
        link stalled at that packet's first transmission (docs/PROTOCOL.md#stalls).  One
        per direction, the earliest.  The stream is paired with its reverse one (by the
        CM, or by its IO when the handshake is not in the capture)."""
        if s[T.CONN] >= 0:
            c2s = self.conns[int(s[T.CONN])][1]
        else:
            c2s = self.stream_paths[(slot, int(s[T.GEN]))][1]
        sender = "client" if c2s else "server"
        stall = {"frame": int(s[T.UNACKED_FRAME]), "time": int(s[T.UNACKED_TS]) / 1e9,
                 "sender": sender, "psn": int(s[T.UNACKED_PSN]),
                 "retransmissions": int(s[T.UNACKED_DUPS]),
                 "acked_frame": int(s[T.ACKED_FRAME]) if s[T.ACKED_FRAME] >= 0 else None}
        for k, old in enumerate(path.stalls):
            if old["sender"] == sender:
                if not proven and stall["frame"] < old["frame"]:
                    return
                if stall["frame"] < old["frame"]:
                    stall["retransmissions"] += old["retransmissions"]
                    path.stalls[k] = stall
                else:
                    old["retransmissions"] += stall["retransmissions"]
                return
        if proven:
            path.stalls.append(stall)
            path.stalls.sort(key=lambda x: x["frame"])

    def path_between(self, src, dst):
        return self.registry.path_between(src, dst)

    def live(self):
        return self.registry.live()

    @property
    def rtrs_packets(self):
        return self.cm.rtrs_frames + sum(p.rtrs_packets for p in self.live()
                                         if p.linked_to is None)

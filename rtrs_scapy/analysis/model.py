"""What the analyzer learns, in the vocabulary of
docs/PROTOCOL.md#sessions-paths-and-connections:
session (paths_uuid) → path (sess_uuid) → connection (cid), plus the requests.

Plain data; the renderers (report/) read it, the analyzer fills it.
"""

from array import array
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from .growing import Growing
from .naming import session_label

OPS = ("read", "write")


@dataclass(eq=False, slots=True)
class Connection:
    """One RC QP pair of a path: the CM REQ/REP of one cid
    (docs/PROTOCOL.md#identifiers-comm-ids-qpns-and-starting-psns)."""
    cid: Optional[int]
    client_qpn: Optional[int] = None
    server_qpn: Optional[int] = None
    recon_cnt: Optional[int] = None
    first_conn: Optional[int] = None
    req_psn: Optional[int] = None   # REQ starting PSN: first PSN server → client
    rep_psn: Optional[int] = None   # REP starting PSN: first PSN client → server
    client_comm_id: Optional[int] = None
    server_comm_id: Optional[int] = None
    path_mtu: Optional[int] = None
    # requested, replied (REP seen: QPs bound), established (RTU or first RC traffic),
    # rejected, disconnected
    state: str = "requested"
    req_frame: Optional[int] = None
    path: Optional["Path"] = None
    attempt: Optional["Attempt"] = None
    established_frame: Optional[int] = None
    # "client"/"server": sent a DREQ (a tuple, not a set: 48 bytes, not 216, in each of a
    # capture's connections)
    dreq_from: Tuple[str, ...] = ()
    rejected_by: Optional[str] = None


@dataclass(eq=False, slots=True)
class Attempt:
    """One connect attempt of a path: the REQs of one recon_cnt (the client raises
    recon_cnt once per attempt, rtrs-clt.c init_conns())."""
    path: "Path"
    recon_cnt: Optional[int]
    frame: int                      # the first REQ
    time: float
    reconnect: bool                 # after the path was up once (or recon_cnt > 1)
    connections: List[Connection] = field(default_factory=list)
    outcome: Optional[str] = None   # None (open), "established", "failed"
    end_frame: Optional[int] = None
    end_time: Optional[float] = None


@dataclass(slots=True)
class IoCounter:
    count: int = 0
    bytes: int = 0
    errors: int = 0


@dataclass(eq=False, slots=True)
class Path:
    """One RTRS path (client address ↔ server address),
    docs/PROTOCOL.md#sessions-paths-and-connections."""
    sess_uuid: Optional[str]
    paths_uuid: Optional[str] = None
    client: Optional[str] = None        # as the user names it (RDMA CM header, else packet)
    server: Optional[str] = None
    client_raw: Optional[bytes] = None  # the packet addresses (IP, GID or LID) of the path
    server_raw: Optional[bytes] = None
    session: Optional["Session"] = None
    port: Optional[int] = None
    protocol_version: Optional[str] = None
    cid_num: Optional[int] = None
    queue_depth: Optional[int] = None
    queue_depth_inferred: bool = False
    max_io_size: Optional[int] = None
    max_hdr_size: Optional[int] = None
    always_invalidate: Optional[bool] = None
    pathname: Optional[str] = None
    chunks: Optional[int] = None          # descriptors in the last info_rsp
    connections: List[Connection] = field(default_factory=list)
    io: Dict[str, IoCounter] = field(default_factory=lambda: {op: IoCounter() for op in OPS})
    # answered requests' latencies, ns (growing.py: a few bytes each)
    latencies: Dict[str, Growing] = field(default_factory=lambda: {op: Growing(times=True)
                                                                   for op in OPS})
    heartbeats: Dict[str, int] = field(default_factory=lambda: {
        "client_to_server": 0, "server_to_client": 0,
        "acks_client_to_server": 0, "acks_server_to_client": 0})
    rkey_refreshes: int = 0
    reconnects: int = 0                 # successful reconnects (the kernel's successful_cnt)
    reconnect_attempts: int = 0         # all of them: failed = attempts - reconnects
    established_once: bool = False
    attempts: List[Attempt] = field(default_factory=list)
    failovers: int = 0                  # requests failed over TO this path (failover_cnt)
    failover_delays: array = field(default_factory=lambda: array("d"))  # first send -> re-send
    failover_list: List[dict] = field(default_factory=list)   # the failovers it took over
    failovers_unseen: int = 0           # of them: originals not on the wire (failover.py)
    aborted: int = 0                    # requests never answered because the path went down
    rejects: List[dict] = field(default_factory=list)
    errors: List[dict] = field(default_factory=list)
    disconnects: List[dict] = field(default_factory=list)
    state: str = "connecting"           # connecting, connected, disconnecting
    # path state over time (cm_tracker): None = no handshake seen (a path known from IO)
    up: Optional[bool] = None
    down: Optional[dict] = None         # since when the path is down, until it is up again
    teardown: Optional[dict] = None  # the disconnect in progress: record, DREQ and DREP senders
    outages: List[dict] = field(default_factory=list)
    heartbeats_lost: List[dict] = field(default_factory=list)
    stalls: List[dict] = field(default_factory=list)   # per direction: first unacknowledged
    last_heartbeat: Optional[Tuple[int, float]] = None   # (frame, time)
    last_traffic: Dict[bool, float] = field(default_factory=dict)  # client_to_server -> time
    first_traffic: Optional[int] = None   # frame of the first RC packet of its streams
    events: List[dict] = field(default_factory=list)    # timeline entries of the IO engine
    heartbeat_seen: Dict[str, tuple] = field(default_factory=dict)  # side -> (frame, time)
    heartbeat_epoch: Dict[str, int] = field(default_factory=dict)  # side -> hb_epoch then
    hb_epoch: int = 0     # raised at every down and up: no heartbeat gap spans one
    last_recon_cnt: Optional[int] = None
    devices: Dict[int, str] = field(default_factory=dict)        # RNBD device_id -> name
    mem_bits: Optional[int] = None
    queue_depth_source: Optional[str] = None   # handshake, inferred, assumed, forced
    partial_requests: int = 0           # counted, their first packets precede the capture
    header_only_requests: int = 0       # counted, the snaplen cut their trailer
    responses_without_request: int = 0  # their request precedes the capture (or its loss)
    # responses of a path with a handshake that no request waits for, and the first of them
    # (frame, msg_id): the capture lost their requests, or they are anomalies (at the end)
    unmatched: int = 0
    unmatched_examples: List[tuple] = field(default_factory=list)
    in_flight_at_end: int = 0           # requests still unanswered when the capture ends
    transport: Dict[str, int] = field(default_factory=lambda: {
        "acks": 0, "naks": 0, "rnr_naks": 0, "retransmissions": 0, "cnps": 0,
        "capture_lost_packets": 0})
    rtrs_packets: int = 0               # data packets and ACKs of the path's streams
    # an inferred path merged into the handshake path it continues (linking.py), or why not
    link: Optional[dict] = None
    linked_to: Optional["Path"] = field(default=None, repr=False)
    # the analyzer's bookkeeping
    id: int = field(default=-1, repr=False)
    inference: object = field(default=None, repr=False)    # qdepth rule while undecided
    waiting: list = field(default_factory=list, repr=False)  # IO batches waiting for it

    @property
    def key(self):
        return self.sess_uuid or "%s-%s" % (self.client, self.server)


@dataclass(eq=False, slots=True)
class Session:
    """One RTRS client session (paths_uuid), the RNBD session name."""
    paths_uuid: Optional[str]
    sessname: Optional[str] = None
    paths: List[Path] = field(default_factory=list)

    @property
    def label(self):
        """Its one name in every output (naming.py)."""
        first = (self.paths[0].client, self.paths[0].server) if self.paths else None
        return session_label(self.sessname, self.paths_uuid,
                             [p.sess_uuid for p in self.paths], first)

"""The analyzer's path registry: the sessions, paths and connections the capture told
of, and which path each stream belongs to.

A path is known by its sess_uuid (from its handshake) or by its two addresses (a
path without a handshake, docs/PROTOCOL.md#rtrs-without-a-handshake); its id is its
place in ``path_list`` (IO rows carry it), reused once the path is evicted.  The
analyzer fills the registry; the other modules read it (``Analyzer.path_list`` and
its sisters are read-only views of it).  ``AddressTexts``, below, the analyzer's
``addresses``: the texts of the addresses that name the paths' endpoints.
"""

from collections import OrderedDict

from ..capture.links import address_text
from .io import per_id
from .model import Session


class PathRegistry:
    def __init__(self):
        self.sessions = {}          # paths_uuid (or ("inferred", client, server)) -> Session
        self.inferred = 0           # sessions without a handshake (paths_uuid None)
        self.paths = {}             # sess_uuid or (client, server) -> Path
        self.path_list = []         # path id -> Path
        self.session_ids = {}       # Session -> int (the pairing key)
        self.next_session_id = 0
        self.live_paths = 0
        self.idle = OrderedDict()   # paths without RC traffic, least recently named first
        self.free_ids = []          # ids of evicted paths
        self.conns = []             # conn id -> (Connection, client_to_server)
        self.stream_paths = {}      # (slot, gen) of an unbound stream -> (path id, c2s)
        self.slot_owner = {}        # slot -> (gen, connection value) the CM bound it to
        # evicted streams that retransmitted with no ACK pairing them: (path, state row,
        # slot), their stalls made at the end with the streams still in the table
        self.unpaired_retransmitters = []

    def session(self, key, paths_uuid):
        """The session under ``key``, made when new (paths_uuid None: a session known
        from its IO alone).  The sessions without a handshake are counted: the linking of
        two sessions into one is looked for only while there is one (linking.py), and a
        capture of thousands of sessions would otherwise look at all of them for each
        batch of requests."""
        session = self.sessions.get(key)
        if session is None:
            session = self.sessions[key] = Session(paths_uuid)
            self.inferred += paths_uuid is None
        return session

    def add(self, key, path, session):
        self.paths[key] = path
        if self.free_ids:          # an evicted path's id: nothing refers to it
            path.id = self.free_ids.pop()
            self.path_list[path.id] = path
        else:
            path.id = len(self.path_list)
            self.path_list.append(path)
        self.live_paths += 1
        path.session = session
        session.paths.append(path)
        if session not in self.session_ids:
            self.session_ids[session] = self.next_session_id
            self.next_session_id += 1

    def remove(self, path):
        """An evicted path leaves, and its session with its last path."""
        del self.idle[path]
        del self.paths[path.sess_uuid]
        session = path.session
        session.paths.remove(path)
        if not session.paths:
            del self.sessions[session.paths_uuid]
            del self.session_ids[session]
            self.inferred -= session.paths_uuid is None
        self.path_list[path.id] = None
        self.free_ids.append(path.id)
        self.live_paths -= 1

    def add_conn(self, conn, client_to_server):
        """A connection's stream in one direction; returns its conn id."""
        self.conns.append((conn, client_to_server))
        return len(self.conns) - 1

    def drop_session(self, gone):
        """``gone`` (merged into another session) leaves; returns its pairing key."""
        kept = {k: s for k, s in self.sessions.items() if s is not gone}
        if len(kept) < len(self.sessions):
            self.inferred -= gone.paths_uuid is None
        self.sessions = kept
        return self.session_ids.pop(gone, None)

    def forget_streams(self, gens):
        """Streams the transport evicted (their slot has a newer generation) leave."""
        self.stream_paths = {key: known for key, known in self.stream_paths.items()
                             if gens[key[0]] == key[1]}

    def live(self):
        """The paths, without the slots of evicted ones."""
        return [p for p in self.path_list if p is not None]

    def path_between(self, src, dst):
        """The first path with these two endpoints (either direction)."""
        for path in self.live():
            if {src, dst} == {path.client_raw, path.server_raw}:
                return path
        return None

    def stream_path(self, conn, slot, gen):
        """The path of a stream: its connection's, or the one its content told."""
        if conn >= 0:
            return self.conns[int(conn)][0].path
        if conn < -1:
            return None
        known = self.stream_paths.get((int(slot), int(gen)))
        return self.path_list[known[0]] if known else None

    def session_of(self, path_ids):
        """Session ids (the pairing key) of an array of path ids."""
        return per_id(path_ids, lambda i: self.session_ids[self.path_list[i].session]
                      if self.path_list[i] is not None else -1)

    def cid_of(self, conn_ids):
        """cids of an array of connection ids (-1 for none)."""
        def cid(i):
            conn = self.conns[i][0] if i >= 0 else None
            return conn.cid if conn is not None and conn.cid is not None else -1
        return per_id(conn_ids, cid)


class AddressTexts:
    """The endpoints' addresses (paths', records', other protocols'), each kept once
    with its text worked out once; at the "cm" limit of ``bounds`` the cache starts
    again."""

    def __init__(self, bounds):
        self.bounds = bounds
        self.cache = {}         # (hi, lo) -> (the one tuple of it kept, its text)

    def _entry(self, raw):
        entry = self.cache.get(raw)
        if entry is None:
            if len(self.cache) >= self.bounds.size["cm"]:
                self.cache.clear()
            entry = self.cache[raw] = (raw, address_text(raw))
        return entry

    def one(self, raw):
        """The tuple ``raw`` equals that the analysis keeps: each connection's CM keys
        hold its endpoints, and thousands of sessions kept a tuple per key."""
        return self._entry(raw)[0]

    def text(self, raw):
        return self._entry(raw)[1]

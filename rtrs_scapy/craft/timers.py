"""What happens on a crafted session as time passes: heartbeats on cid 0 from both
sides, the ACK timeouts of go-back-N, a path whose far side went silent, its
failure, the failover of its requests and the automatic reconnect
(docs/PROTOCOL.md#heartbeats, docs/PROTOCOL.md#failover,
docs/PROTOCOL.md#connect-reconnect-and-disconnect).  A mixin of SessionCrafter."""

from ..imm import encode_hb
from .params import HB_MISSED_MAX, HB_PERIOD, RC_ACK_TIMEOUT, RECONNECT_DELAY, C, S


class Timers:
    """Heartbeats, retransmission timeouts, path failure, failover and reconnects."""

    def _tick(self, until):
        """Emit the heartbeats (and path recovery) due up to ``until``."""
        while True:
            due = []
            for path in self.paths:
                for side in (C, S):
                    if path.hb_due[side] is not None and path.hb_due[side] <= until:
                        due.append((path.hb_due[side], path.index, side, path))
                if path.reconnect_at is not None and path.reconnect_at <= until:
                    due.append((path.reconnect_at, path.index, 2, path))
                if path.unacked and path.unacked[0]["next"] <= until:
                    due.append((path.unacked[0]["next"], path.index, 3, path))
            if not due:
                return
            when, _, side, path = min(due)
            self.t = max(self.t, when)
            if side == 2:
                path.reconnect_at = None
                path.server_silent = False
                self.connect(path, first_conn=1)
                continue
            if side == 3:
                self._retransmit(path)
                continue
            path.hb_due[side] = when + HB_PERIOD + self._jitter(0.0, 0.04)
            self._heartbeat(path, side)

    def _heartbeat(self, path, side):
        conn = path.conns[0]
        peer = 1 - side
        if side == C and path.server_silent:
            path.missed += 1
            if path.missed > HB_MISSED_MAX:
                self._path_error(path)
                return
        packets = self._message(path, conn, side, "write_imm", b"", imm=encode_hb())
        self._event("hb_msg", path=path.index, side=side, answered=not path.server_silent)
        if side == C and path.server_silent:
            path.unacked.append({"req": None, "cid": 0, "packets": packets, "tries": 0,
                                 "next": self.t + RC_ACK_TIMEOUT + self._jitter(0.0, 0.01)})
            return
        if side == S and path.server_silent:
            return
        self.t += self._jitter(1e-4, 5e-4)
        self._message(path, conn, peer, "write_imm", b"", imm=encode_hb(ack=True))
        self._event("hb_ack", path=path.index, side=peer)
        self.t += self._jitter(1e-4, 5e-4)

    def fail_path(self, path):
        """From now on the server side of ``path`` is silent (its link is down beyond the
        capture point): nothing the client sends there is acknowledged.  Its requests
        and heartbeats are retransmitted (go-back-N, same PSNs) every ~2.1 s; after
        RC_RETRY_COUNT retries the QP fails (or, with nothing unacknowledged, more than
        HB_MISSED_MAX heartbeat ticks pass): the client closes the path (DREQs,
        unanswered), re-issues its unanswered requests on a live path with the same
        buf_id, and reconnects RECONNECT_DELAY + 1 s later with recon_cnt + 1."""
        self._tick(self.t)
        path.server_silent = True
        path.hb_due[S] = None
        path.missed = 0
        self._event("path_down", path=path.index)

    def _path_error(self, path, cause="heartbeat"):
        self._event("path_error", path=path.index, cause=cause)
        path.state = "reconnecting"
        path.hb_due = {C: None, S: None}
        path.unacked = []
        self.disconnect(path, C, answered=False)
        path.state = "reconnecting"
        path.reconnect_at = self.t + RECONNECT_DELAY + 1.0 + self.rng.uniform(0, 0.007)
        pending, path.pending = path.pending, []
        for req in pending:
            self._failover(req)

    def _failover(self, req):
        """Re-issue a request of a failed path on a live one, with the same buf_id."""
        live = [p for p in self.paths if p.state == "connected" and not p.server_silent]
        if not live:
            return
        path, conn = self._pick(live[0])
        self.t += self._jitter(1e-4, 5e-4)
        again = self._send_request(path, conn, req["dir"], req["_usr"], data=req["_data"],
                                   data_len=req["data_len"], label=req["op"],
                                   buf=req["buf_id"], sg=req["_sg"])
        again["failover"] = True
        self._event("failover", path=path.index, buf_id=req["buf_id"])
        self._send_response(path, conn, again)

    def idle(self, seconds):
        """Nothing but heartbeats for ``seconds``."""
        self.wait(seconds)

    def wait(self, seconds):
        """Advance the clock by ``seconds`` with heartbeats in between."""
        end = self.t + seconds
        self._tick(end)
        self.t = max(self.t, end)

"""What happens on a crafted session as time passes: heartbeats on cid 0 from both
sides, the ACK timeouts of go-back-N, a path whose link died beyond the capture
point, the side that gives up first, the failover of its requests, the automatic
reconnect attempts and the DREQs sent again while nobody answers
(docs/PROTOCOL.md#heartbeats, docs/PROTOCOL.md#failover,
docs/PROTOCOL.md#connect-reconnect-and-disconnect).  A mixin of SessionCrafter."""

from ..spec.imm import encode_hb
from ..layers.cm import CMDrep, CMReq
from .cm import DREP, DREQ
from .params import (
    CM_RETRY_INTERVAL, HB_MISSED_MAX, HB_PERIOD, RECONNECT_BACKOFF, RECONNECT_DELAY, C, S,
)

CM_MAX_RETRIES = CMReq().max_cm_retries  # what rdma_cm puts in the REQ: 15
# what falls due, in this order when two are due at the same time
HEARTBEAT_C, HEARTBEAT_S, RECONNECT, RETRANSMIT, DREQ_AGAIN, LINK_BACK = range(6)


class Timers:
    """Heartbeats, retransmission timeouts, path failure, failover and reconnects."""

    def _tick(self, until):
        """Run everything due up to ``until``, in time order."""
        while True:
            due = []
            for path in self.paths:
                for kind, side in ((HEARTBEAT_C, C), (HEARTBEAT_S, S)):
                    if path.hb_due[side] is not None and path.hb_due[side] <= until:
                        due.append((path.hb_due[side], path.index, kind, path))
                for kind, when in ((RECONNECT, path.reconnect_at),
                                   (RETRANSMIT, path.unacked[0]["next"] if path.unacked else None),
                                   (DREQ_AGAIN, path.dreq_retry), (LINK_BACK, path.restore_at)):
                    if when is not None and when <= until:
                        due.append((when, path.index, kind, path))
            if not due:
                return
            when, _, kind, path = min(due)
            self.t = max(self.t, when)
            if kind == RECONNECT:
                self._reconnect(path)
            elif kind == RETRANSMIT:
                self._retransmit(path)
            elif kind == DREQ_AGAIN:
                self._dreq_again(path)
            elif kind == LINK_BACK:
                path.restore_at = None
                path.silent = None
            else:
                side = C if kind == HEARTBEAT_C else S
                path.hb_due[side] = when + HB_PERIOD + self._jitter(0.0, 0.04)
                self._heartbeat(path, side)

    def _heartbeat(self, path, side):
        """hb_work() of ``side`` (rtrs.c): a heartbeat only when the last one was
        answered, the error handler once more than HB_MISSED_MAX ticks passed."""
        conn = path.conns[0]
        peer = 1 - side
        deaf = path.silent == peer  # nothing of the peer gets here
        if deaf:
            if path.missed[side] > HB_MISSED_MAX:
                if side == C:
                    self._path_error(path)
                else:
                    self._server_path_error(path, "heartbeat")
                return
            path.missed[side] += 1
            if path.missed[side] > 1:
                return
        packets = self._message(path, conn, side, "write_imm", b"", imm=encode_hb())
        self._event("hb_msg", path=path.index, side=side, answered=not deaf)
        if deaf:
            self._unacked(path, side, packets)
            return
        self.t += self._jitter(1e-4, 5e-4)
        self._message(path, conn, peer, "write_imm", b"", imm=encode_hb(ack=True))
        self._event("hb_ack", path=path.index, side=peer)
        self.t += self._jitter(1e-4, 5e-4)

    def fail_path(self, path, silent=S, restore_after=None, last_heartbeat_acked=False):
        """The link of one side of ``path`` goes down beyond the capture point.

        ``silent=S`` (the capture is on the client's side): nothing the client sends
        there is acknowledged; its requests and heartbeats are retransmitted (go-back-N,
        same PSNs) every ~2.1 s; after RC_RETRY_COUNT retries the QP fails (or the
        heartbeats run out): the client closes the path (DREQs, unanswered), re-issues
        its unanswered requests on a live path with the same buf_id, and reconnects
        RECONNECT_DELAY + RECONNECT_BACKOFF later with recon_cnt + 1.

        ``silent=C`` (the capture is on the server's side): the same from the server,
        which closes the path with its own DREQs and sends them again while nobody
        answers; the client, behind the dead link, gives up at the same moment.
        ``last_heartbeat_acked``: the server's heartbeat goes out just before, the
        client's transport acknowledges it but its HB_ACK is lost, so the server has
        nothing to retransmit and its heartbeat timer runs out.

        ``restore_after``: seconds until the link is back (default: just before the
        first reconnect attempt).
        """
        self._tick(self.t)
        if last_heartbeat_acked:
            self._message(path, path.conns[0], S, "write_imm", b"", imm=encode_hb())
            self._event("hb_msg", path=path.index, side=S, answered=False)
            path.hb_due[S] = self.t + HB_PERIOD + self._jitter(0.0, 0.04)
        path.silent = silent
        path.hb_due[silent] = None
        path.missed = {C: 0, S: 1 if last_heartbeat_acked else 0}
        path.restore_at = self.t + restore_after if restore_after is not None else None
        self._event("path_down", path=path.index, side=silent)

    def _path_error(self, path, cause="heartbeat"):
        """The client gives up the path: DREQs, failover, reconnect later."""
        self._event("path_error", path=path.index, cause=cause, side=C)
        path.hb_due = {C: None, S: None}
        path.unacked = []
        self.disconnect(path, C, answered=False)
        self._schedule_reconnect(path)
        self._fail_over_pending(path)

    def _fail_over_pending(self, path):
        """fail_all_outstanding_reqs() (rtrs-clt.c): the path's requests in permit order."""
        pending, path.pending = path.pending, []
        for req in sorted(pending, key=lambda r: r["buf_id"]):
            self._failover(req)

    def _server_path_error(self, path, cause):
        """The server gives up the path (close_path()): DREQs on every cid, sent again
        every CM_RETRY_INTERVAL while nobody answers.  The client, behind the same dead
        link, gives up at the same moment (unseen), re-sends its requests still pending
        on a live path and reconnects later."""
        self._event("path_error", path=path.index, cause=cause, side=S)
        path.hb_due = {C: None, S: None}
        path.unacked = []
        self.disconnect(path, S, answered=path.silent is None)
        if path.silent is not None:
            path.dreq_tries = 0
            path.dreq_retry = self.t + CM_RETRY_INTERVAL + self._jitter(0.0, 0.05)
        if path.silent == C:
            self._fail_over_pending(path)
        self._schedule_reconnect(path)

    def _schedule_reconnect(self, path):
        """rtrs_rdma_error_recovery(): reconnect_delay_sec + 0-7 ms, then the back-off."""
        path.state = "reconnecting"
        path.reconnect_at = (self.t + RECONNECT_DELAY + RECONNECT_BACKOFF
                             + self.rng.uniform(0, 0.007))

    def _reconnect(self, path):
        """An automatic reconnect attempt; ``path.faults`` says how the next ones fail,
        and a failed one is tried again later (rtrs_clt_reconnect_work())."""
        path.reconnect_at = None
        if path.restore_at is None:
            path.silent = None
        if not self.connect(path, first_conn=1, **(path.faults.pop(0) if path.faults else {})):
            self._schedule_reconnect(path)

    def _dreq_again(self, path):
        """The unanswered DREQs again (same comm IDs and TIDs: CM retransmissions); once
        the link is back the client answers them."""
        path.dreq_retry = None
        path.dreq_tries += 1
        for tid, body in path.dreqs:
            self._mad(self.t, path, S, tid, DREQ, body)
            self.t += self._jitter(2e-6, 5e-5)
        if path.silent is None:
            self.t += self._jitter(0.002, 0.004)
            for tid, body in path.dreqs:
                self._mad(self.t, path, C, tid, DREP, CMDrep(
                    local_comm_id=body.remote_comm_id, remote_comm_id=body.local_comm_id))
                self.t += self._jitter(2e-6, 2e-5)
        elif path.dreq_tries < CM_MAX_RETRIES:
            path.dreq_retry = self.t + CM_RETRY_INTERVAL + self._jitter(0.0, 0.05)

    def _failover(self, req):
        """Re-issue a request of a failed path on a live one, with the same buf_id;
        without a live path it is lost."""
        live = [p for p in self.paths if p.state == "connected" and p.silent is None]
        if not live:
            req["lost"] = True
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
        self.wait_until(self.t + seconds)

    def wait_until(self, when):
        """Advance the clock to ``when``, running what falls due before."""
        self._tick(when)
        self.t = max(self.t, when)

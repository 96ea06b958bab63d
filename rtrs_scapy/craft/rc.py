"""RC transport of a crafted connection: a message segmented at the path MTU,
the responder's ACKs as rdma_rxe sends them, and go-back-N retransmission after
the ACK timeout (docs/PROTOCOL.md#opcodes-and-extension-headers,
docs/PROTOCOL.md#psn-sequence-and-retransmissions).  A mixin of SessionCrafter."""

from scapy.contrib.roce import AETH
from scapy.packet import Raw

from ..layers.ib import BTH, IETH, RETH, ImmDt, opcode_value
from .params import AETH_ACK, RC_ACK_TIMEOUT, RC_RETRY_COUNT, RXE_MAX_PKT_PER_ACK, C

# opcodes by (kind, position): position = only/first/middle/last
_OPC = {key: opcode_value("RC_" + name) for key, name in {
    ("send", "only"): "SEND_ONLY", ("send", "first"): "SEND_FIRST",
    ("send", "middle"): "SEND_MIDDLE", ("send", "last"): "SEND_LAST",
    ("send_imm", "only"): "SEND_ONLY_WITH_IMMEDIATE",
    ("send_imm", "last"): "SEND_LAST_WITH_IMMEDIATE",
    ("send_inv", "only"): "SEND_ONLY_WITH_INVALIDATE",
    ("write", "only"): "RDMA_WRITE_ONLY", ("write", "first"): "RDMA_WRITE_FIRST",
    ("write", "middle"): "RDMA_WRITE_MIDDLE", ("write", "last"): "RDMA_WRITE_LAST",
    ("write_imm", "only"): "RDMA_WRITE_ONLY_WITH_IMMEDIATE",
    ("write_imm", "first"): "RDMA_WRITE_FIRST", ("write_imm", "middle"): "RDMA_WRITE_MIDDLE",
    ("write_imm", "last"): "RDMA_WRITE_LAST_WITH_IMMEDIATE",
}.items()}
ACKNOWLEDGE = opcode_value("RC_ACKNOWLEDGE")


class RcTransport:
    """RC messages, ACKs and go-back-N retransmissions of the crafter's connections."""

    def _message(self, path, conn, side, kind, payload, va=0, rkey=0, imm=None, ieth=None):
        """One RC message of ``side`` on ``conn``, segmented at the path MTU, with the
        responder's ACKs; advances the clock past the last packet."""
        peer = 1 - side
        segs = [payload[i:i + self.pmtu] for i in range(0, len(payload), self.pmtu)] or [b""]
        n = len(segs)
        t = self.t
        sent = []
        for i, seg in enumerate(segs):
            pos = "only" if n == 1 else "first" if i == 0 else "last" if i == n - 1 else "middle"
            end = i == n - 1
            # chained in place (add_payload): "/" would copy the packet so far each time
            layers = BTH(opcode=_OPC[(kind, pos)], dqpn=conn.qpn[peer], psn=conn.next_psn(side))
            if kind.startswith("write") and pos in ("only", "first"):
                layers.add_payload(RETH(va=va, rkey=rkey, dma_len=len(payload)))
            if imm is not None and end:
                layers.add_payload(ImmDt(imm=imm))
            if ieth is not None:
                layers.add_payload(IETH(rkey=ieth))
            if end:
                ackreq = True
            else:
                old = conn.noack[side]
                conn.noack[side] = old + 1
                ackreq = old > RXE_MAX_PKT_PER_ACK
            if ackreq:
                conn.noack[side] = 0
            pad = -len(seg) % 4
            layers.ackreq = int(ackreq)
            layers.padcount = pad
            if seg or pad:
                layers.add_payload(Raw(seg + b"\0" * pad))
            self._emit(t, path, side, layers)
            sent.append(layers)
            psn = layers.psn
            if end:
                conn.msn[peer] += 1
            if ackreq and path.silent != peer:
                ack = BTH(opcode=ACKNOWLEDGE, dqpn=conn.qpn[side], psn=psn)
                ack.add_payload(_aeth(conn.msn[peer]))
                t_ack = max(t + self._jitter(2e-4, 6e-4), conn.last_ack[peer] + 5e-6)
                conn.last_ack[peer] = t_ack
                self._emit(t_ack, path, peer, ack)
            t += self._wire_gap(len(seg))
        self.t = t
        return sent

    def _retransmit(self, path):
        """Go-back-N after the ACK timeout: every unacknowledged packet again, with its
        PSN; after RC_RETRY_COUNT retries the QP fails and so does the path (on the side
        that retransmits)."""
        entry = path.unacked[0]
        if entry["tries"] >= RC_RETRY_COUNT:
            if entry["side"] == C:
                self._path_error(path, cause="retry_exceeded")
            else:
                self._server_path_error(path, cause="retry_exceeded")
            return
        t = self.t
        for item in path.unacked:
            item["tries"] += 1
            for ib in item["packets"]:
                self._emit(t, path, item["side"], ib)
                t += self._wire_gap(len(ib))
            self._event("retransmission", path=path.index,
                        cid=item["cid"],
                        packets=len(item["packets"]))
        self.t = t
        entry["next"] = self.t + RC_ACK_TIMEOUT + self._jitter(0.0, 0.01)

    def _unacked(self, path, side, packets, req=None, cid=0):
        """Packets of ``side`` that the peer will never acknowledge: go-back-N later."""
        path.unacked.append({"side": side, "req": req, "cid": cid, "packets": packets,
                             "tries": 0,
                             "next": self.t + RC_ACK_TIMEOUT + self._jitter(0.0, 0.01)})


def _aeth(msn):
    return AETH(syndrome=AETH_ACK, msn=msn & 0xFFFFFF)


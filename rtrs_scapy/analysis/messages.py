"""What complete RTRS messages mean (docs/PROTOCOL.md#immediate-data,
docs/PROTOCOL.md#flows, docs/PROTOCOL.md#pairing-requests-and-responses,
docs/PROTOCOL.md#rnbd): requests (trailer and RNBD header, buf_id/offset from the
immediate), responses (msg_id/errno, rkey_rsp) and their pairing by buf_id, failover
and aborted requests, heartbeats, info_req/info_rsp, READ data (RNBD replies) and
invalidations.

A mixin of the Analyzer: it uses the Analyzer's model helpers (paths, records,
anomalies); the per-packet transport work stays in analyzer.py.
"""

from ..constants import (
    RNBD_MSG_OPEN_RSP, RTRS_HB_ACK_IMM, RTRS_HB_MSG_IMM, RTRS_IO_REQ_IMM, RTRS_IO_RSP_IMM,
    RTRS_IO_RSP_W_INV_IMM, errno_name, rnbd_msg_type, short_name,
)
from ..fastpath.plan import plan
from ..imm import ERRNO_MASK, IMM_PAYLOAD_MASK, IMM_TYPE_SHIFT, MSG_ID_BITS, MSG_ID_MASK
from ..layers.rtrs import RtrsMsgInfoReq, RtrsMsgInfoRsp, RtrsMsgRkeyRsp, send_message_class
from .infer import MemBitsGuess
from .model import Request
from .requests import RNBD_ADMIN, decode_rnbd, decode_rnbd_reply, parse_request, rnbd_type

_rkey_rsp = plan(RtrsMsgRkeyRsp).reader("buf_id", "rkey")
_info_rsp_count = plan(RtrsMsgInfoRsp).reader("sg_cnt")


class MessageInterpreter:
    """Complete messages of a stream → the model (mixed into Analyzer)."""

    def _complete(self, stream, is_send, msg, imm, ieth, frame, ts):
        self.completed = (frame, msg, is_send)
        if imm is not None:
            kind = imm >> IMM_TYPE_SHIFT
            if kind == RTRS_IO_REQ_IMM:
                self._request(stream, msg, imm, frame, ts)
            elif kind == RTRS_IO_RSP_IMM or kind == RTRS_IO_RSP_W_INV_IMM:
                self._response(stream, msg, imm, is_send, frame, ts)
            elif kind == RTRS_HB_MSG_IMM or kind == RTRS_HB_ACK_IMM:
                self._heartbeat(stream, kind, frame, ts)
            else:
                self.anomaly(frame, "unknown_imm", "immediate 0x%08x" % imm)
        elif ieth is not None:
            self._invalidate(stream, ieth)
        elif msg is None:
            return
        elif is_send:
            self._info(stream, msg, frame, ts)
        else:
            self._read_data(stream, msg, frame, ts)

    def _stream_path(self, stream, client_to_server):
        """The path of a stream; infers it from the direction when there was no CM."""
        if stream.conn is not None:
            return stream.conn.path
        if stream.path_inferred is None:
            if client_to_server:
                stream.path_inferred = self.inferred_path(stream.src, stream.dst)
            else:
                stream.path_inferred = self.inferred_path(stream.dst, stream.src)
            stream.client_to_server = client_to_server
        return stream.path_inferred

    def _request(self, stream, msg, imm, frame, ts):
        path = self._stream_path(stream, True)
        if msg is None:
            return
        parsed = parse_request(msg)
        if parsed is None:
            self.anomaly(frame, "bad_trailer", "IO_REQ message of %d bytes without an "
                         "RTRS read/write trailer" % msg.length)
            return
        payload = imm & IMM_PAYLOAD_MASK
        guess = self.guesses.get(path)
        if guess is None and path.mem_bits is None:  # a handshake without a usable qd
            guess = self.guesses[path] = MemBitsGuess()
            path.queue_depth_inferred = True
        if guess is not None and (guess.add_request(payload, parsed.offset)
                                  or path.mem_bits is None):
            self._rekey(path, guess)
        bits = path.mem_bits
        buf_id = payload >> bits
        offset = payload & ((1 << bits) - 1)
        if offset != parsed.offset and guess is None:
            self.anomaly(frame, "offset_mismatch", "immediate offset %d, message says %d"
                         % (offset, parsed.offset))
        counter = path.io[parsed.op]
        counter.count += 1
        counter.bytes += parsed.data_len + parsed.usr_len
        rnbd = None
        kind = rnbd_type(parsed.usr)
        if self.keep_messages or kind in RNBD_ADMIN:
            rnbd = decode_rnbd(parsed.usr)
        req = Request(frame, ts, parsed.op, buf_id, offset, parsed.usr_len, parsed.data_len,
                      payload, stream.conn, msg.first_frame,
                      desc_key=parsed.desc["key"] if parsed.desc else None, rnbd=rnbd,
                      rnbd_kind=kind)
        previous = path.pending.get(buf_id)
        if previous is not None:
            self.anomaly(frame, "buf_id_reused", "buf_id %d still pending from frame %d"
                         % (buf_id, previous.frame))
        self._take_over(path, buf_id, req)
        path.pending[buf_id] = req
        if req.desc_key is not None:
            path.reads_by_key[req.desc_key] = req
        fields = {"buf_id": buf_id, "offset": offset, "usr_len": parsed.usr_len,
                  "data_len": parsed.data_len, "sg_cnt": parsed.sg_cnt,
                  "first_frame": msg.first_frame}
        if req.failover_from is not None:
            fields["failover_from"] = req.failover_from
        if parsed.desc:
            fields["desc"] = parsed.desc
        req.record = self.record(frame, ts, stream.src, stream.dst, stream.dqpn, stream.conn,
                                 parsed.op, fields, rnbd, path=path)

    def _take_over(self, path, buf_id, req):
        """buf_ids are per client session: the same buf_id pending on another path of
        the session is a request failed over to this one (docs/PROTOCOL.md#failover).
        It counts on this path, as the kernel's failover_cnt; its latency runs from the
        first send, the failover delay (first send -> re-send) is kept apart."""
        session = path.session
        if session is None or session.paths_uuid is None:
            return
        for other in session.paths:
            if other is not path:
                stale = other.pending.pop(buf_id, None)
                if stale is not None:
                    path.failovers += 1
                    path.failover_delays.append(req.time - stale.time)
                    req.time, req.failover_from = stale.time, stale.frame
                    if stale.desc_key is not None:
                        other.reads_by_key.pop(stale.desc_key, None)

    def abort_pending(self, path):
        """A path (re)connects: its unanswered requests will never be answered."""
        path.aborted += len(path.pending)
        path.pending.clear()
        path.reads_by_key.clear()

    def _rekey(self, path, guess):
        bits = guess.value
        path.mem_bits = bits
        path.queue_depth = guess.queue_depth(bits)
        pending = list(path.pending.values())
        path.pending = {}
        for req in pending:
            req.buf_id = req.payload >> bits
            req.offset = req.payload & ((1 << bits) - 1)
            path.pending[req.buf_id] = req
            if req.record is not None:
                req.record["fields"].update(buf_id=req.buf_id, offset=req.offset)

    def _response(self, stream, msg, imm, is_send, frame, ts):
        path = self._stream_path(stream, False)
        payload = imm & IMM_PAYLOAD_MASK
        msg_id = payload & MSG_ID_MASK
        errno = -((payload >> MSG_ID_BITS) & ERRNO_MASK)
        fields = {"msg_id": msg_id, "errno": errno,
                  "with_invalidate": imm >> IMM_TYPE_SHIFT == RTRS_IO_RSP_W_INV_IMM}
        if is_send and msg is not None and send_message_class(msg.data()) is RtrsMsgRkeyRsp:
            buf_id, rkey = _rkey_rsp(msg.data(), 0)
            fields.update(rkey_rsp={"buf_id": buf_id, "rkey": rkey})
            path.rkey_refreshes += 1
            if path.always_invalidate is None:
                path.always_invalidate = True
        elif path.always_invalidate is None and not is_send:
            path.always_invalidate = False
        req = path.pending.pop(msg_id, None)
        guess = self.guesses.get(path)
        if req is None and guess is not None:
            for candidate in list(path.pending.values()):
                values = guess.matching(candidate.payload, msg_id)
                if values and guess.restrict(values):
                    self._rekey(path, guess)
                    req = path.pending.pop(msg_id, None)
                    break
        rec = self.record(frame, ts, stream.src, stream.dst, stream.dqpn, stream.conn, "io_rsp",
                          fields, path=path)
        if req is None:
            if path.sess_uuid is not None:
                self.anomaly(frame, "unmatched_response", "no pending request for msg_id %d"
                             % msg_id)
            else:
                self.unmatched_responses += 1
            return
        if req.desc_key is not None:
            path.reads_by_key.pop(req.desc_key, None)
        latency = ts - req.time
        path.latencies[req.op].append(latency)
        if errno:
            path.io[req.op].errors += 1
            error = {"frame": frame, "op": req.op, "errno": errno, "name": errno_name(errno),
                     "request_frame": req.frame}
            if req.rnbd_kind is not None:
                error["rnbd"] = short_name(rnbd_msg_type, req.rnbd_kind, "RNBD_MSG_").lower()
            path.errors.append(error)
        if rec is not None:
            rec["paired_frame"], rec["latency"] = req.frame, latency
        if req.record is not None:
            req.record["paired_frame"], req.record["latency"] = frame, latency

    def _heartbeat(self, stream, kind, frame, ts):
        name = "hb_msg" if kind == RTRS_HB_MSG_IMM else "hb_ack"
        self.record(frame, ts, stream.src, stream.dst, stream.dqpn, stream.conn, name, {},
                    path=stream.path)
        if stream.conn is None and stream.path_inferred is None:
            self.unattributed.append((stream, kind))
            return
        self._count_heartbeat(stream.path, stream.client_to_server, kind)
        self.cm.heartbeat(stream.path, frame, ts)

    @staticmethod
    def _count_heartbeat(path, client_to_server, kind):
        side = "client_to_server" if client_to_server else "server_to_client"
        key = side if kind == RTRS_HB_MSG_IMM else "acks_" + side
        path.heartbeats[key] += 1

    def _invalidate(self, stream, rkey):
        """SEND WITH INVALIDATE of a read's client buffer: link it to the read
        (docs/PROTOCOL.md#which-operation-carries-what)."""
        path = stream.path
        req = path.reads_by_key.get(rkey) if path is not None else None
        if req is not None and req.record is not None:
            req.record["fields"]["invalidate_frame"] = stream.last_frame

    def _info(self, stream, msg, frame, ts):
        data = msg.data() if msg.whole else b""
        cls = send_message_class(data)
        if cls is RtrsMsgInfoReq:
            path = self._stream_path(stream, True)
            fields = plan(RtrsMsgInfoReq).decode(data, 0, len(data))
            path.pathname = fields["pathname"]
            if path.session.sessname is None:
                path.session.sessname = fields["pathname"]
            self.record(frame, ts, stream.src, stream.dst, stream.dqpn, stream.conn,
                        "info_req", {"pathname": fields["pathname"]}, path=path)
        elif cls is RtrsMsgInfoRsp:
            path = self._stream_path(stream, False)
            path.chunks = _info_rsp_count(data, 0)[0]
            path.state = "connected"
            self.record(frame, ts, stream.src, stream.dst, stream.dqpn, stream.conn,
                        "info_rsp", {"sg_cnt": path.chunks}, path=path)
        else:
            self.anomaly(frame, "unknown_send", "SEND of %d bytes is no RTRS message"
                         % msg.length)

    def _read_data(self, stream, msg, frame, ts):
        """The server's RDMA WRITE of READ data: RNBD replies are decoded
        (docs/PROTOCOL.md#rnbd)."""
        path = stream.path
        if path is None or msg.rkey is None:
            return
        req = path.reads_by_key.get(msg.rkey)
        if req is None or req.rnbd is None or rnbd_type(msg.data()[:4]) is None:
            return
        reply = decode_rnbd_reply(msg.data())
        if reply is None:
            return
        if rnbd_type(msg.data()) == RNBD_MSG_OPEN_RSP and req.rnbd.get("dev_name") is not None:
            path.devices[reply["device_id"]] = req.rnbd["dev_name"]
        if req.record is not None:
            req.record["fields"]["reply_frame"] = frame
            req.record["rnbd_reply"] = reply

"""The RNBD workload of a crafted session: permits (buf_ids), client buffers,
requests and the server's responses, SESS_INFO/OPEN/CLOSE and block IO
(docs/PROTOCOL.md#chunks-and-what-the-client-writes,
docs/PROTOCOL.md#which-operation-carries-what, docs/PROTOCOL.md#rnbd).  A mixin of
SessionCrafter, which owns the connections, the clock and the packet log."""

from ..spec.constants import (
    RNBD_F_FUA, RNBD_F_SYNC, RNBD_OP_CODES, RNBD_SECTOR_SIZE, RTRS_MSG_NEED_INVAL_F,
)
from ..spec.imm import encode_io_req, encode_io_rsp
from ..layers.rnbd import (
    RnbdMsgClose, RnbdMsgIo, RnbdMsgOpen, RnbdMsgOpenRsp, RnbdMsgSessInfo,
    RnbdMsgSessInfoRsp,
)
from ..layers.rtrs import RtrsMsgRdmaRead, RtrsMsgRkeyRsp, RtrsSgDesc
from ..layers.rtrs_request import RtrsReadRequest, RtrsWriteRequest
from .params import MAX_HW_BYTES, RNBD_PRIO, C, S


class RnbdWorkload:
    """RNBD requests and responses over the crafter's paths (mixed into SessionCrafter)."""

    def _permit(self):
        buf = next(i for i in range(self.qd) if i not in self._permits)
        self._permits.add(buf)
        return buf

    def _client_buffer(self, buf, admin=False):
        """VA and a freshly registered rkey of the client's buffer for READ data."""
        mr = self._client_mr.get(buf)
        if mr is None:
            va = (0xFFFF8D0000000000 | (self.rng.randrange(1 << 28) << 12)
                  | ((self.rng.randrange(64) * 64) if admin else 0))
            mr = self._client_mr[buf] = [va, (self._client_mr_index << 8) | self.rng.randrange(256)]
            self._client_mr_index += 1
        else:
            mr[1] = (mr[1] & ~0xFF) | ((mr[1] + 1) & 0xFF)
            if not admin:
                mr[0] = 0xFFFF8D0000000000 | (self.rng.randrange(1 << 28) << 12)
        return mr[0], mr[1]

    def _pick(self, path=None, cid=None):
        if path is None:
            live = [p for p in self.paths if p.state == "connected" and p.silent is None]
            if not live:
                live = [p for p in self.paths if p.state == "connected"]
            if not live:
                raise RuntimeError("no connected path")
            path = live[self._rr % len(live)]
            self._rr += 1
        if cid is None:
            if self.rng.random() < 0.15:
                self._cpu = self.rng.randrange(self.cpus)
            cid = 1 + self._cpu % (path.cid_num - 1)
        return path, path.conns[cid]

    def _send_request(self, path, conn, direction, usr, data=b"", data_len=0, desc=False,
                      admin=False, label=None, buf=None, sg=None):
        """The client's RDMA WRITE WITH IMM of one request; returns its record.

        ``desc``: a READ that gets data back (sg_cnt 1, NEED_INVAL_F) into a freshly
        registered client buffer; ``admin`` buffers are the RNBD messages' own.
        """
        if buf is None:
            buf = self._permit()
        addr, rkey = path.rbuf[buf]
        usr_bytes = bytes(usr)
        if direction == "write":
            payload = bytes(RtrsWriteRequest(data=data, usr=usr))
            va = addr
            data_len = len(data)
        else:
            if desc and sg is None:
                va_c, key_c = self._client_buffer("admin" if admin else buf, admin)
                sg = RtrsSgDesc(addr=va_c, key=key_c, len=data_len)
            trailer = RtrsMsgRdmaRead(flags=RTRS_MSG_NEED_INVAL_F if sg else 0,
                                      desc=[sg] if sg else [])
            payload = bytes(RtrsReadRequest(usr=usr, trailer=trailer))
            va = addr + data_len
        imm = encode_io_req(buf, data_len + len(usr_bytes), self.qd)
        t0 = self.t
        packets = self._message(path, conn, C, "write_imm", payload, va=va, rkey=rkey, imm=imm)
        req = dict(t=round(t0, 6), path=path.index, cid=conn.cid, buf_id=buf,
                   dir=direction, data_len=data_len, usr_len=len(usr_bytes), op=label,
                   errno=0, desc=(sg.addr, sg.key) if sg else None, failover=False, lost=False,
                   _usr=usr, _data=data, _sg=sg,
                   # the client's link is down: it never reached the wire (nor the server)
                   _unsent=path.silent == C, _undelivered=False)
        if path.server_silent:
            self._unacked(path, C, packets, req=req, cid=conn.cid)
        self.requests.append(req)
        return req

    def _send_response(self, path, conn, req, errno=0, reply=None):
        """The server's answer chain for ``req``; releases the permit
        (docs/PROTOCOL.md#which-operation-carries-what)."""
        if path.server_silent or req["_unsent"]:
            req["errno"] = None  # no answer; re-issued on another path when this one fails
            path.pending.append(req)
            return
        self.t += self._jitter(2e-4, 9e-4)
        buf = req["buf_id"]
        req["errno"] = errno
        with_inv = req["dir"] == "read" and req["desc"] is not None
        packets = []
        if with_inv:
            if errno == 0 and req["data_len"]:
                va, key = req["desc"]
                data = reply if reply is not None else self.rng.randbytes(req["data_len"])
                packets += self._message(path, conn, S, "write", data, va=va, rkey=key)
            packets += self._message(path, conn, S, "send_inv", b"", ieth=req["desc"][1])
        imm = encode_io_rsp(buf, errno, with_invalidate=with_inv)
        if self.inval:
            entry = path.rbuf[buf]
            entry[1] = (entry[1] & ~0xFF) | ((entry[1] + 1) & 0xFF)
            packets += self._message(path, conn, S, "send_imm",
                                     bytes(RtrsMsgRkeyRsp(buf_id=buf, rkey=entry[1])), imm=imm)
        else:
            packets += self._message(path, conn, S, "write_imm", b"", imm=imm)
        if path.silent == C:
            # the answer goes into the client's dead link: never acknowledged (go-back-N),
            # never delivered; the client keeps the permit and re-sends the request
            req["_undelivered"] = True
            self._unacked(path, S, packets, req=req, cid=conn.cid)
            path.pending.append(req)
            return
        self._permits.discard(buf)
        if errno:
            self._event("io_error", path=path.index, errno=errno, op=req["op"])

    def requests_only(self, ios, path=None, cid=None):
        """Requests of several IOs in flight together, not answered yet (see
        :meth:`answer`); ``ios`` as for :meth:`io_batch`."""
        self._tick(self.t)
        path, conn = self._pick(path, cid)
        reqs = []
        for io in ios:
            reqs.extend(self._io_requests(path, conn, **io))
            self.t += self._jitter(5e-5, 4e-4)
        return reqs

    def answer(self, req):
        """The server's answer to a request of :meth:`requests_only`."""
        self._respond(req)
        self._gap()

    def _respond(self, req):
        path = self.paths[req["path"]]
        self._send_response(path, path.conns[req["cid"]], req, errno=req.pop("_errno"))

    def _gap(self):
        self.t += self._jitter(0.0008, 0.006)
        self._tick(self.t)

    # -- RNBD (docs/PROTOCOL.md#rnbd)

    def rnbd_sess_info(self, path=None):
        """SESS_INFO on cid 0 (RTRS READ of 36 bytes) and the server's sess_info_rsp."""
        self._tick(self.t)
        path = path or self._pick()[0]
        conn = path.conns[0]
        req = self._send_request(path, conn, "read", RnbdMsgSessInfo(), data_len=36, desc=True,
                                 admin=True, label="sess_info")
        self._send_response(path, conn, req, reply=bytes(RnbdMsgSessInfoRsp()))
        self._sess_info_done = True
        self._gap()

    def rnbd_open(self, dev_name, errno=0, path=None, nsectors=131072, access_mode=1):
        """OPEN (RTRS READ of 56 bytes) and open_rsp; returns the device_id or None."""
        self._tick(self.t)
        path = path or self._pick()[0]
        conn = path.conns[0]
        dev_id = self._next_device_id
        reply = bytes(RnbdMsgOpenRsp(device_id=dev_id, nsectors=nsectors, max_hw_sectors=255,
                                     physical_block_size=4096, logical_block_size=512,
                                     max_segments=128))
        usr = RnbdMsgOpen(access_mode=access_mode, dev_name=dev_name.encode())
        req = self._send_request(path, conn, "read", usr, data_len=56, desc=True, admin=True,
                                 label="open")
        self._send_response(path, conn, req, errno=errno, reply=reply)
        self._gap()
        if errno:
            return None
        self._next_device_id += 1
        self.devices[dev_id] = dev_name
        self.device_log[dev_id] = dev_name
        return dev_id

    def rnbd_map(self, dev_name="/dev/ram0", scan_sectors=(0, 8, 24), errno=0, sess_info=None):
        """What `map_device` puts on the wire: SESS_INFO (once per session unless
        ``sess_info`` says otherwise, e.g. after a full outage), OPEN, partition-scan reads."""
        if sess_info or (sess_info is None and not self._sess_info_done):
            if self._sess_info_done:  # a new server session: device ids start again at 0
                self._next_device_id = 0
            self.rnbd_sess_info()
        dev = self.rnbd_open(dev_name, errno=errno)
        if dev is not None:
            for sector in scan_sectors:
                self.io("read", sector * RNBD_SECTOR_SIZE, 4096, device_id=dev, label="scan")
        return dev

    def rnbd_close(self, device_id=0, path=None):
        """CLOSE: an RTRS WRITE with an 8-byte user header and no data."""
        self._tick(self.t)
        path = path or self._pick()[0]
        conn = path.conns[0]
        req = self._send_request(path, conn, "write", RnbdMsgClose(device_id=device_id),
                                 label="close")
        self._send_response(path, conn, req)
        self.devices.pop(device_id, None)
        self._gap()

    def io(self, op, offset, size, errno=0, device_id=0, path=None, cid=None, label=None,
           flags=None):
        """One block IO: read, write, flush, discard or write_zeroes
        (docs/PROTOCOL.md#the-rw-field, docs/PROTOCOL.md#rnbd-messages).

        Reads and writes larger than 124 KiB are split like the block layer does
        (max_hw_sectors_kb 124) and the parts are in flight together.
        ``errno`` (negative or positive) is what the server answers for every part.
        """
        return self.io_batch([dict(op=op, offset=offset, size=size, errno=errno,
                                   device_id=device_id, label=label, flags=flags)],
                             path=path, cid=cid)

    def io_batch(self, ios, path=None, cid=None, shuffle=False):
        """Several IOs in flight together on one connection (distinct buf_ids); with
        ``shuffle`` the server answers them in a random order (responses are not FIFO,
        docs/PROTOCOL.md#pairing-requests-and-responses).  ``ios``: dicts with the keyword
        arguments of :meth:`io`."""
        reqs = self.requests_only(ios, path, cid)
        order = list(reqs)
        if shuffle:
            self.rng.shuffle(order)
        for req in order:
            self._respond(req)
        self._gap()
        return reqs

    def _io_requests(self, path, conn, op, offset, size, errno=0, device_id=0, label=None,
                     flags=None):
        rw = RNBD_OP_CODES[op] | (flags if flags is not None else
                        RNBD_F_SYNC if op in ("read", "write") else
                        RNBD_F_SYNC | RNBD_F_FUA if op == "flush" else 0)
        if op in ("read", "write"):
            parts = [(o, min(MAX_HW_BYTES, offset + size - o))
                     for o in range(offset, offset + size, MAX_HW_BYTES)] or [(offset, 0)]
        else:
            parts = [(offset, size)]
        label = label or op
        reqs = []
        for off, length in parts:
            hdr = RnbdMsgIo(device_id=device_id, sector=off // RNBD_SECTOR_SIZE, rw=rw, bi_size=length,
                            prio=RNBD_PRIO)
            if op == "write":
                req = self._send_request(path, conn, "write", hdr,
                                         data=self.rng.randbytes(length), label=label)
            elif op == "read":
                req = self._send_request(path, conn, "read", hdr, data_len=length,
                                         desc=length > 0, label=label)
            elif op == "flush":
                req = self._send_request(path, conn, "read", hdr, label=label)
            else:
                req = self._send_request(path, conn, "write", hdr, label=label)
            req["_errno"] = -abs(errno)
            reqs.append(req)
        return reqs

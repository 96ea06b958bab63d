-- runtime.lua: the hand-written, stateful half of the RTRS/RNBD dissector.
--
-- Inlined into wireshark/rtrs.lua by rtrs_scapy.wireshark.generate.  It uses the
-- generated locals (P_RTRS, P_RNBD, C, OP, CM, VS, F, EF, SIZE, LIST, READ,
-- DISSECT, RTRS_SEND_BY_TYPE, RTRS_TRAILER_BY_TYPE, RNBD_BY_TYPE, peek_*) and
-- holds no message layout: every offset and size comes from the generated part.
--
-- State scopes: path (queue depth, pending requests keyed by
-- buf_id, READ descriptors keyed by rkey), connection (S.qps, keyed by the
-- destination address and QP), frame (S.frames, keyed by pinfo.number).
-- State is written once per frame, on the first pass that shows the frame's IB
-- fields (see "entry points"); later passes render the stored frame record, so
-- answers never change.  Proto.init resets.

local fx = {
  opcode = Field.new("infiniband.bth.opcode"),
  destqp = Field.new("infiniband.bth.destqp"),
  psn = Field.new("infiniband.bth.psn"),
  padcnt = Field.new("infiniband.bth.padcnt"),
  reth_rkey = Field.new("infiniband.reth.r_key"),
  reth_len = Field.new("infiniband.reth.dmalen"),
  immdt = Field.new("infiniband.immdt"),
  ieth = Field.new("infiniband.ieth"),
  attr = Field.new("infiniband.mad.attributeid"),
  tid = Field.new("infiniband.mad.transactionid"),
  req_qpn = Field.new("infiniband.cm.req.localqpn"),
  rep_qpn = Field.new("infiniband.cm.rep.localqpn"),
  rej_reason = Field.new("infiniband.cm.rej.reason"),
  service_id = Field.new("infiniband.cm.req.serviceid"),
  req_comm = Field.new("infiniband.cm.req"),
  rep_comm = Field.new("infiniband.cm.rep"),
  rtu_comm = Field.new("infiniband.cm.rtu.localcommid"),
  dreq_comm = Field.new("infiniband.cm.dreq.localcommid"),
  drep_comm = Field.new("infiniband.cm.drsp.localcommid"),
  ip_src = Field.new("ip.src"),
  ip_dst = Field.new("ip.dst"),
  ip6_src = Field.new("ipv6.src"),
  ip6_dst = Field.new("ipv6.dst"),
  gid_src = Field.new("infiniband.grh.sgid"),
  gid_dst = Field.new("infiniband.grh.dgid"),
  lid_src = Field.new("infiniband.lrh.slid"),
  lid_dst = Field.new("infiniband.lrh.dlid"),
}

-- PSNs are 24 bits (docs/PROTOCOL.md#psn-sequence-and-retransmissions)
local PSN_MOD = 16777216
local MAX_REASSEMBLY = 4194304   -- give up on longer messages
local MIN_MEM_BITS = 12          -- queue depth 65535 (docs/PROTOCOL.md#io_req-buf_id-and-offset)
local MAX_HDR_DEFAULT = 65536    -- largest server PAGE_SIZE: user header + trailer fit in it

local S = {}

local function reset_state()
  S.cm = {}          -- CM transaction id -> {path, client, server, client_qpn, cid}
  S.comm = {}        -- CM communication id (either side) -> {cid}
  S.paths = {}       -- sess_uuid or address pair -> path
  S.qps = {}         -- "dst addr/dest QP" -> {path, dir = "c2s" | "s2c", cid}
  S.rx = {}          -- "dst addr/dest QP" -> message being reassembled
  S.last_psn = {}    -- "dst addr/dest QP" -> highest PSN of a request packet so far
  S.psn_frame = {}   -- "dst addr/dest QP#PSN" -> first frame with that PSN
  S.frames = {}      -- pinfo.number -> frame record
  S.seen = {}        -- pinfo.number -> true once the frame was analysed
end
reset_state()

-- == helpers ==

local function value_of(field)
  local fi = field()
  if fi then return fi.value end
  return nil
end

local ADDRESS_FIELDS = { { fx.ip_src, fx.ip_dst }, { fx.ip6_src, fx.ip6_dst },
                         { fx.gid_src, fx.gid_dst }, { fx.lid_src, fx.lid_dst } }

local function addresses()
  for i = 1, #ADDRESS_FIELDS do
    local pair = ADDRESS_FIELDS[i]
    local s, d = pair[1](), pair[2]()
    if s and d then return tostring(s.value), tostring(d.value) end
  end
  return "?", "?"
end

local function bitlen(x)
  local n = 0
  while x > 0 do
    x = math.floor(x / 2)
    n = n + 1
  end
  return n
end

local function mem_bits_of(queue_depth)
  return C.IMM_TYPE_SHIFT - bitlen(queue_depth - 1)
end

local function pair_path(a, b)
  local key = (a < b) and (a .. "|" .. b) or (b .. "|" .. a)
  local path = S.paths[key]
  if not path then
    path = { pending = {}, unresolved = {}, reads = {} }
    S.paths[key] = path
  end
  return path, key
end

local function set_queue_depth(path, qd, max_hdr)
  if qd and qd > 0 and not path.qd then
    path.qd = qd
    path.mem_bits = mem_bits_of(qd)
  end
  if max_hdr and max_hdr > 0 then path.max_hdr = max_hdr end
end

local function short_name(table, value, prefix, suffix)
  local name = table[value]
  if not name then return tostring(value) end
  name = string.gsub(name, "^" .. prefix, "")
  if suffix then name = string.gsub(name, suffix .. "$", "") end
  return name
end

local function imm_parts(imm)
  local kind = bit.rshift(imm, C.IMM_TYPE_SHIFT)
  local payload = bit.band(imm, 0x0FFFFFFF)
  return kind, payload
end

-- == requests: trailer checks of docs/PROTOCOL.md#request-trailers ==

-- READ: the trailer sits after the user header, with sg_cnt 1 or 0 descriptors.
local function classify_read(mtvb, len)
  local elem = LIST.rdma_read.element
  for _, n in ipairs({ 1, 0 }) do
    local usr_len = len - SIZE.rdma_read - SIZE[elem] * n
    if usr_len >= 0 then
      local v = READ.rdma_read(mtvb, usr_len)
      if v and v.type == C.RTRS_MSG_READ and v.usr_len == usr_len and v[LIST.rdma_read.count] == n then
        local data_len = 0
        if n == 1 then data_len = v.desc[1].len end
        return { trailer = "rdma_read", trailer_off = usr_len, usr_off = 0, usr_len = usr_len,
                 data_len = data_len, chunk_off = data_len + usr_len, desc = v.desc[1] }
      end
    end
  end
  return nil
end

-- WRITE: data | user header | trailer, the trailer ends the message.
local function classify_write(mtvb, len)
  local off = len - SIZE.rdma_write
  if off < 0 then return nil end
  local v = READ.rdma_write(mtvb, off)
  if not v or v.type ~= C.RTRS_MSG_WRITE or v.usr_len > off then return nil end
  return { trailer = "rdma_write", trailer_off = off, usr_off = off - v.usr_len, usr_len = v.usr_len,
           data_len = off - v.usr_len, chunk_off = off }
end

local function user_header(mtvb, req)
  if req.usr_len < 2 then return end
  local name = RNBD_BY_TYPE[peek_rnbd_type(mtvb, req.usr_off)]
  if not name then return end
  req.usr_name = name
  if req.usr_len >= SIZE[name] then
    req.usr = READ[name](mtvb, req.usr_off)
  end
end

-- == queue depth inference without the CM handshake (docs/PROTOCOL.md#queue-depth-inference) ==

local function exact_log2(x)
  local b = 0
  while x > 1 do
    if x % 2 ~= 0 then return nil end
    x = x / 2
    b = b + 1
  end
  return b
end

local function resolve_buf(path, rec)
  local shift = 2 ^ path.mem_bits
  rec.buf_id = math.floor(rec.imm_payload / shift)
  rec.chunk_off_imm = rec.imm_payload % shift
  path.pending[rec.buf_id] = rec
end

-- A response with msg_id: find its request among the unresolved ones and learn mem_bits.
local function infer_pair(path, msg_id)
  for i, q in ipairs(path.unresolved) do
    local d = q.imm_payload - q.chunk_off
    local b = nil
    if d == 0 and msg_id == 0 then
      b = false
    elseif d > 0 and msg_id > 0 and d % msg_id == 0 then
      b = exact_log2(d / msg_id)
      if b and (b < MIN_MEM_BITS or b > C.IMM_TYPE_SHIFT) then b = nil end
    end
    if b ~= nil then
      table.remove(path.unresolved, i)
      if b then
        path.mem_bits = b
        path.inferred = true
        q.buf_id = msg_id
        q.chunk_off_imm = q.imm_payload % 2 ^ b
        local rest = path.unresolved
        path.unresolved = {}
        for _, r in ipairs(rest) do resolve_buf(path, r) end
      else
        q.buf_id = 0
        q.chunk_off_imm = q.imm_payload
      end
      return q
    end
  end
  return nil
end

-- == first pass: build the frame record of an IB payload ==

local function path_for(conn, src, dst)
  if conn then return conn.path end
  return (pair_path(src, dst))
end

local function learn_qp(qkey, path, dir)
  if not S.qps[qkey] then S.qps[qkey] = { path = path, dir = dir } end
end

-- A reassembled message keeps only its tail from rec.base on (the user header
-- and trailer of a WRITE end the message); single packets have base 0.
local function message_tvb(tvb, rec)
  if rec.reasm then return ByteArray.new(rec.reasm, true):tvb("Reassembled RTRS message") end
  if rec.len == tvb:len() then return tvb end
  return tvb(0, rec.len):tvb()
end

local function classify_with_imm(tvb, pinfo, rec, src, dst)
  local kind, payload = imm_parts(rec.imm)
  local conn = rec.conn
  rec.imm_type = kind
  if kind == C.RTRS_IO_REQ_IMM then
    if rec.op ~= OP.RDMA_WRITE_ONLY_WITH_IMMEDIATE and rec.op ~= OP.RDMA_WRITE_LAST_WITH_IMMEDIATE then
      return conn ~= nil
    end
    local base = rec.base or 0
    local mtvb = rec.len > base and not rec.data_only and message_tvb(tvb, rec) or nil
    local req = nil
    if mtvb then
      if base == 0 then req = classify_read(mtvb, rec.len) end
      if not req then
        req = classify_write(mtvb, rec.len - base)
        if req then
          req.data_len = req.data_len + base
          req.chunk_off = req.chunk_off + base
        end
      end
    end
    if not req then
      if not conn then return false end
      rec.kind = "bad_request"
      return true
    end
    for k, v in pairs(req) do rec[k] = v end
    user_header(mtvb, rec)
    rec.kind = "request"
    rec.imm_payload = payload
    local path = path_for(conn, src, dst)
    rec.path = path
    learn_qp(rec.qkey, path, "c2s")
    if path.mem_bits then
      resolve_buf(path, rec)
    else
      table.insert(path.unresolved, rec)
    end
    if rec.desc then path.reads[rec.desc.key] = rec end
    return true
  elseif kind == C.RTRS_IO_RSP_IMM or kind == C.RTRS_IO_RSP_W_INV_IMM then
    rec.msg_id = bit.band(payload, C.MSG_ID_MASK)
    rec.errno = -bit.band(bit.rshift(payload, C.MSG_ID_BITS), C.ERRNO_MASK)
    local path = path_for(conn, src, dst)
    local req = path.pending[rec.msg_id]
    if req then
      path.pending[rec.msg_id] = nil
    elseif not path.mem_bits then
      req = infer_pair(path, rec.msg_id)
    end
    if rec.len >= SIZE.rkey_rsp and peek_rtrs_type(tvb, 0) == C.RTRS_MSG_RKEY_RSP then
      rec.send = "rkey_rsp"
    end
    if not (conn or req or rec.send) then return false end
    rec.kind = "response"
    rec.path = path
    learn_qp(rec.qkey, path, "s2c")
    if req then
      rec.request = req
      req.response = rec
      rec.response_time = rec.time - req.time
    end
    return true
  elseif kind == C.RTRS_HB_MSG_IMM or kind == C.RTRS_HB_ACK_IMM then
    if not conn and (payload ~= 0 or rec.len ~= 0) then return false end
    rec.kind = "heartbeat"
    rec.path = path_for(conn, src, dst)
    return true
  end
  if not conn then return false end
  rec.kind = "unknown_imm"
  return true
end

local function classify_send(tvb, rec, src, dst)
  if rec.data_only or (rec.base or 0) > 0 then return false end
  local mtvb = message_tvb(tvb, rec)
  local name = RTRS_SEND_BY_TYPE[peek_rtrs_type(mtvb, 0)]
  if not name or rec.len < SIZE[name] then return false end
  local expected = SIZE[name]
  local v = READ[name](mtvb, 0)
  if LIST[name] then expected = expected + SIZE[LIST[name].element] * v[LIST[name].count] end
  if rec.len ~= expected then return false end
  if name == "info_req" and not rec.conn and v.pathname == "" then return false end
  rec.kind = "send"
  rec.send = name
  rec.v = v
  rec.path = path_for(rec.conn, src, dst)
  if name == "info_req" then learn_qp(rec.qkey, rec.path, "c2s") end
  if name == "info_rsp" then learn_qp(rec.qkey, rec.path, "s2c") end
  return true
end

local function classify_read_data(tvb, rec, src, dst)
  local path = path_for(rec.conn, src, dst)
  local req = rec.rkey and path.reads[rec.rkey]
  if not (rec.conn or req) then return false end
  rec.kind = "read_data"
  rec.path = path
  if req then rec.data_for = req.number end
  if not rec.fragments and rec.len >= 2 then
    local name = RNBD_BY_TYPE[peek_rnbd_type(tvb, 0)]
    if name and PROTO_OF[name] == "rnbd" and (name == "sess_info_rsp" or name == "open_rsp")
        and rec.len == SIZE[name] then
      rec.reply = name
      rec.reply_v = READ[name](tvb, 0)
    end
  end
  return true
end

-- Append a packet's payload to a message being reassembled; bytes before
-- rx.keep_from are counted but not kept.
local function rx_add(rx, tvb, len)
  if rx.parts and len > 0 then
    if rx.keep_from and rx.total + len <= rx.keep_from then
      rx.base = rx.total + len
    else
      rx.parts[#rx.parts + 1] = tvb:raw(0, len)
    end
  end
  rx.total = rx.total + len
end

local function first_pass_payload(tvb, pinfo)
  local op = value_of(fx.opcode)
  local dqp = value_of(fx.destqp)
  if op == nil or dqp == nil then return nil end
  local psn = value_of(fx.psn) or 0
  local pad = value_of(fx.padcnt) or 0
  local src, dst = addresses()
  local qkey = dst .. "/" .. dqp
  local rec = { number = pinfo.number, time = pinfo.abs_ts, op = op, qkey = qkey,
                conn = S.qps[qkey], len = math.max(tvb:len() - pad, 0) }
  local immfi = fx.immdt()
  if immfi and immfi.range:len() >= 4 then
    rec.imm = immfi.range:uint()
    rec.imm_type = imm_parts(rec.imm)
  end

  -- go-back-N retransmissions repeat (QP, PSN): show them as such, analyse once
  -- (docs/PROTOCOL.md#psn-sequence-and-retransmissions)
  local pkey = qkey .. "#" .. psn
  local orig = S.psn_frame[pkey]
  local last = S.last_psn[qkey]
  local delta = last and (psn - last) % PSN_MOD
  if orig or (delta and (delta == 0 or delta >= PSN_MOD / 2)) then
    rec.kind = "retransmission"
    rec.retrans_of = orig
    if rec.conn or (orig and S.frames[orig]) then return rec end
    return nil
  end
  S.psn_frame[pkey] = pinfo.number
  if delta and delta > 1 then rec.psn_gap = last end
  S.last_psn[qkey] = psn

  -- reassembly of multi-packet SEND / RDMA WRITE per QP by PSN
  -- (docs/PROTOCOL.md#chunks-and-what-the-client-writes)
  if op == OP.SEND_FIRST or op == OP.RDMA_WRITE_FIRST then
    local rx = { first = pinfo.number, psn = psn, op = op, frames = { pinfo.number },
                 rkey = value_of(fx.reth_rkey), total = 0, base = 0, parts = {} }
    if op == OP.RDMA_WRITE_FIRST then
      if rec.conn and rec.conn.dir == "s2c" then
        rx.parts = nil  -- READ data towards the client is not decoded: count it, keep no bytes
      else
        -- a request: only its last max_hdr_size bytes (user header + trailer) matter
        local dmalen = value_of(fx.reth_len)
        local path = path_for(rec.conn, src, dst)
        if dmalen then rx.keep_from = dmalen - (path.max_hdr or MAX_HDR_DEFAULT) end
      end
    end
    rx_add(rx, tvb, rec.len)
    S.rx[qkey] = rx
    rec.kind = "fragment"
    return rec.conn and rec or nil
  end
  if op == OP.SEND_MIDDLE or op == OP.RDMA_WRITE_MIDDLE or op == OP.SEND_LAST
      or op == OP.RDMA_WRITE_LAST or op == OP.RDMA_WRITE_LAST_WITH_IMMEDIATE
      or op == OP.SEND_LAST_WITH_IMMEDIATE then
    local rx = S.rx[qkey]
    if not rx or psn ~= (rx.psn + 1) % PSN_MOD or rx.total + rec.len > MAX_REASSEMBLY then
      S.rx[qkey] = nil
      rec.kind = "fragment"
      return rec.conn and rec or nil
    end
    rx.psn = psn
    table.insert(rx.frames, pinfo.number)
    rx_add(rx, tvb, rec.len)
    if op == OP.SEND_MIDDLE or op == OP.RDMA_WRITE_MIDDLE then
      rec.kind = "fragment"
      return rec.conn and rec or nil
    end
    S.rx[qkey] = nil
    rec.reasm = rx.parts and table.concat(rx.parts) or nil
    rec.len = rx.total
    rec.base = rx.base
    rec.data_only = rx.parts == nil
    rec.first = rx.first
    rec.fragments = rx.frames
    rec.rkey = rx.rkey
  elseif op == OP.RDMA_WRITE_ONLY or op == OP.RDMA_WRITE_ONLY_WITH_IMMEDIATE then
    rec.rkey = value_of(fx.reth_rkey)
  end

  local claimed = false
  if rec.imm ~= nil then
    claimed = classify_with_imm(tvb, pinfo, rec, src, dst)
  elseif op == OP.SEND_ONLY or op == OP.SEND_LAST then
    claimed = classify_send(tvb, rec, src, dst)
  elseif op == OP.RDMA_WRITE_ONLY or op == OP.RDMA_WRITE_LAST then
    claimed = classify_read_data(tvb, rec, src, dst)
  elseif op == OP.SEND_ONLY_WITH_INVALIDATE or op == OP.SEND_LAST_WITH_INVALIDATE then
    local ieth = fx.ieth()
    rec.rkey = ieth and ieth.range:uint() or nil
    local path = path_for(rec.conn, src, dst)
    local req = rec.rkey and path.reads[rec.rkey]
    if rec.conn or req then
      rec.kind = "invalidate"
      rec.path = path
      if req then rec.data_for = req.number end
      claimed = true
    end
  else
    claimed = rec.conn ~= nil
    rec.kind = "other"
  end
  if not claimed then return nil end
  if rec.fragments then
    for _, n in ipairs(rec.fragments) do
      if n ~= pinfo.number then
        local frag = S.frames[n] or { kind = "fragment", number = n }
        frag.last = pinfo.number
        S.frames[n] = frag
      end
    end
  end
  return rec
end

-- == rendering (every pass, from the frame record) ==

local function rnbd_info(name, v)
  if not v then return "RNBD " .. string.upper(name) end
  if name == "io" then
    return string.format("RNBD %s dev %d sector %s len %d",
                         short_name(VS.rnbd_io_op, bit.band(v.rw, C.RNBD_OP_MASK), "RNBD_OP_"),
                         v.device_id, tostring(v.sector), v.bi_size)
  elseif name == "open" then
    return string.format("RNBD OPEN %s %s", v.dev_name,
                         short_name(VS.rnbd_access_mode, v.access_mode, "RNBD_ACCESS_"))
  elseif name == "close" then
    return string.format("RNBD CLOSE dev %d", v.device_id)
  elseif name == "sess_info" or name == "sess_info_rsp" then
    return string.format("RNBD %s ver %d", string.upper(name), v.ver)
  elseif name == "open_rsp" then
    return string.format("RNBD OPEN_RSP dev %d nsectors %s", v.device_id, tostring(v.nsectors))
  end
  return "RNBD " .. string.upper(name)
end

local function current_buf(rec)
  if rec.buf_id == nil and rec.path and rec.path.mem_bits and rec.imm_payload then
    local shift = 2 ^ rec.path.mem_bits
    return math.floor(rec.imm_payload / shift), rec.imm_payload % shift
  end
  return rec.buf_id, rec.chunk_off_imm
end

local function info_of(rec)
  local kind = rec.kind
  if kind == "request" then
    local text
    if rec.usr_name then
      text = rnbd_info(rec.usr_name, rec.usr)
    else
      text = string.format("RTRS %s usr_len %d", rec.trailer == "rdma_read" and "READ" or "WRITE",
                           rec.usr_len)
    end
    local buf = current_buf(rec)
    if buf then return text .. string.format(" buf %d", buf) end
    return text .. string.format(" imm 0x%07x", rec.imm_payload)
  elseif kind == "response" then
    local text = string.format("RTRS %s buf %d errno %d",
                               short_name(VS.rtrs_imm_types, rec.imm_type, "RTRS_", "_IMM"),
                               rec.msg_id, rec.errno)
    if rec.response_time then
      text = text .. string.format(" (%d µs)", math.floor(rec.response_time * 1e6 + 0.5))
    end
    return text
  elseif kind == "heartbeat" then
    return "RTRS " .. short_name(VS.rtrs_imm_types, rec.imm_type, "RTRS_", "_IMM")
  elseif kind == "send" then
    if rec.send == "info_req" then return "RTRS INFO_REQ pathname " .. rec.v.pathname end
    if rec.send == "info_rsp" then return string.format("RTRS INFO_RSP sg_cnt %d", rec.v.sg_cnt) end
    return "RTRS " .. string.upper(rec.send)
  elseif kind == "read_data" then
    if rec.reply then return rnbd_info(rec.reply, rec.reply_v) end
    return string.format("RTRS READ data %d bytes", rec.len)
  elseif kind == "invalidate" then
    return string.format("RTRS SEND_INV rkey 0x%08x", rec.rkey or 0)
  elseif kind == "retransmission" then
    if rec.retrans_of then return string.format("RTRS retransmission of frame %d", rec.retrans_of) end
    return "RTRS retransmission"
  elseif kind == "fragment" then
    if rec.last then return string.format("RTRS fragment (message ends in %d)", rec.last) end
    return "RTRS fragment"
  elseif kind == "bad_request" then
    return "RTRS IO_REQ without trailer"
  elseif kind == "unknown_imm" then
    return string.format("RTRS unknown immediate 0x%08x", rec.imm)
  end
  return "RTRS"
end

local function add_imm(t, rec)
  local fi = fx.immdt()
  if not fi or rec.imm == nil then return end
  local r = fi.range
  local it = t:add(F.imm, r)
  it:add(F.imm_type, r, rec.imm_type)
  if rec.kind == "request" then
    local buf, off = current_buf(rec)
    if buf then it:add(F.imm_buf_id, r, buf) end
    if off then it:add(F.imm_offset, r, off) end
  elseif rec.msg_id ~= nil then
    it:add(F.imm_msg_id, r, rec.msg_id)
    local e = it:add(F.imm_errno, r, rec.errno)
    if rec.errno ~= 0 then e:add_proto_expert_info(EF.errno) end
  elseif rec.kind == "unknown_imm" then
    it:add_proto_expert_info(EF.unknown_imm)
  end
end

local function render_payload(tvb, pinfo, tree, rec)
  local t = tree:add(P_RTRS, tvb())
  local proto = "RTRS"
  local path = rec.path or (rec.conn and rec.conn.path)
  if rec.conn and rec.conn.cid then t:add(F.cid, rec.conn.cid):set_generated() end
  if path and path.qd then t:add(F.queue_depth, path.qd):set_generated() end
  if path and path.mem_bits then
    local it = t:add(F.mem_bits, path.mem_bits)
    it:set_generated()
    if path.inferred then it:add_proto_expert_info(EF.inferred) end
  end
  if rec.kind ~= "retransmission" then add_imm(t, rec) end
  if rec.psn_gap then
    t:add_proto_expert_info(EF.psn_gap, string.format("PSN gap: previous %d", rec.psn_gap))
  end
  local kind = rec.kind
  if kind == "retransmission" then
    local it = rec.retrans_of and t:add(F.retransmission_of, rec.retrans_of) or t
    it:add_proto_expert_info(EF.psn_gap, "Retransmission (PSN seen before)")
  elseif kind == "fragment" then
    if rec.last then t:add(F.fragment_of, rec.last):set_generated() end
  elseif kind == "request" or kind == "send" or (kind == "response" and rec.send)
      or (kind == "read_data" and rec.reply) then
    local mtvb = message_tvb(tvb, rec)
    if rec.fragments then t:add(F.msg_len, rec.len):set_generated() end
    if kind == "request" then
      if rec.usr_name then
        proto = "RNBD"
        local rt = tree:add(P_RNBD, mtvb(rec.usr_off, math.max(rec.usr_len, 1)))
        DISSECT[rec.usr_name](mtvb, pinfo, rt, rec.usr_off)
      end
      DISSECT[rec.trailer](mtvb, pinfo, t, rec.trailer_off)
    elseif kind == "read_data" then
      proto = "RNBD"
      local rt = tree:add(P_RNBD, mtvb(0, rec.len))
      DISSECT[rec.reply](mtvb, pinfo, rt, 0)
    else
      DISSECT[rec.send](mtvb, pinfo, t, 0)
    end
  elseif kind == "bad_request" then
    t:add_proto_expert_info(EF.no_trailer)
  elseif kind == "invalidate" and rec.rkey then
    local ieth = fx.ieth()
    if ieth then t:add(F.rkey, ieth.range) end
  end
  if rec.data_for then t:add(F.data_for, rec.data_for):set_generated() end
  if rec.response then t:add(F.response_in, rec.response.number):set_generated() end
  if rec.request then
    t:add(F.request_in, rec.request.number):set_generated()
    t:add(F.response_time, rec.response_time):set_generated()
    if rec.request.usr_name then proto = "RNBD" end
  end
  pinfo.cols.protocol:set(proto)
  pinfo.cols.info:set(info_of(rec))
end

-- == CM private data (REQ 56 B after the RDMA CM header, REP 196 B, REJ 148 B) ==

local CM_NAMES = {}
for name, attr in pairs(CM) do CM_NAMES[attr] = name end

local function first_pass_cm(tvb, pinfo)
  local attr = value_of(fx.attr)
  local tidv = value_of(fx.tid)
  local tid = tidv and tostring(tidv) or "?"
  local src, dst = addresses()
  local rec = { number = pinfo.number, attr = attr }
  if attr == CM.REQ then
    local v = READ.conn_req(tvb, 0)
    if not v then return nil end
    if v.magic ~= C.RTRS_MAGIC then
      -- not RTRS, unless it asks for the RTRS port: then it is a broken RTRS REQ
      local sid = value_of(fx.service_id)
      if not (sid and RTRS_SERVICE_IDS[tostring(sid)]) then return nil end
      rec.bad_magic = true
    end
    local path = S.paths[v.sess_uuid]
    if not path then
      path = pair_path(src, dst)
      S.paths[v.sess_uuid] = path
    end
    S.cm[tid] = { path = path, client = src, server = dst, client_qpn = value_of(fx.req_qpn),
                  cid = v.cid }
    local comm = value_of(fx.req_comm)
    if comm then S.comm[comm] = { cid = v.cid } end
    rec.msg, rec.v = "conn_req", v
  elseif attr == CM.REP or attr == CM.REJ then
    local v = READ.conn_rsp(tvb, 0)
    local setup = S.cm[tid]
    if not v or v.magic ~= C.RTRS_MAGIC then
      if not (setup and attr == CM.REJ) then return nil end
      rec.reason = value_of(fx.rej_reason)
      return rec
    end
    rec.msg, rec.v = "conn_rsp", v
    local comm = attr == CM.REP and value_of(fx.rep_comm)
    if comm and setup then S.comm[comm] = { cid = setup.cid } end
    if attr == CM.REP and v.errno == 0 then
      local path = setup and setup.path or pair_path(src, dst)
      set_queue_depth(path, v.queue_depth, v.max_hdr_size)
      local server_qpn = value_of(fx.rep_qpn)
      local cid = setup and setup.cid
      if server_qpn then
        S.qps[src .. "/" .. server_qpn] = { path = path, dir = "c2s", cid = cid }
      end
      if setup and setup.client_qpn then
        S.qps[setup.client .. "/" .. setup.client_qpn] = { path = path, dir = "s2c", cid = cid }
      end
    end
  else
    -- RTU, DREQ, DREP of a connection whose REQ/REP carried RTRS data
    local field = (attr == CM.RTU and fx.rtu_comm) or (attr == CM.DREQ and fx.dreq_comm)
                  or (attr == CM.DREP and fx.drep_comm)
    local known = field and S.comm[value_of(field)]
    if not known then return nil end
    rec.cm_only, rec.cid = true, known.cid
  end
  return rec
end

local function render_cm(tvb, pinfo, tree, rec)
  local t = tree:add(P_RTRS, tvb())
  local info
  if rec.cm_only then
    t:add(F.cid, rec.cid):set_generated()
    info = string.format("RTRS CM %s cid %d", short_name(CM_NAMES, rec.attr, ""), rec.cid)
  elseif rec.msg then
    DISSECT[rec.msg](tvb, pinfo, t, 0)
    local v = rec.v
    if rec.bad_magic then
      t:add_proto_expert_info(EF.bad_magic, string.format("RTRS magic 0x%04x", v.magic))
    elseif bit.rshift(v.version, 8) ~= C.RTRS_PROTO_VER_MAJOR then
      t:add_proto_expert_info(EF.bad_magic, string.format("RTRS protocol version 0x%04x", v.version))
    end
    if rec.msg == "conn_req" then
      info = string.format("RTRS CONN_REQ%s cid %d/%d recon_cnt %d first_conn %d",
                           rec.bad_magic and string.format(" (bad magic 0x%04x)", v.magic) or "",
                           v.cid, v.cid_num, v.recon_cnt, v.first_conn)
    else
      info = string.format("RTRS CONN_RSP queue_depth %d max_io_size %d errno %d",
                           v.queue_depth, v.max_io_size, v.errno)
      if rec.attr == CM.REJ or v.errno ~= 0 then
        info = "RTRS CONN_REJ" .. string.format(" errno %d", v.errno)
        t:add_proto_expert_info(EF.cm_reject, string.format("RTRS connection rejected, errno %d", v.errno))
      end
    end
  else
    info = string.format("RTRS CM reject, reason %s", tostring(rec.reason))
    t:add_proto_expert_info(EF.cm_reject, info)
  end
  pinfo.cols.protocol:set("RTRS")
  pinfo.cols.info:set(info)
end

-- == entry points ==
--
-- tshark -2 runs its first pass without a protocol tree unless a filter needs
-- one, and then no field extractor returns anything: a frame is analysed the
-- first time its IB fields are visible (S.seen), which is the first pass in
-- Wireshark and in one-pass tshark, the second pass in tshark -2.  Either way
-- each frame writes state once, in frame order, and is rendered from its record.

local function frame_record(tvb, pinfo, probe, analyse)
  local n = pinfo.number
  if S.seen[n] then return S.frames[n] end
  if pinfo.visited and S.frames[n] then return S.frames[n] end
  if value_of(probe) == nil then return nil end
  S.seen[n] = true
  local rec = analyse(tvb, pinfo)
  if rec then S.frames[n] = rec end
  return rec
end

local function heur_payload(tvb, pinfo, tree)
  local rec = frame_record(tvb, pinfo, fx.opcode, first_pass_payload)
  if not rec or rec.attr then return false end
  render_payload(tvb, pinfo, tree, rec)
  return true
end

local function heur_cm_private(tvb, pinfo, tree)
  local rec = frame_record(tvb, pinfo, fx.attr, first_pass_cm)
  if not rec or not rec.attr then return false end
  render_cm(tvb, pinfo, tree, rec)
  return true
end

-- Decode As: the same analysis, reported as consumed bytes.
local function decode_as_dissector(tvb, pinfo, tree)
  if heur_payload(tvb, pinfo, tree) then return tvb:len() end
  return 0
end

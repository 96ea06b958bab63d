-- render.lua: the tree and columns of a payload frame, from its record (every pass).
-- docs/PROTOCOL.md#immediate-data

-- The Info column, or nil when the dissection has none (tshark -T fields without
-- _ws.col.*, the first pass of tshark -2: tostring gives the column's name in
-- parentheses then): its text is not built for nothing.
local function info_column(pinfo)
  local info = pinfo.cols.info
  if tostring(info) == "(info)" then return nil end
  return info
end

local function short_name(table, value, prefix, suffix)
  local name = table[value]
  if not name then return tostring(value) end
  name = string.gsub(name, "^" .. prefix, "")
  if suffix then name = string.gsub(name, suffix .. "$", "") end
  return name
end

local function errno_text(e)
  local name = e ~= 0 and VS.errno[e]
  if name then return string.format("errno %d (%s)", e, name) end
  return string.format("errno %d", e)
end

local function imm_parts(imm)
  return bit.rshift(imm, C.IMM_TYPE_SHIFT), bit.band(imm, C.IMM_PAYLOAD_MASK)
end

local function dom_of(rec)
  return rec.dom or (rec.conn and rec.conn.dom)
end

local function rnbd_info(name, v)
  if not v then return "RNBD " .. string.upper(name) end
  if name == "io" then
    local op = bit.band(v.rw, C.RNBD_OP_MASK)
    if op == C.RNBD_OP_FLUSH then  -- no sector: the kernel sends a flush's (u64)-1
      return string.format("RNBD FLUSH dev %d len %d", v.device_id, v.bi_size)
    end
    return string.format("RNBD %s dev %d sector %s len %d",
                         short_name(VS.rnbd_io_op, op, "RNBD_OP_"),
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

-- buf_id and offset of an IO_REQ immediate, once its domain knows mem_bits
local function request_buf(rec)
  local d = dom_of(rec)
  if not (d and d.mem_bits and rec.payload) then return nil, nil end
  local shift = 2 ^ d.mem_bits
  return floor(rec.payload / shift), rec.payload % shift
end

local function imm_fields(rec)
  local kind, payload = imm_parts(rec.imm)
  return kind, -bit.band(bit.rshift(payload, C.MSG_ID_BITS), C.ERRNO_MASK)
end

-- The op of a request whose trailer the snaplen cut: a WRITE's offset is its length
-- minus the trailer, a READ's never (docs/PROTOCOL.md#header-only-captures).
local function header_only_op(rec)
  local _, off = request_buf(rec)
  if not off or rec.partial then return nil end
  return off == rec.len - SIZE.rdma_write and "WRITE" or "READ"
end

local function info_of(rec)
  local kind = rec.kind
  if kind == "request" then
    local text
    if rec.header_only then
      text = string.format("RTRS %s (header only)", header_only_op(rec) or "request")
    elseif rec.usr_name then
      text = rnbd_info(rec.usr_name, rec.usr)
    else
      text = string.format("RTRS %s usr_len %d", rec.trailer == "rdma_read" and "READ" or "WRITE",
                           rec.usr_len)
    end
    local buf = request_buf(rec)
    if buf then
      text = text .. string.format(" buf %d", buf)
    else
      text = text .. string.format(" imm 0x%07x", rec.payload)
    end
    if rec.partial then text = text .. " [started before the capture]" end
    return text
  elseif kind == "response" then
    local imm_type, errno = imm_fields(rec)
    local text = string.format("RTRS %s buf %d %s",
                               short_name(VS.rtrs_imm_types, imm_type, "RTRS_", "_IMM"),
                               rec.msg_id, errno_text(errno))
    local d = dom_of(rec)
    if rec.request then
      text = text .. string.format(" (%d µs)", floor((rec.time - rec.request.time) * 1e6 + 0.5))
    elseif d and d.mem_bits then
      text = text .. " [request before the capture]"
    end
    return text
  elseif kind == "heartbeat" then
    return "RTRS " .. short_name(VS.rtrs_imm_types, (imm_parts(rec.imm)), "RTRS_", "_IMM")
  elseif kind == "send" then
    return "RTRS " .. string.upper(rec.send)
  elseif kind == "read_data" then
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
  elseif kind == "cut_send" then
    return string.format("RTRS SEND of %d bytes (payload cut by the capture)", rec.len)
  end
  return "RTRS"
end

local function add_imm(t, rec)
  if rec.imm == nil then return end
  local fi = fx.immdt()
  if not fi then return end
  local r = fi.range
  local imm_type, errno = imm_fields(rec)
  local it = t:add(F.imm, r)
  it:add(F.imm_type, r, imm_type)
  if rec.kind == "request" then
    local buf, off = request_buf(rec)
    if buf then
      it:add(F.imm_buf_id, r, buf)
      it:add(F.imm_offset, r, off)
    end
    if rec.offset_conflict then it:add_proto_expert_info(EF.offset_conflict) end
  elseif rec.msg_id ~= nil then
    it:add(F.imm_msg_id, r, rec.msg_id)
    local e = it:add(F.imm_errno, r, errno)
    if errno ~= 0 then
      e:add_proto_expert_info(EF.errno, "Request failed: " .. errno_text(errno))
    end
  elseif rec.kind == "unknown_imm" then
    it:add_proto_expert_info(EF.unknown_imm)
  end
end

local function add_domain(t, d)
  if not (d and d.mem_bits) then return end
  t:add(F.queue_depth, d.qd):set_generated()
  t:add(F.queue_depth_source, d.source):set_generated()
  local it = t:add(F.mem_bits, d.mem_bits)
  it:set_generated()
  if d.source == "inferred" then
    it:add_proto_expert_info(EF.inferred)
  elseif d.source == "assumed" then
    it:add_proto_expert_info(EF.assumed, string.format(
      "Queue depth assumed: the capture cannot tell, kernel default %d", d.qd))
  end
end

-- The tail of a request whose start precedes the capture: its length from the immediate.
local function add_partial(t, rec)
  local it = t:add(F.partial, true)
  it:set_generated()
  local _, off = request_buf(rec)
  local visible = rec.len
  if off then
    t:add(F.msg_len, off + SIZE.rdma_write):set_generated()
    it:add_proto_expert_info(EF.partial, string.format(
      "Request started before the capture: last %d of %d bytes visible", visible,
      off + SIZE.rdma_write))
  else
    it:add_proto_expert_info(EF.partial, string.format(
      "Request started before the capture: last %d bytes visible", visible))
  end
end

-- The message tree of a request, send or RNBD reply; returns the protocol
-- column and, for sends and replies, the Info text.
local function render_message(tvb, pinfo, tree, t, rec)
  local kind = rec.kind
  local mtvb = message_tvb(tvb, rec)
  if rec.reasm and not rec.partial then t:add(F.msg_len, rec.len):set_generated() end
  if kind == "request" then
    if rec.usr_name then
      local rt = tree:add(P_RNBD, mtvb(rec.usr_off, math.max(rec.usr_len, 1)))
      DISSECT[rec.usr_name](mtvb, pinfo, rt, rec.usr_off)
    end
    DISSECT[rec.trailer](mtvb, pinfo, t, rec.trailer_off)
    if rec.partial then add_partial(t, rec) end
    return rec.usr_name and "RNBD" or "RTRS"
  elseif kind == "read_data" then
    local rt = tree:add(P_RNBD, mtvb(0, rec.len))
    return "RNBD", rnbd_info(rec.reply, (DISSECT[rec.reply](mtvb, pinfo, rt, 0)))
  end
  local v = DISSECT[rec.send](mtvb, pinfo, t, 0)
  if rec.send == "info_req" and v then return "RTRS", "RTRS INFO_REQ pathname " .. v.pathname end
  if rec.send == "info_rsp" and v then return "RTRS", string.format("RTRS INFO_RSP sg_cnt %d", v.sg_cnt) end
  return "RTRS"
end

-- A copy (rtrs.failover_of) and an original re-sent (rtrs.no_response,
-- rtrs.response_not_delivered).
local function add_failover(t, rec)
  local q = failover_of(rec)
  if q then
    local it = t:add(F.failover_of, q.number)
    it:set_generated()
    it:add_proto_expert_info(EF.failover, string.format("Failed over from frame %d", q.number))
  end
  if rec.no_response then
    local it = t:add(F.no_response, rec.no_response.number)
    it:set_generated()
    it:add_proto_expert_info(EF.no_response, string.format(
      "No response: re-sent in frame %d", rec.no_response.number))
  end
  local failed = unseen_from(rec)
  if failed then
    local it = t:add(F.failover_unseen, failed)
    it:set_generated()
    it:add_proto_expert_info(EF.failover_unseen, string.format(
      "Failed over from %s, original not on the wire (the kernel's permit order)", failed))
  end
  local copy = resent_in(rec)
  if copy then
    local it = t:add(F.response_not_delivered, copy.number)
    it:set_generated()
    it:add_proto_expert_info(EF.response_not_delivered, string.format(
      "Response not delivered: re-sent in frame %d", copy.number))
  end
end

local function render_payload(tvb, pinfo, tree, rec)
  local t = tree:add(P_RTRS, tvb())
  local proto, info = "RTRS", nil
  local d = dom_of(rec)
  if rec.conn and rec.conn.cid then t:add(F.cid, rec.conn.cid):set_generated() end
  add_domain(t, d)
  if rec.kind ~= "retransmission" then add_imm(t, rec) end
  if rec.psn_gap then
    t:add_proto_expert_info(EF.psn_gap, string.format("PSN gap: previous %d", rec.psn_gap))
  end
  local kind = rec.kind
  if rec.cut or rec.cut_frame then
    t:add_proto_expert_info(EF.cut, rec.header_only and
      "Payload cut by the capture: the trailer and RNBD header are unknown, the op is the immediate's"
      or "Payload cut by the capture: decoded from its headers")
  end
  if kind == "retransmission" then
    local it = rec.retrans_of and t:add(F.retransmission_of, rec.retrans_of) or t
    it:add_proto_expert_info(EF.psn_gap, "Retransmission (PSN seen before)")
  elseif kind == "request" and rec.header_only then
    local _, off = request_buf(rec)
    if off and not rec.partial then t:add(F.msg_len, rec.len):set_generated() end
  elseif kind == "fragment" then
    if rec.last then t:add(F.fragment_of, rec.last):set_generated() end
  elseif kind == "request" or kind == "send" or (kind == "response" and rec.send)
      or (kind == "read_data" and rec.reply) then
    proto, info = render_message(tvb, pinfo, tree, t, rec)
  elseif kind == "bad_request" then
    t:add_proto_expert_info(EF.no_trailer)
  elseif kind == "invalidate" and rec.rkey then
    local ieth = fx.ieth()
    if ieth then t:add(F.rkey, ieth.range) end
  end
  if kind == "request" then add_failover(t, rec) end
  if kind == "response" and rec.request and resent_in(rec.request) then
    local it = t:add(F.response_not_delivered, resent_in(rec.request).number)
    it:set_generated()
    it:add_proto_expert_info(EF.response_not_delivered, string.format(
      "Response not delivered: the request was re-sent in frame %d",
      resent_in(rec.request).number))
  end
  if rec.data_for then t:add(F.data_for, rec.data_for):set_generated() end
  if rec.response then t:add(F.response_in, rec.response.number):set_generated() end
  if rec.request then
    t:add(F.request_in, rec.request.number):set_generated()
    t:add(F.response_time, rec.time - rec.request.time):set_generated()
    if rec.request.usr_name then proto = "RNBD" end
  elseif kind == "response" and d and d.mem_bits then
    local it = t:add(F.request_before_capture, true)
    it:set_generated()
    it:add_proto_expert_info(EF.before_capture)
  end
  local info_col = info_column(pinfo)
  if not info_col then return end
  pinfo.cols.protocol:set(proto)
  -- a cut frame: the InfiniBand dissector fenced its own note ("Invalid Packet Length")
  if rec.cut_frame then info_col:clear_fence() end
  info_col:set(info or info_of(rec))
end

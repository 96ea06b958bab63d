-- cm.lua: REQ/REP/REJ private data, RTU/DREQ/DREP of RTRS connections.
-- docs/PROTOCOL.md#cm-rep-rej-rtu-dreq-drep-and-mra

local CM_NAMES = {}
for name, attr in pairs(CM) do CM_NAMES[attr] = name end

-- Who sent a REJ: its local comm id is the sender's, its remote comm id the peer's.
local function reject_sender(rec, setup, src)
  local mine = bget(S.comm, value_of(fx.rej_local_comm) or -1)
  if mine then return mine.side, setup or mine.setup end
  local peer = bget(S.comm, value_of(fx.rej_remote_comm) or -1)
  if peer then return peer.side == "client" and "server" or "client", setup or peer.setup end
  if setup then
    if src == setup.client then return "client", setup end
    if src == setup.server then return "server", setup end
  end
  return nil, setup
end

local function first_pass_req(tvb, rec, tid, src, dst)
  local v = READ.conn_req(tvb, 0)
  if not v then return nil end
  if v.magic ~= C.RTRS_MAGIC then
    -- not RTRS, unless it asks for the RTRS port: then it is a broken RTRS REQ
    local sid = value_of(fx.service_id)
    if not (sid and RTRS_SERVICE_IDS[tostring(sid)]) then return nil end
    rec.bad_magic = true
  end
  local setup = { dom = session_domain(v.paths_uuid), client = src, server = dst,
                  client_qpn = value_of(fx.req_qpn), cid = v.cid }
  bput(S.cm, tid, setup)
  local comm = value_of(fx.req_comm)
  if comm then bput(S.comm, comm, { setup = setup, side = "client" }) end
  rec.msg = "conn_req"
  return rec
end

local function first_pass_rep(tvb, rec, setup, src)
  local v = READ.conn_rsp(tvb, 0)
  if not (v and v.magic == C.RTRS_MAGIC) then return nil end
  rec.msg = "conn_rsp"
  if not setup then return rec end
  rec.cid = setup.cid
  local comm = value_of(fx.rep_comm)
  if comm then bput(S.comm, comm, { setup = setup, side = "server" }) end
  if v.errno == 0 and v.queue_depth > 0 then
    local d = setup.dom
    set_queue_depth(d, v.queue_depth, v.max_hdr_size)
    local server_qpn = value_of(fx.rep_qpn)
    if server_qpn then
      stream_of(src .. "/" .. server_qpn).conn = { dom = d, dir = "c2s", cid = setup.cid }
    end
    if setup.client_qpn then
      stream_of(setup.client .. "/" .. setup.client_qpn).conn = { dom = d, dir = "s2c", cid = setup.cid }
    end
  end
  return rec
end

-- Every REJ of an RTRS connection attempt, whatever its reason and sender, with
-- or without RTRS data (a REJ with RTRS data is one even when its REQ is missing).
local function first_pass_rej(tvb, rec, setup, src)
  local v = READ.conn_rsp(tvb, 0)
  local rtrs_data = v and v.magic == C.RTRS_MAGIC
  local side
  side, setup = reject_sender(rec, setup, src)
  if not (rtrs_data or setup) then return nil end
  rec.reject, rec.side, rec.reason = true, side, value_of(fx.rej_reason)
  rec.cid = setup and setup.cid
  if rtrs_data then rec.msg = "conn_rsp" end
  return rec
end

local function first_pass_cm(tvb, pinfo, attr_fi)
  local attr = attr_fi.value
  local tidv = value_of(fx.tid)
  local tid = tidv and tostring(tidv) or "?"
  local src, dst = addresses()
  local rec = { attr = attr }
  if attr == CM.REQ then return first_pass_req(tvb, rec, tid, src, dst) end
  if attr == CM.REP then return first_pass_rep(tvb, rec, bget(S.cm, tid), src) end
  if attr == CM.REJ then return first_pass_rej(tvb, rec, bget(S.cm, tid), src) end
  -- RTU, DREQ, DREP of a connection whose REQ/REP carried RTRS data
  local field = (attr == CM.RTU and fx.rtu_comm) or (attr == CM.DREQ and fx.dreq_comm)
                or (attr == CM.DREP and fx.drep_comm)
  local known = field and bget(S.comm, value_of(field) or -1)
  if not known then return nil end
  rec.cm_only, rec.cid = true, known.setup.cid
  return rec
end

local function reject_text(rec, v)
  local parts = { "RTRS CONN_REJ" }
  if rec.cid then parts[#parts + 1] = string.format("cid %d", rec.cid) end
  if v then parts[#parts + 1] = errno_text(v.errno) end
  if rec.reason then
    parts[#parts + 1] = string.format("reason %d (%s)", rec.reason,
                                      VS.cm_rej_reasons[rec.reason] or "unknown")
  end
  if rec.side then parts[#parts + 1] = "from " .. rec.side end
  return table.concat(parts, " ")
end

local function render_reject(t, rec, v)
  if rec.reason then t:add(F.cm_rej_reason, rec.reason):set_generated() end
  if rec.side then t:add(F.cm_sender, rec.side):set_generated() end
  local info = reject_text(rec, v)
  t:add_proto_expert_info(EF.cm_reject, "RTRS connection rejected: " .. info:sub(#"RTRS CONN_REJ " + 1))
  return info
end

local function render_cm(tvb, pinfo, tree, rec)
  local t = tree:add(P_RTRS, tvb())
  local info
  if rec.cid then t:add(F.cid, rec.cid):set_generated() end
  if rec.cm_only then
    info = string.format("RTRS CM %s cid %d", short_name(CM_NAMES, rec.attr, ""), rec.cid)
  elseif rec.msg then
    local v = DISSECT[rec.msg](tvb, pinfo, t, 0)
    if rec.bad_magic then
      t:add_proto_expert_info(EF.bad_magic, string.format("RTRS magic 0x%04x", v.magic))
    elseif bit.rshift(v.version, 8) ~= C.RTRS_PROTO_VER_MAJOR then
      t:add_proto_expert_info(EF.bad_magic, string.format("RTRS protocol version 0x%04x", v.version))
    end
    if rec.msg == "conn_req" then
      info = string.format("RTRS CONN_REQ%s cid %d/%d recon_cnt %d first_conn %d",
                           rec.bad_magic and string.format(" (bad magic 0x%04x)", v.magic) or "",
                           v.cid, v.cid_num, v.recon_cnt, v.first_conn)
    elseif rec.reject then
      info = render_reject(t, rec, v)
    elseif v.errno ~= 0 then
      info = "RTRS CONN_RSP " .. errno_text(v.errno)
      t:add_proto_expert_info(EF.cm_reject, "RTRS connection refused: " .. errno_text(v.errno))
    else
      info = string.format("RTRS CONN_RSP queue_depth %d max_io_size %d errno 0",
                           v.queue_depth, v.max_io_size)
    end
  else
    info = render_reject(t, rec, nil)
  end
  local info_col = info_column(pinfo)
  if not info_col then return end
  pinfo.cols.protocol:set("RTRS")
  info_col:set(info)
end

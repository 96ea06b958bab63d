-- classify.lua: what a message is, from its opcode, immediate and content.
-- docs/PROTOCOL.md#which-operation-carries-what, docs/PROTOCOL.md#rtrs-without-a-handshake

-- == first pass: build the frame record of an IB payload ==
--
-- The analysis of a packet works on a context (tvb, opcode, stream, connection,
-- addresses, payload or reassembled message); the frame record keeps only what
-- rendering and the links need, so a capture of small frames costs little.
-- Records: kind; conn (its domain and cid) or dom; number and time on requests
-- and responses; the immediate where there is one.

-- A reassembled message keeps only its tail from m.base on (the user header
-- and trailer of a WRITE end the message); single packets have base 0.
local function message_tvb(tvb, m)
  if m.reasm then return ByteArray.new(m.reasm, true):tvb("Reassembled RTRS message") end
  if m.len == tvb:len() then return tvb end
  return tvb(0, m.len):tvb()
end

local function domain_of(ctx, create)
  if ctx.conn then return ctx.conn.dom end
  return address_domain(ctx.src, ctx.dst, create)
end

-- The connection of a claimed request/response: learnt from CM, or now from content.
local function claim(ctx, rec, d, dir)
  if not ctx.st.conn then ctx.st.conn = { dom = d, dir = dir } end
  rec.conn = ctx.st.conn
  if rec.conn.dom ~= d then rec.dom = d end
end

local function classify_request(ctx, rec)
  local base = ctx.base
  local mtvb = ctx.len > base and not ctx.data_only and message_tvb(ctx.tvb, ctx) or nil
  local req = nil
  if mtvb then
    if not ctx.partial then req = classify_read(mtvb, ctx.len, base) end
    if not req then
      req = classify_write(mtvb, ctx.len, base, ctx.partial)
      if ctx.partial and req then req.chunk_off = nil end
    end
  end
  if not req and not ctx.cut then
    if not ctx.conn then return false end
    rec.kind, rec.conn = "bad_request", ctx.conn
    return true
  end
  rec.kind, rec.number, rec.time, rec.payload = "request", ctx.number, ctx.time, ctx.payload
  rec.len, rec.reasm, rec.partial, rec.cut = ctx.len, ctx.reasm, ctx.partial, ctx.cut
  rec.path = ctx.src
  if base > 0 then rec.base = base end
  local d = domain_of(ctx, true)
  claim(ctx, rec, d, "c2s")
  if req then
    rec.trailer, rec.trailer_off, rec.usr_off, rec.usr_len = req.trailer, req.trailer_off,
                                                             req.usr_off, req.usr_len
    user_header(mtvb, rec)
    if req.desc then bput(d.reads, req.desc.key, rec) end
  else
    -- the snaplen cut the trailer: the immediate's offset tells the op once mem_bits is
    -- known (docs/PROTOCOL.md#header-only-captures)
    rec.header_only = true
  end
  feed(d, rec, req and req.chunk_off or nil)
  return true
end

-- A go-back-N retransmission from ``psn``: the packets sent from ``psn`` on were not
-- acknowledged when it went out, the answers among them included (the stream's last
-- LIMITS.answers answers are kept for this).
local function unacked_answers(st, psn, number)
  for _, e in ipairs(st.answers or {}) do
    if e.number < number and (e.psn - psn) % PSN_MOD < PSN_MOD / 2 then e.unacked = true end
  end
end

-- An RDMA WRITE WITH IMMEDIATE of no data to address 0 with rkey 0: how RTRS sends its
-- responses and heartbeats, a form that proves a stream without a handshake
-- (docs/PROTOCOL.md#rtrs-without-a-handshake; decode.bare_immediates in Python).
local function bare_immediate(ctx)
  if ctx.op ~= OP.RDMA_WRITE_ONLY_WITH_IMMEDIATE or ctx.len ~= 0 or ctx.cut then return false end
  local va, dmalen = value_of(fx.reth_va), value_of(fx.reth_len)
  return va ~= nil and tostring(va) == "0" and dmalen == 0 and ctx.rkey == 0
end

-- IO_RSP: a zero-length RDMA WRITE with immediate, or an rkey_rsp SEND with immediate.
-- On a stream without a handshake only a response in RTRS's form counts: a bare
-- immediate, or an rkey_rsp for the buf_id the immediate names.
local function classify_response(ctx, rec)
  rec.cut = ctx.cut
  local proven = false
  if not ctx.cut and ctx.len == SIZE.rkey_rsp and peek_rtrs_type(ctx.tvb, 0) == C.RTRS_MSG_RKEY_RSP then
    rec.send = "rkey_rsp"
    proven = READ.rkey_rsp(ctx.tvb, 0).buf_id == bit.band(ctx.payload, C.MSG_ID_MASK)
  end
  if not (ctx.conn or proven or bare_immediate(ctx)) then return false end
  local d = domain_of(ctx, true)
  rec.kind, rec.number, rec.time = "response", ctx.number, ctx.time
  rec.msg_id = bit.band(ctx.payload, C.MSG_ID_MASK)
  rec.psn = ctx.psn
  local answers = ctx.st.answers or {}
  ctx.st.answers = answers
  answers[#answers + 1] = rec
  if #answers > LIMITS.answers then table.remove(answers, 1) end
  claim(ctx, rec, d, "s2c")
  feed(d, rec)
  return true
end

local function classify_with_imm(ctx, rec)
  local kind = bit.rshift(rec.imm, C.IMM_TYPE_SHIFT)
  ctx.payload = bit.band(rec.imm, C.IMM_PAYLOAD_MASK)
  if kind == C.RTRS_IO_REQ_IMM then
    if ctx.op ~= OP.RDMA_WRITE_ONLY_WITH_IMMEDIATE and ctx.op ~= OP.RDMA_WRITE_LAST_WITH_IMMEDIATE then
      rec.conn = ctx.conn
      return ctx.conn ~= nil
    end
    return classify_request(ctx, rec)
  elseif kind == C.RTRS_IO_RSP_IMM or kind == C.RTRS_IO_RSP_W_INV_IMM then
    return classify_response(ctx, rec)
  elseif kind == C.RTRS_HB_MSG_IMM or kind == C.RTRS_HB_ACK_IMM then
    if not ctx.conn and (ctx.payload ~= 0 or not bare_immediate(ctx)) then return false end
    rec.kind, rec.conn = "heartbeat", ctx.conn
    if not ctx.conn then rec.dom = domain_of(ctx, true) end
    return true
  end
  if not ctx.conn then return false end
  rec.kind, rec.conn = "unknown_imm", ctx.conn
  return true
end

local function classify_send(ctx, rec)
  if ctx.cut and ctx.conn then     -- what it held is unknown
    rec.kind, rec.conn, rec.cut, rec.len = "cut_send", ctx.conn, true, ctx.len
    return true
  end
  if ctx.data_only or ctx.partial or ctx.base > 0 then return false end
  local mtvb = message_tvb(ctx.tvb, ctx)
  local name = RTRS_SEND_BY_TYPE[peek_rtrs_type(mtvb, 0)]
  if not name or ctx.len < SIZE[name] then return false end
  local expected = SIZE[name]
  local v = READ[name](mtvb, 0)
  if LIST[name] then expected = expected + SIZE[LIST[name].element] * v[LIST[name].count] end
  if ctx.len ~= expected then return false end
  if name == "info_req" and not ctx.conn and v.pathname == "" then return false end
  rec.kind, rec.send, rec.len, rec.reasm = "send", name, ctx.len, ctx.reasm
  local dir = (name == "info_req" and "c2s") or (name == "info_rsp" and "s2c") or nil
  if dir or ctx.conn then
    claim(ctx, rec, domain_of(ctx, true), dir)
  else
    rec.dom = domain_of(ctx, true)
  end
  return true
end

local function read_request_of(ctx, rkey)
  local d = domain_of(ctx, false)
  return d, d and rkey and bget(d.reads, rkey)
end

local function classify_read_data(ctx, rec)
  local d, req = read_request_of(ctx, ctx.rkey)
  if not (ctx.conn or req) then return false end
  rec.kind, rec.len, rec.conn = "read_data", ctx.len, ctx.conn
  if not ctx.conn then rec.dom = d end
  if req then rec.data_for = req.number end
  rec.cut = ctx.cut
  if not ctx.fragments and not ctx.cut and ctx.len >= 2 then
    local name = RNBD_BY_TYPE[peek_rnbd_type(ctx.tvb, 0)]
    if name and PROTO_OF[name] == "rnbd" and (name == "sess_info_rsp" or name == "open_rsp")
        and ctx.len == SIZE[name] then
      rec.reply = name
    end
  end
  return true
end

local function classify_invalidate(ctx, rec)
  local ieth = fx.ieth()
  local rkey = ieth and ieth.range:uint() or nil
  local d, req = read_request_of(ctx, rkey)
  if not (ctx.conn or req) then return false end
  rec.kind, rec.rkey, rec.conn = "invalidate", rkey, ctx.conn
  if not ctx.conn then rec.dom = d end
  if req then rec.data_for = req.number end
  return true
end

local function classify(ctx, rec)
  local op = ctx.op
  if rec.imm ~= nil then return classify_with_imm(ctx, rec) end
  if op == OP.SEND_ONLY or op == OP.SEND_LAST then return classify_send(ctx, rec) end
  if op == OP.RDMA_WRITE_ONLY or op == OP.RDMA_WRITE_LAST then return classify_read_data(ctx, rec) end
  if op == OP.SEND_ONLY_WITH_INVALIDATE or op == OP.SEND_LAST_WITH_INVALIDATE then
    return classify_invalidate(ctx, rec)
  end
  rec.kind, rec.conn = "other", ctx.conn
  return ctx.conn ~= nil
end

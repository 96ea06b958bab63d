-- reassembly.lua: multi-packet messages per QP by PSN.
-- docs/PROTOCOL.md#psn-sequence-and-retransmissions

-- Append a packet's payload to a message being reassembled.  Bytes before
-- rx.keep_from are counted, not kept; a message whose start is not in the
-- capture (rx.keep_last) keeps a rolling tail of that many bytes.  A packet the
-- snaplen cut (cut: bytes it lost) is counted; the tail starts afresh behind it.
local function rx_add(rx, tvb, len, cut)
  if cut then
    rx.cut = true
    if rx.parts then rx.parts, rx.head, rx.last, rx.kept = {}, 1, 0, 0 end
    rx.total = rx.total + len
    rx.base = rx.total
    return
  end
  if rx.parts and len > 0 then
    if rx.keep_from and rx.total + len <= rx.keep_from then
      rx.base = rx.total + len
    else
      local part = tvb:raw(0, len)
      rx.last = rx.last + 1
      rx.parts[rx.last] = part
      rx.kept = rx.kept + len
      while rx.keep_last and rx.kept - #rx.parts[rx.head] >= rx.keep_last do
        local size = #rx.parts[rx.head]
        rx.parts[rx.head] = nil
        rx.head, rx.kept, rx.base = rx.head + 1, rx.kept - size, rx.base + size
      end
    end
  end
  rx.total = rx.total + len
end

local function new_rx(psn)
  return { psn = psn, frames = {}, total = 0, base = 0, parts = {}, head = 1, last = 0, kept = 0 }
end

local function keep_bytes(conn)
  return conn and conn.dom.max_hdr or C.DEFAULT_MAX_HDR_SIZE
end

local MIDDLE_OR_LAST = {
  [OP.SEND_MIDDLE] = "middle", [OP.RDMA_WRITE_MIDDLE] = "middle", [OP.SEND_LAST] = "last",
  [OP.RDMA_WRITE_LAST] = "last", [OP.RDMA_WRITE_LAST_WITH_IMMEDIATE] = "last",
  [OP.SEND_LAST_WITH_IMMEDIATE] = "last",
}

-- Multi-packet SEND / RDMA WRITE per QP by PSN.  Returns true when the packet
-- ends a message (ctx then describes the message) or is a single packet, false
-- when it is a fragment (ctx.rx: the message it joined, if any).
local function reassemble(ctx, psn, first_packet)
  local op, n, tvb = ctx.op, ctx.number, ctx.tvb
  ctx.rx = nil
  if op == OP.SEND_FIRST or op == OP.RDMA_WRITE_FIRST then
    local rx = new_rx(psn)
    rx.rkey = value_of(fx.reth_rkey)
    if op == OP.RDMA_WRITE_FIRST then
      if ctx.conn and ctx.conn.dir == "s2c" then
        rx.parts = nil  -- READ data towards the client is not decoded: count it, keep no bytes
      else
        -- a request: only its last max_hdr_size bytes (user header + trailer) matter
        local dmalen = value_of(fx.reth_len)
        if dmalen then rx.keep_from = dmalen - keep_bytes(ctx.conn) end
      end
    end
    rx.frames[1] = n
    rx_add(rx, tvb, ctx.len, ctx.cut)
    bput(S.rx, ctx.qkey, rx)
    ctx.rx = rx
    return false
  end
  local where = MIDDLE_OR_LAST[op]
  if not where then return true end
  local rx = bget(S.rx, ctx.qkey)
  if not rx and first_packet then
    -- the capture starts inside this message: what follows is its tail
    rx = new_rx((psn - 1) % PSN_MOD)
    rx.partial, rx.keep_last = true, keep_bytes(ctx.conn)
    if ctx.conn and ctx.conn.dir == "s2c" then rx.parts = nil end
    bput(S.rx, ctx.qkey, rx)
  end
  if not rx or psn ~= (rx.psn + 1) % PSN_MOD or rx.total + ctx.len > LIMITS.message_bytes then
    bdel(S.rx, ctx.qkey)
    return false
  end
  rx.psn = psn
  rx.frames[#rx.frames + 1] = n
  rx_add(rx, tvb, ctx.len, ctx.cut)
  if where == "middle" then
    ctx.rx = rx
    return false
  end
  bdel(S.rx, ctx.qkey)
  ctx.reasm = rx.parts and table.concat(rx.parts, "", rx.head, rx.last) or nil
  ctx.len, ctx.base, ctx.data_only, ctx.partial = rx.total, rx.base, rx.parts == nil, rx.partial
  ctx.cut = rx.cut
  ctx.fragments, ctx.rkey = rx.frames, rx.rkey
  return true
end

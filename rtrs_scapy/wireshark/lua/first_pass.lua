-- first_pass.lua: the frame record of an IB payload, written once per frame.
-- docs/PROTOCOL.md#psn-sequence-and-retransmissions

-- The context of the packet being analysed: one table, refilled per packet
-- (a fresh one per packet was most of the per-frame garbage).
local CTX = {}

-- The plain fragments of one message (no immediate, no PSN gap, not cut) share one
-- record: they differ only by the frame that ends them, their message's.  A table per
-- frame would be marked again by every collector cycle (reset.lua).
local function shared_fragment(rx, conn)
  local rec = rx.fragment
  if not (rec and rec.conn == conn) then
    rec = { kind = "fragment", conn = conn }
    rx.fragment = rec
  end
  return rec
end

-- bth: the frame's BTH (FieldInfo); cut: nil for a payload the InfiniBand dissector handed
-- over, else { len = its length on the wire, lost = the bytes the snaplen cut of it } (tvb
-- then holds what was captured).
local function first_pass_payload(tvb, pinfo, bth, cut)
  local op, pad, dqp, psn = bth_fields(bth)
  if op == nil then return nil end
  local src, dst = addresses()
  local qkey = dst .. "/" .. dqp
  local st = stream_of(qkey)
  local ctx = CTX
  ctx.tvb, ctx.op, ctx.st, ctx.conn, ctx.src, ctx.dst, ctx.qkey = tvb, op, st, st.conn, src, dst, qkey
  ctx.number, ctx.time, ctx.len, ctx.base = pinfo.number, pinfo.abs_ts, math.max(tvb:len() - pad, 0), 0
  ctx.reasm, ctx.data_only, ctx.partial, ctx.fragments, ctx.rkey, ctx.payload = nil, nil, nil, nil, nil, nil
  ctx.cut = nil
  if cut then
    ctx.len = cut.len
    if cut.lost > 0 then ctx.base, ctx.cut = cut.len, cut.lost end
  end
  ctx.psn = psn
  local rec = {}
  local immfi = fx.immdt()
  if immfi and immfi.range:len() >= C.IMMDT_SIZE then rec.imm = immfi.range:uint() end

  -- go-back-N retransmissions repeat (QP, PSN): show them as such, analyse once
  -- (docs/PROTOCOL.md#psn-sequence-and-retransmissions)
  local orig = st.psns[psn] or st.old_psns[psn]
  local last = st.last_psn
  local delta = last and (psn - last) % PSN_MOD
  if orig or (delta and (delta == 0 or delta >= PSN_MOD / 2)) then
    if not (ctx.conn or (orig and S.frames[orig])) then return nil end
    unacked_answers(st, psn, pinfo.number)
    return { kind = "retransmission", retrans_of = orig, conn = ctx.conn }
  end
  note_psn(st, psn, pinfo.number)
  if delta and delta > 1 then rec.psn_gap = last end
  st.last_psn = psn

  if not reassemble(ctx, psn, last == nil) then
    if not ctx.conn then return nil end
    if ctx.rx and not cut and rec.imm == nil and rec.psn_gap == nil then
      return shared_fragment(ctx.rx, ctx.conn)
    end
    rec.kind, rec.conn = "fragment", ctx.conn
    return rec
  end
  if op == OP.RDMA_WRITE_ONLY or op == OP.RDMA_WRITE_ONLY_WITH_IMMEDIATE then
    ctx.rkey = value_of(fx.reth_rkey)
  end
  if not classify(ctx, rec) then return nil end
  if ctx.fragments then
    for _, n in ipairs(ctx.fragments) do
      if n ~= pinfo.number then
        local frag = S.frames[n] or { kind = "fragment" }
        frag.last = pinfo.number
        S.frames[n] = frag
      end
    end
  end
  return rec
end

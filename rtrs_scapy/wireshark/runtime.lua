-- runtime.lua: the hand-written, stateful half of the RTRS/RNBD dissector.
--
-- Inlined into wireshark/rtrs.lua by rtrs_scapy.wireshark.generate.  It uses the
-- generated locals (P_RTRS, P_RNBD, P_LIMITS, C, QD, LIMITS, OP, CM, VS, F, EF,
-- SIZE, LIST, READ, DISSECT, RTRS_SEND_BY_TYPE, RNBD_BY_TYPE, peek_*) and holds
-- no message layout: every offset and size comes from the generated part.
--
-- State scopes: pairing domain (a session named by its handshake, or the path
-- of an address pair without one: queue depth, requests in flight keyed by
-- buf_id, READ requests keyed by rkey), QP stream (S.streams, keyed by the
-- destination address and QP: PSNs, the connection learnt from CM or content),
-- frame (S.frames, keyed by pinfo.number).  Every table that grows with the
-- capture is bounded (LIMITS).  State is written once per frame, on the first
-- pass that shows the frame's IB fields (see "entry points"); later passes
-- render the stored frame record.  Proto.init resets.

local fx = {
  opcode = Field.new("infiniband.bth.opcode"),
  destqp = Field.new("infiniband.bth.destqp"),
  psn = Field.new("infiniband.bth.psn"),
  padcnt = Field.new("infiniband.bth.padcnt"),
  reth_va = Field.new("infiniband.reth.va"),
  reth_rkey = Field.new("infiniband.reth.r_key"),
  reth_len = Field.new("infiniband.reth.dmalen"),
  immdt = Field.new("infiniband.immdt"),
  ieth = Field.new("infiniband.ieth"),
  attr = Field.new("infiniband.mad.attributeid"),
  tid = Field.new("infiniband.mad.transactionid"),
  req_qpn = Field.new("infiniband.cm.req.localqpn"),
  rep_qpn = Field.new("infiniband.cm.rep.localqpn"),
  rej_reason = Field.new("infiniband.cm.rej.reason"),
  rej_local_comm = Field.new("infiniband.cm.rej.localcommid"),
  rej_remote_comm = Field.new("infiniband.cm.rej.remotecommid"),
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
  udp_len = Field.new("udp.length"),
  grh_paylen = Field.new("infiniband.grh.paylen"),
}

local PSN_MOD = C.PSN_MOD        -- docs/PROTOCOL.md#base-transport-header
local floor = math.floor

-- BEGIN qdepth rule -----------------------------------------------------------
-- The queue depth rule of rtrs_scapy/analysis/qdepth.py (docs/PROTOCOL.md#queue-depth-inference),
-- step for step.  Plain Lua 5.2 with the generated QD table only, no Wireshark
-- API: tests/test_lua_qdepth.py runs this block under lua5.2 on the vectors of
-- tests/vectors/qdepth.json, the same the Python rule is held to.
local QDEPTH = {}
do
  local floor = math.floor

  local function decide(r, bits, source)
    r.mem_bits, r.source, r.decided_at = bits, source, r.events - 1
    r.alive, r.pending, r.score = { bits }, nil, nil
  end

  -- Decide now with what was seen: the best score, or on a tie the candidate
  -- nearest to the kernel default (the larger one when two are as near).
  local function finish(r)
    if r.mem_bits then return end
    local top = -1
    for _, b in ipairs(r.alive) do
      if r.score[b] > top then top = r.score[b] end
    end
    local tied = {}
    for _, b in ipairs(r.alive) do
      if r.score[b] == top then tied[#tied + 1] = b end
    end
    if #tied == 1 then return decide(r, tied[1], "inferred") end
    local best
    for _, b in ipairs(tied) do
      local d, dbest = math.abs(b - QD.DEFAULT_MEM_BITS), best and math.abs(best - QD.DEFAULT_MEM_BITS)
      if not best or d < dbest or (d == dbest and b > best) then best = b end
    end
    decide(r, best, "assumed")
  end

  local function next_event(r)
    r.events = r.events + 1
    if #r.alive == 1 then
      decide(r, r.alive[1], "inferred")
    elseif r.events >= QD.DECIDE_AFTER then
      finish(r)
    end
  end

  -- A request's 28-bit immediate payload and its offset (nil when the start of
  -- the message is not in the capture).  False when the offset contradicts
  -- every candidate still alive (the request then narrows nothing).
  local function request(r, payload, offset)
    if r.mem_bits then return true end
    local consistent = true
    if offset ~= nil then
      local keep = {}
      for _, b in ipairs(r.alive) do
        if payload % 2 ^ b == offset then keep[#keep + 1] = b end
      end
      consistent = #keep > 0
      if consistent and #keep < #r.alive then
        local kept = {}
        for _, b in ipairs(keep) do kept[b] = true end
        for _, b in ipairs(r.alive) do
          if not kept[b] then r.pending[b] = nil end
        end
        r.alive = keep
      end
    end
    for _, b in ipairs(r.alive) do
      r.pending[b][floor(payload / 2 ^ b)] = true
    end
    next_event(r)
    return consistent
  end

  local function response(r, msg_id)
    if r.mem_bits then return end
    local leader, behind = 0, false
    for _, b in ipairs(r.alive) do
      local pending = r.pending[b]
      if pending[msg_id] then
        pending[msg_id] = nil
        r.score[b] = r.score[b] + 1
      end
      if r.score[b] > leader then leader = r.score[b] end
    end
    for _, b in ipairs(r.alive) do
      if leader - r.score[b] >= QD.PRUNE_MARGIN then behind = true end
    end
    if behind then
      local keep = {}
      for _, b in ipairs(r.alive) do
        if leader - r.score[b] < QD.PRUNE_MARGIN then keep[#keep + 1] = b else r.pending[b] = nil end
      end
      r.alive = keep
    end
    next_event(r)
  end

  local function new()
    local r = { alive = {}, pending = {}, score = {}, events = 0 }
    for b = QD.MIN_MEM_BITS, QD.MAX_MEM_BITS do
      r.alive[#r.alive + 1] = b
      r.pending[b] = {}
      r.score[b] = 0
    end
    return r
  end

  -- pair_events: requests ({payload = …}) and responses ({msg_id = …}) in
  -- capture order; a response answers the latest request in flight with its
  -- buf_id.  Calls link(request, response) per pair; returns what is in flight.
  local function pair(events, bits, pending, link)
    local div = 2 ^ bits
    for i = 1, #events do
      local e = events[i]
      if e.msg_id == nil then
        pending[floor(e.payload / div)] = e
      else
        local q = pending[e.msg_id]
        if q then
          pending[e.msg_id] = nil
          link(q, e)
        end
      end
    end
    return pending
  end

  local function queue_depth_of(bits)
    return math.min(2 ^ (QD.IMM_TYPE_SHIFT - bits), QD.MAX_SESS_QUEUE_DEPTH)
  end

  QDEPTH.new, QDEPTH.request, QDEPTH.response, QDEPTH.finish = new, request, response, finish
  QDEPTH.pair, QDEPTH.queue_depth_of = pair, queue_depth_of
end
-- END qdepth rule -------------------------------------------------------------

local S = {}

-- == bounded tables ==
-- Two generations: new and touched keys live in `young`; when it holds half the
-- limit, `old` (whatever was not touched for a whole generation) is dropped,
-- counted and noted on the frame being analysed (one note per half a limit of
-- evictions).  get/put/del are O(1), the table never holds more than `limit`.

local function note_eviction(m, count)
  m.evicted = m.evicted + count
  local notes = S.limit_notes[S.current]
  if not notes then
    notes = {}
    S.limit_notes[S.current] = notes
  end
  notes[#notes + 1] = { label = m.label, limit = m.limit, evicted = m.evicted }
end

local function bounded(label, limit, on_evict)
  return { label = label, limit = limit, half = math.max(1, floor(limit / 2)), young = {}, old = {},
           n = 0, n_old = 0, evicted = 0, on_evict = on_evict }
end

local function rotate(m)
  if m.n_old > 0 then
    if m.on_evict then
      for _, v in pairs(m.old) do m.on_evict(v) end
    end
    note_eviction(m, m.n_old)
  end
  m.old, m.n_old, m.young, m.n = m.young, m.n, {}, 0
end

local function bput(m, k, v)
  if m.young[k] == nil then
    if m.old[k] ~= nil then
      m.old[k] = nil
      m.n_old = m.n_old - 1
    end
    if m.n >= m.half then rotate(m) end
    m.n = m.n + 1
  end
  m.young[k] = v
end

local function bget(m, k)
  local v = m.young[k]
  if v ~= nil then return v end
  v = m.old[k]
  if v ~= nil then bput(m, k, v) end
  return v
end

local function bdel(m, k)
  if m.young[k] ~= nil then
    m.young[k] = nil
    m.n = m.n - 1
  elseif m.old[k] ~= nil then
    m.old[k] = nil
    m.n_old = m.n_old - 1
  end
end

-- == pairing domains and queue depth ==

local function link(q, e)
  q.response, e.request = e, q
end

-- The rule decided: pair what was logged under the winner, then pair directly.
local function settle(d)
  local r = d.rule
  d.mem_bits, d.source, d.qd = r.mem_bits, r.source, QDEPTH.queue_depth_of(r.mem_bits)
  QDEPTH.pair(d.log, d.mem_bits, d.pending, link)
  d.rule, d.log = nil, nil
  S.undecided[d] = nil
end

local function finish_domain(d)
  if d.rule then
    QDEPTH.finish(d.rule)
    settle(d)
  end
end

local function new_domain(key, infer)
  local d = { key = key, pending = {}, reads = bounded("READ requests by rkey", LIMITS.reads) }
  if infer then
    d.rule, d.log = QDEPTH.new(), {}
    S.undecided[d] = true
  end
  return d
end

-- A session named by its handshake: buf_ids are unique session-wide.
local function session_domain(paths_uuid)
  local key = "s:" .. paths_uuid
  local d = bget(S.domains, key)
  if not d then
    d = new_domain(key, false)
    d.answered = {}     -- buf_id -> its last answered request (failovers)
    -- its requests, for the copies whose original never reached the wire
    d.requests = bounded("requests kept for the failover order rule", LIMITS.failover_log)
    bput(S.domains, key, d)
  end
  return d
end

-- A path without a handshake (client and server address): its own inference.
local function address_domain(a, b, create)
  local key = (a < b) and ("a:" .. a .. "|" .. b) or ("a:" .. b .. "|" .. a)
  local d = bget(S.domains, key)
  if not d and create then
    d = new_domain(key, true)
    bput(S.domains, key, d)
  end
  return d
end

local function bitlen(x)
  local n = 0
  while x > 0 do
    x = floor(x / 2)
    n = n + 1
  end
  return n
end

local function set_queue_depth(d, qd, max_hdr)
  if qd and qd > 0 and not d.mem_bits then
    d.qd, d.mem_bits, d.source = qd, C.IMM_TYPE_SHIFT - bitlen(qd - 1), "handshake"
  end
  if max_hdr and max_hdr > 0 then d.max_hdr = max_hdr end
end

-- == failovers (docs/PROTOCOL.md#failover-from-the-wire) ==
-- In a session named by its handshake (buf_ids are session-wide), a request of one
-- path that takes the buf_id of another path's request is that request failed over:
-- still unanswered (no_response), or answered with the same RNBD IO header repeated
-- (response_not_delivered) when the server went back to a PSN at or before the
-- answer's (go-back-N: it was not acknowledged in time; the retransmissions come after
-- the copy, so this is decided when the frames are shown, after the first pass).  A request of the same path, or
-- with another header, taking the buf_id ends the candidate.

local function same_io(a, b)
  local u, v = a.usr, b.usr
  return a.usr_name == "io" and b.usr_name == "io" and u ~= nil and v ~= nil
    and a.trailer == b.trailer and u.device_id == v.device_id and u.sector == v.sector
    and u.bi_size == v.bi_size and u.rw == v.rw
end

local function note_failover(d, rec)
  local buf = floor(rec.payload / 2 ^ d.mem_bits)
  rec.buf = buf
  bput(d.requests, rec.number, rec)
  local q = d.pending[buf]
  if q and q.path ~= rec.path then
    rec.failover_of, q.no_response = q, rec
  end
  q = d.answered[buf]
  d.answered[buf] = nil
  if q and q.path ~= rec.path and same_io(q, rec) then
    rec.resends, q.resent_in = q, rec
  end
end

-- The request a copy re-sends, and the copy of a request, as far as the wire shows.
local function failover_of(rec)
  if rec.failover_of then return rec.failover_of end
  local q = rec.resends
  if q and q.response and q.response.unacked then return q end
  return nil
end

local function resent_in(rec)
  local copy = rec.resent_in
  if copy and rec.response and rec.response.unacked then return copy end
  return nil
end

-- The copies whose original never reached the wire (kind original_not_on_wire), by the
-- kernel's order of one failure's copies (analysis/failover.py): within a run of proven
-- copies of one failed path (gaps up to 1 s), a request of another path of the session
-- sent after the failed path's last request before the run and before the run's last
-- copy, its buf_id above those of the proven copies before it and below those after it
-- and none of theirs, the last of its buf_id.  Known once the first pass is complete.
local function fits(run, rec)
  for _, p in ipairs(run) do
    if p.number == rec.number or p.buf == rec.buf then return false end
    if (p.number < rec.number and p.buf >= rec.buf)
        or (p.number > rec.number and p.buf <= rec.buf) then return false end
  end
  return true
end

local function infer_unseen(d)
  d.unseen_done = true
  local reqs = {}
  for _, m in ipairs({ d.requests.old, d.requests.young }) do
    for _, r in pairs(m) do reqs[#reqs + 1] = r end
  end
  table.sort(reqs, function(a, b) return a.number < b.number end)
  local runs = {}
  for _, r in ipairs(reqs) do
    local q = failover_of(r)
    if q then
      local run = runs[#runs]
      local last = run and run[#run]
      if last and last.failed == q.path and r.time - last.time <= 1.0 then
        run[#run + 1] = r
      else
        runs[#runs + 1] = { r }
      end
      r.failed = q.path
    end
  end
  for _, run in ipairs(runs) do
    local ascending = true
    for k = 2, #run do
      if run[k].buf < run[k - 1].buf then ascending = false end
    end
    if ascending then
      local failed, first, last, start = run[1].failed, run[1].number, run[#run].number, -1
      for _, r in ipairs(reqs) do
        if r.path == failed and r.number < first then start = r.number end
      end
      local chosen = {}
      for _, r in ipairs(reqs) do
        if r.number > start and r.number < last and r.path ~= failed and fits(run, r) then
          chosen[r.buf] = r
        end
      end
      for _, r in pairs(chosen) do r.unseen_from = failed end
    end
  end
end

-- The failed path of a copy whose original never reached the wire, or nil.
local function unseen_from(rec)
  local d = rec.dom or (rec.conn and rec.conn.dom)
  if not (S.finished and d and d.requests) then return nil end
  if not d.unseen_done then infer_unseen(d) end
  return rec.unseen_from
end

-- A request (with its offset, nil for a partial one) or response of a domain,
-- in capture order.
local function feed(d, rec, offset)
  if d.rule then
    d.log[#d.log + 1] = rec
    if rec.msg_id == nil then
      if not QDEPTH.request(d.rule, rec.payload, offset) then rec.offset_conflict = true end
    else
      QDEPTH.response(d.rule, rec.msg_id)
    end
    if d.rule.mem_bits then settle(d) end
  elseif d.mem_bits then
    if d.answered and rec.msg_id == nil then note_failover(d, rec) end
    QDEPTH.pair({ rec }, d.mem_bits, d.pending, link)
    if d.answered and rec.request then d.answered[rec.msg_id] = rec.request end
  end
end

-- End of the first pass: the domains still undecided decide with what they saw.
local function finish_all()
  S.finished = true
  for d in pairs(S.undecided) do finish_domain(d) end
end

-- Wireshark's Lua collector, at its default speed, falls behind the tree items
-- and field values each frame leaves behind (measured: about 2.5 KB per frame,
-- five times the frame records); a collector that works harder per allocation
-- and starts a cycle sooner keeps the peak near the live state
-- (load.pcap.gz: 448 MB -> 252 MB, 5 % more CPU).
local GC_STEPMUL, GC_PAUSE = 1000, 110

local function reset_state()
  collectgarbage("setstepmul", GC_STEPMUL)
  collectgarbage("setpause", GC_PAUSE)
  S.domains = bounded("sessions and paths", LIMITS.domains, finish_domain)
  S.undecided = {}   -- domains whose queue depth rule has not decided yet
  S.cm = bounded("CM transactions", LIMITS.cm)         -- transaction id -> setup
  S.comm = bounded("CM communication ids", LIMITS.cm)  -- comm id -> {setup, side}
  S.streams = bounded("QP streams", LIMITS.streams)    -- "dst addr/dest QP" -> stream
  S.rx = bounded("messages in reassembly", LIMITS.messages)  -- "dst addr/dest QP" -> message
  S.frames = {}      -- pinfo.number -> frame record, false once analysed and not RTRS
  S.limit_notes = {} -- pinfo.number -> evictions that frame caused
  S.current = 0      -- the frame being analysed
  S.finished = false
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

-- The innermost header's addresses: a switch mirror or an overlay wraps the frame in
-- outer IP headers (docs/PROTOCOL.md#switch-mirrors-and-overlays).
local function addresses()
  local src, dst
  for i = 1, #ADDRESS_FIELDS do
    local pair = ADDRESS_FIELDS[i]
    local srcs, dsts = { pair[1]() }, { pair[2]() }
    local s, d = srcs[#srcs], dsts[#dsts]
    if s and d and (not src or s.offset > src.offset) then src, dst = s, d end
  end
  if src then return tostring(src.value), tostring(dst.value) end
  return "?", "?"
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

-- A QP stream: PSN state and the connection it belongs to.
local function stream_of(qkey)
  local st = bget(S.streams, qkey)
  if not st then
    st = { psns = {}, old_psns = {}, npsn = 0 }
    bput(S.streams, qkey, st)
  end
  return st
end

-- (QP, PSN) -> first frame, for the last LIMITS.psns PSNs of the stream (two windows)
local function note_psn(st, psn, number)
  if st.npsn >= LIMITS.psns then
    st.old_psns, st.psns, st.npsn = st.psns, {}, 0
  end
  st.psns[psn] = number
  st.npsn = st.npsn + 1
end

local function learn(st, d, dir)
  if not st.conn then st.conn = { dom = d, dir = dir } end
end

-- == requests: trailer checks (docs/PROTOCOL.md#request-trailers) ==

-- READ: the trailer sits after the user header, with sg_cnt 1 or 0 descriptors, and
-- ends the message of len bytes; mtvb holds its bytes from base on (the trailer and its
-- descriptors must be among them, the user header need not).
local function classify_read(mtvb, len, base)
  local elem = LIST.rdma_read.element
  for _, n in ipairs({ 1, 0 }) do
    local size = SIZE.rdma_read + SIZE[elem] * n
    local usr_len, off = len - size, len - size - base
    if usr_len >= 0 and off >= 0 then
      local v = READ.rdma_read(mtvb, off)
      if v and v.type == C.RTRS_MSG_READ and v.usr_len == usr_len and v[LIST.rdma_read.count] == n then
        local data_len = 0
        if n == 1 then data_len = v.desc[1].len end
        return { trailer = "rdma_read", trailer_off = off, usr_off = off - usr_len, usr_len = usr_len,
                 chunk_off = data_len + usr_len, desc = v.desc[1] }
      end
    end
  end
  return nil
end

-- WRITE: data | user header | trailer, the trailer ends the message of len bytes; mtvb
-- holds them from base on.  usr_len fits the message, or, of a partial message (its
-- length unknown), stays below the largest header (docs/PROTOCOL.md#request-trailers);
-- the user header may start before the bytes kept (usr_off < 0: not decoded).
local function classify_write(mtvb, len, base, partial)
  local off = len - base - SIZE.rdma_write
  if off < 0 then return nil end
  local v = READ.rdma_write(mtvb, off)
  if not v or v.type ~= C.RTRS_MSG_WRITE then return nil end
  if partial then
    if v.usr_len >= C.DEFAULT_MAX_HDR_SIZE then return nil end
  elseif v.usr_len > len - SIZE.rdma_write then
    return nil
  end
  return { trailer = "rdma_write", trailer_off = off, usr_off = off - v.usr_len, usr_len = v.usr_len,
           chunk_off = len - SIZE.rdma_write }
end

local function user_header(mtvb, rec)
  if rec.usr_len < 2 or rec.usr_off < 0 then return end
  local name = RNBD_BY_TYPE[peek_rnbd_type(mtvb, rec.usr_off)]
  if not name then return end
  rec.usr_name = name
  if rec.usr_len >= SIZE[name] then
    rec.usr = READ[name](mtvb, rec.usr_off)
  end
end

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
-- when it is a fragment.
local function reassemble(ctx, psn, first_packet)
  local op, n, tvb = ctx.op, ctx.number, ctx.tvb
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
  if where == "middle" then return false end
  bdel(S.rx, ctx.qkey)
  ctx.reasm = rx.parts and table.concat(rx.parts, "", rx.head, rx.last) or nil
  ctx.len, ctx.base, ctx.data_only, ctx.partial = rx.total, rx.base, rx.parts == nil, rx.partial
  ctx.cut = rx.cut
  ctx.fragments, ctx.rkey = rx.frames, rx.rkey
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

-- The context of the packet being analysed: one table, refilled per packet
-- (a fresh one per packet was most of the per-frame garbage).
local CTX = {}

-- cut: nil for a payload the InfiniBand dissector handed over, else { len = its length on
-- the wire, lost = the bytes the snaplen cut of it } (tvb then holds what was captured).
local function first_pass_payload(tvb, pinfo, cut)
  local op = value_of(fx.opcode)
  local dqp = value_of(fx.destqp)
  if op == nil or dqp == nil then return nil end
  local psn = value_of(fx.psn) or 0
  local pad = value_of(fx.padcnt) or 0
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

-- == rendering (every pass, from the frame record) ==

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
  local fi = fx.immdt()
  if not fi or rec.imm == nil then return end
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
  pinfo.cols.protocol:set(proto)
  -- a cut frame: the InfiniBand dissector fenced its own note ("Invalid Packet Length")
  if rec.cut_frame then pinfo.cols.info:clear_fence() end
  pinfo.cols.info:set(info or info_of(rec))
end

-- == CM: REQ/REP/REJ private data, RTU/DREQ/DREP of RTRS connections ==

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

local function first_pass_cm(tvb, pinfo)
  local attr = value_of(fx.attr)
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
  pinfo.cols.protocol:set("RTRS")
  pinfo.cols.info:set(info)
end

-- == entry points ==
--
-- tshark -2 runs its first pass without a protocol tree unless a filter needs
-- one, and then no field extractor returns anything: a frame is analysed the
-- first time its IB fields are visible (S.frames[n] is set then), which is the
-- first pass in Wireshark and in one-pass tshark, the second pass in tshark -2.  Either way
-- each frame writes state once, in frame order, and is rendered from its record.
-- A frame rendered again after its analysis means the first pass is complete:
-- the queue depth rules still undecided then decide (end of the capture).

local function frame_record(tvb, pinfo, probe, analyse)
  local n = pinfo.number
  local rec = S.frames[n]
  if rec ~= nil then
    if pinfo.visited and not S.finished then finish_all() end
    return rec or nil
  end
  if value_of(probe) == nil then return nil end
  S.current = n
  rec = analyse(tvb, pinfo)
  S.frames[n] = rec or false
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

local DATA_OPS = {}
for _, code in pairs(OP) do DATA_OPS[code] = true end

local function header_end(field)
  local fi = field()
  if fi and fi.range then return fi.range:offset() + fi.range:len() end
  return 0
end

-- Where the IB payload of a frame the snaplen cut starts, its length on the wire (from the
-- innermost UDP length, or the GRH) and how much of it was captured (lost: the rest; 0
-- when only the ICRC was cut).
local function cut_payload_range(tvb)
  local start = math.max(header_end(fx.psn), header_end(fx.reth_len), header_end(fx.immdt),
                         header_end(fx.ieth))
  local ib_end
  local udp = { fx.udp_len() }
  local grh = fx.grh_paylen()
  if #udp > 0 and udp[#udp].range then
    ib_end = udp[#udp].range:offset() - 4 + udp[#udp].value
  elseif grh and grh.range then
    ib_end = grh.range:offset() - 4 + 40 + grh.value
  else
    return nil
  end
  local len = ib_end - C.ICRC_SIZE - (value_of(fx.padcnt) or 0) - start
  local visible = math.max(math.min(tvb:len(), start + len) - start, 0)
  if start <= 0 or len < 0 then return nil end
  return { start = start, len = len, visible = visible, lost = len - visible }
end

-- A frame the snaplen cut inside its payload: Wireshark's InfiniBand dissector hands
-- it to no heuristic, so it is analysed here, in frame order, from its headers
-- (docs/PROTOCOL.md#header-only-captures); a CM MAD is read whole or not at all.
local function cut_frame(tvb, pinfo, tree)
  if tvb:len() >= tvb:reported_len() then return end
  local known = S.frames[pinfo.number]
  if known ~= nil and not (known and known.cut_frame) then return end
  local op = value_of(fx.opcode)
  if op == nil or not DATA_OPS[op] or value_of(fx.attr) ~= nil then return end
  local where = cut_payload_range(tvb)
  if not where then return end
  local ptvb = where.visible > 0 and tvb(where.start, where.visible):tvb() or tvb
  local rec = frame_record(ptvb, pinfo, fx.opcode, function(t, p)
    local r = first_pass_payload(t, p, where)
    if r then r.cut_frame = true end
    return r
  end)
  if rec then render_payload(ptvb, pinfo, tree, rec) end
end

-- Evictions of state, on the frame whose analysis caused them (and, first, the frames
-- cut inside their payload).
local function limits_postdissector(tvb, pinfo, tree)
  cut_frame(tvb, pinfo, tree)
  local notes = S.limit_notes[pinfo.number]
  if not notes then return end
  local t = tree:add(P_LIMITS, tvb(0, 0))
  t:set_generated()
  for _, note in ipairs(notes) do
    local it = t:add(F.limit_table, note.label)
    it:set_generated()
    it:add(F.limit_evicted, note.evicted):set_generated()
    it:add_proto_expert_info(EF.limit, string.format(
      "%s: limit %d reached, %d evicted so far (the longest idle first)", note.label, note.limit,
      note.evicted))
  end
end

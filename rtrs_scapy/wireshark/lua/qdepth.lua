-- qdepth.lua: the queue depth rule.  docs/PROTOCOL.md#queue-depth-inference
--
-- The queue depth rule of rtrs_scapy/analysis/qdepth.py, step for step.  Plain
-- Lua 5.2 with the generated QD table only, no Wireshark API:
-- tests/test_lua_qdepth.py runs this file under lua5.2 on the vectors of
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

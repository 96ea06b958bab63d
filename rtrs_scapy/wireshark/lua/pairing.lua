-- pairing.lua: pairing domains, their queue depth, requests paired with responses.
-- docs/PROTOCOL.md#pairing-requests-and-responses

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

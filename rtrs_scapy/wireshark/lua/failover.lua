-- failover.lua: failovers seen on the wire.  docs/PROTOCOL.md#failover-from-the-wire

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

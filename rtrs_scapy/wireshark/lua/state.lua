-- state.lua: the plugin's state and its bounded tables (rtrs_scapy/spec/limits.py).
-- docs/PROTOCOL.md#analysis-rules
--
-- State scopes: pairing domain (a session named by its handshake, or the path
-- of an address pair without one: queue depth, requests in flight keyed by
-- buf_id, READ requests keyed by rkey), QP stream (S.streams, keyed by the
-- destination address and QP: PSNs, the connection learnt from CM or content),
-- frame (S.frames, keyed by pinfo.number).  Every table that grows with the
-- capture is bounded (LIMITS).  State is written once per frame, on the first
-- pass that shows the frame's IB fields (entry.lua); later passes
-- render the stored frame record.  Proto.init resets.

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

-- entry.lua: the dissector's entry points.  docs/PROTOCOL.md#analysis-rules
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
  local fi = probe()
  if fi == nil then return nil end
  S.current = n
  rec = analyse(tvb, pinfo, fi)
  S.frames[n] = rec or false
  return rec
end

local function heur_payload(tvb, pinfo, tree)
  local rec = frame_record(tvb, pinfo, fx.bth, first_pass_payload)
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

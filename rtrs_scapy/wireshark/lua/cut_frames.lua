-- cut_frames.lua: frames the snaplen cut inside their payload, and the state limits
-- postdissector.  docs/PROTOCOL.md#header-only-captures

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
local function cut_payload_range(tvb, pad)
  local start = math.max(header_end(fx.bth), header_end(fx.reth_len), header_end(fx.immdt),
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
  local len = ib_end - C.ICRC_SIZE - pad - start
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
  local bth = fx.bth()
  local op, pad = nil, nil
  if bth then op, pad = bth_fields(bth) end
  if op == nil or not DATA_OPS[op] or fx.attr() ~= nil then return end
  local where = cut_payload_range(tvb, pad)
  if not where then return end
  local ptvb = where.visible > 0 and tvb(where.start, where.visible):tvb() or tvb
  local rec = frame_record(ptvb, pinfo, fx.bth, function(t, p, fi)
    local r = first_pass_payload(t, p, fi, where)
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

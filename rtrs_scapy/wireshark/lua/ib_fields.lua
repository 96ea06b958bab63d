-- ib_fields.lua: the InfiniBand fields the rules read, and the innermost addresses.
-- docs/PROTOCOL.md#opcodes-and-extension-headers, docs/PROTOCOL.md#switch-mirrors-and-overlays

-- (the BTH is read whole, its fields by read_bth: a FieldInfo costs more than its bytes)
local fx = {
  bth = Field.new("infiniband.bth"),
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

local function value_of(field)
  local fi = field()
  if fi then return fi.value end
  return nil
end

-- opcode, padcount, dest QP and PSN of the frame's BTH (its FieldInfo)
local function bth_fields(fi)
  return read_bth(fi.range:raw())
end

local ADDRESS_FIELDS = { { fx.ip_src, fx.ip_dst }, { fx.ip6_src, fx.ip6_dst },
                         { fx.gid_src, fx.gid_dst }, { fx.lid_src, fx.lid_dst } }

-- The last of a field's occurrences, without a table per call (this runs per frame).
local function last(...)
  local n = select("#", ...)
  if n > 0 then return (select(n, ...)) end
  return nil
end

-- The innermost header's addresses: a switch mirror or an overlay wraps the frame in
-- outer IP headers (docs/PROTOCOL.md#switch-mirrors-and-overlays).
local function addresses()
  local src, dst
  for i = 1, #ADDRESS_FIELDS do
    local pair = ADDRESS_FIELDS[i]
    local s, d = last(pair[1]()), last(pair[2]())
    if s and d and (not src or s.offset > src.offset) then src, dst = s, d end
  end
  if src then return tostring(src.value), tostring(dst.value) end
  return "?", "?"
end

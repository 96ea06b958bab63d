-- streams.lua: QP streams and the PSNs they saw.
-- docs/PROTOCOL.md#psn-sequence-and-retransmissions

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

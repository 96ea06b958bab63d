-- reset.lua: the state of a new capture (Proto.init).  docs/PROTOCOL.md#analysis-rules

-- Wireshark's Lua collector, at its default speed, falls behind the tree items
-- and field values each frame leaves behind (measured: about 2.5 KB per frame,
-- five times the frame records); a collector that works harder per allocation
-- and starts a cycle sooner keeps the peak near the live state
-- (load.pcap.gz: 448 MB -> 252 MB).  It costs CPU: side by side, tshark -2 -Y frame with
-- the plugin on load.pcap.gz took 17 s of CPU at 479 MB with Lua's defaults (200, 200),
-- 23 s at 292 MB with these; the Lua garbage each frame leaves is what both cost.
-- Each cycle marks the whole live state again: cheaper settings bring the peak to twice
-- plain tshark's or beyond (load, failover, deep: 189, 200, 178 MB without the plugin).
-- The plain fragments of a message share one record (first_pass.lua): deep.pcap.gz's
-- live state 35 -> 25 MB, and the cycles that marked 53k fragment tables mark none.
-- Measured on a busy 2-core machine (user CPU s / peak MB; load, then failover): these
-- 25-30 / 292 and 36 / 334; (1000, 150) 20-26 / 335 and 35 / 391; on load, generational
-- (pause 150, majorinc 150) 16-17 / 600 and generational with Lua's defaults 16 / 700.
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

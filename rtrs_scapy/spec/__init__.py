"""What every implementation shares, as plain Python without Scapy: the kernel's
constants (``constants``), the RTRS immediate's encoding (``imm``) and the bounds
on the state the analyzer and the Wireshark plugin keep (``limits``).  The layers,
the layout IR, the engine, the analysis and the Lua generator all read them here.
"""

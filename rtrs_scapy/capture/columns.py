"""The packet table's columns: one row per frame, written by the locator (links.py)
and the header decoder (ib.py), read by the transport by these names only."""

(P_KIND, P_HDR, P_BTH, P_END, P_SRC_HI, P_SRC_LO, P_DST_HI, P_DST_LO, P_STATUS, P_OPCODE,
 P_QPN, P_PSN, P_START, P_STOP, P_IMM, P_IETH, P_RKEY, P_VA, P_DMALEN, P_SYNDROME,
 P_MIRROR, P_VIS, P_COLUMNS) = range(23)

"""The packet table's columns, one row per frame, written by the locator (links.py)
and the header decoder (ib.py), read by these names only.

They are two tables.  ``packets`` (P_*) holds what the transport reads of every
packet; ``extra`` (X_*) the rest: where the headers sit, the mirror that carried the
frame, and the RETH, which only a message's first packet has.  The read-ahead
thread writes both; the main thread's transport reads every row of ``packets`` from
the other core's writes, and it pays by the byte (docs/benchmarks.md).
"""

(P_KIND, P_SRC_HI, P_SRC_LO, P_DST_HI, P_DST_LO, P_STATUS, P_OPCODE, P_QPN, P_PSN,
 P_START, P_STOP, P_IMM, P_IETH, P_SYNDROME, P_VIS, P_COLUMNS) = range(16)
(X_HDR, X_BTH, X_END, X_MIRROR, X_VA, X_RKEY, X_DMALEN, X_COLUMNS) = range(8)

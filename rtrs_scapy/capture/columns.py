"""The packet table's columns, one row per frame, written by the locator (links.py)
and the header decoder (ib.py), read by these names only.

They are two tables.  ``packets`` (P_*) holds what the transport reads of a packet
as it goes; ``extra`` (X_*) the rest: where the headers sit and the mirror that
carried the frame (the decoder, the mirror counts and the single-frame tools read
them), and the source address, which the transport reads only where a packet opens a
stream, pairs one or makes an event, and the CM where a MAD comes.  The read-ahead
thread writes both; the main thread's transport reads every row of ``packets`` from
the other core's writes, and pays by the byte (docs/benchmarks.md).  (The RETH, read
at a message's first packet only, stays in ``packets``: a row of ``extra`` fetched at
every request and response cost more than the RETH's bytes in every row.)
"""

(P_KIND, P_DST_HI, P_DST_LO, P_STATUS, P_OPCODE, P_QPN, P_PSN, P_START, P_STOP, P_IMM,
 P_IETH, P_SYNDROME, P_VIS, P_VA, P_RKEY, P_DMALEN, P_COLUMNS) = range(17)
(X_HDR, X_BTH, X_END, X_MIRROR, X_SRC_HI, X_SRC_LO, X_COLUMNS) = range(7)

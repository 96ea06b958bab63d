"""What the crafter copies from the real Linux 6.1 / rdma_rxe captures: sides,
timers, ports, ACK pacing, the RNBD client's limits.  Protocol numbers come
from the layers, by name."""

from ..spec.constants import RTRS_HB_MISSED_MAX
from ..layers.cm import cm_rej_reasons, path_mtus

C, S = 0, 1  # sides: client, server
PMTU_CODES = {int(size): code for code, size in path_mtus.items()}  # bytes -> CM REQ code
RXE_MAX_PKT_PER_ACK = 64
AETH_ACK = 0x1F  # AETH syndrome: ACK with the largest credit count, as rxe sends it
GSI_SPORT = 55410  # rxe's UDP source ports, the same in both real captures
RC_SPORT = 61204
HB_PERIOD = 5.1  # observed 5.12 s between heartbeats (5000 ms delayed work)
HB_MISSED_MAX = RTRS_HB_MISSED_MAX
RECONNECT_DELAY = 30.0  # RNBD's reconnect_delay_sec
RC_ACK_TIMEOUT = 4.096e-6 * (1 << 19)  # local_ack_timeout 19 in the CM REQ: ~2.1 s
RC_RETRY_COUNT = 7  # retry_count in the CM REQ
REJ_REASON = {name: code for code, name in cm_rej_reasons.items()}
CM_REJ_CONSUMER = REJ_REASON["Consumer Reject"]
CM_REJ_INVALID_SID = REJ_REASON["Invalid Service ID"]
CM_REJ_TIMEOUT = REJ_REASON["Timeout"]
CM_RETRY_INTERVAL = 6.0  # a REQ without answer is sent again every ~6 s (Linux 6.1, rxe)
RTRS_CONNECT_TIMEOUT = 30.0  # rtrs-clt.c RTRS_CONNECT_TIMEOUT_MS: the client gives up
RECONNECT_BACKOFF = 1.0  # rtrs-clt.c RTRS_RECONNECT_BACKOFF (ms 1000) before each attempt
RNBD_PRIO = 0x4004  # IOPRIO_CLASS_BE level 4, as in the captures
MAX_HW_BYTES = 124 * 1024  # max_hw_sectors_kb 124 in the captures

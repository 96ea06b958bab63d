"""The kernel's heartbeat timer as the capture sees it: one rule for the heartbeat gaps
and the heartbeat loss (docs/PROTOCOL.md#heartbeats).

``hb_work()`` (rtrs.c) runs on each side every RTRS_HB_INTERVAL_MS (a tick): past
RTRS_HB_MISSED_MAX missed ticks it gives up (the path is lost); else a tick whose
missed counter is not 0 only counts one more, and a tick whose counter is 0 sends an
HB_MSG and sets it to 1.  Hearing from the peer (an HB_ACK; in v6.x any immediate)
sets the counter back to 0.  So between two HB_MSG of one side the ticks its timer
let pass without sending are ticks it heard nothing since its HB_MSG: a gap of that
many missed ticks.  More than RTRS_HB_MISSED_MAX of them the timer does not allow: it
gave up (RTRS_HB_MISSED_MAX + 1) ticks after the HB_MSG (``timer_fired``), a loss,
not a gap.
"""

from ..spec.constants import HEARTBEAT_INTERVAL_S, RTRS_HB_MISSED_MAX

#: when the timer gives up after the last heartbeat that nothing answered
TIMEOUT_S = HEARTBEAT_INTERVAL_S * (RTRS_HB_MISSED_MAX + 1)


def missed_ticks(previous, now):
    """The ticks a side's timer let pass without sending between two of its HB_MSG at
    ``previous`` and ``now`` (seconds): the whole ticks between them, the timer's
    jitter (a fraction of a tick) rounded away."""
    return max(int((now - previous) / HEARTBEAT_INTERVAL_S + 0.5) - 1, 0)


def allowed(missed):
    """Whether the timer lets ``missed`` ticks pass without giving up."""
    return missed <= RTRS_HB_MISSED_MAX


def timer_fired(last, last_traffic, now):
    """When the timer of a path gave up before ``now``, or None: TIMEOUT_S after the
    last heartbeat seen (``last``), provided no fresh RC traffic came since in either
    direction within TIMEOUT_S (``last_traffic``: direction -> time; a direction never
    seen is silent since the heartbeat)."""
    deadline = last + TIMEOUT_S
    quiet_since = min(last_traffic.values(), default=last)
    if len(last_traffic) < 2:
        quiet_since = min(quiet_since, last)
    if now < deadline or now < quiet_since + TIMEOUT_S:
        return None
    return deadline

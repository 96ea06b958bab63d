"""The heartbeat rule (docs/PROTOCOL.md#heartbeats): the gaps and the loss the analyzer
tells from the heartbeats it sees are those of the kernel's timer, ``hb_work()`` of
rtrs.c (torvalds/linux drivers/infiniband/ulp/rtrs/rtrs.c), transcribed below as test
code with the constants of rtrs-pri.h (RTRS_HB_INTERVAL_MS 5000, RTRS_HB_MISSED_MAX 5),
and on cases worked out by hand."""

import random

import pytest

from rtrs_scapy.analysis import heartbeat
from rtrs_scapy.analysis.analyzer import Analyzer
from rtrs_scapy.engine import Engine

INTERVAL_MS = 5000      # rtrs-pri.h RTRS_HB_INTERVAL_MS
MISSED_MAX = 5          # rtrs-pri.h RTRS_HB_MISSED_MAX
CLIENT, SERVER = b"\x0a\x4d\x00\x02", b"\x0a\x4d\x00\x01"


def hb_work(ticks_ms, answer_delay_ms):
    """One side's timer as rtrs.c runs it: at each tick, past MISSED_MAX missed ticks the
    error handler (the path is lost); a counter not 0 only counts (``hb_missed_cnt++``,
    no HB_MSG); a counter of 0 sends HB_MSG and sets it to 1.  The peer's HB_ACK sets it
    to 0; ``answer_delay_ms(n)``: when it answers the n-th HB_MSG (None: never).  Returns
    [(HB_MSG time, ticks skipped before it)], the HB_ACK times and the give-up tick (None:
    the timer never gave up)."""
    missed, skipped, sent, heard, previous = 0, 0, [], [], None
    for tick in ticks_ms:
        if previous is not None and any(previous < h <= tick for h in heard):
            missed = 0
        previous = tick
        if missed > MISSED_MAX:
            return sent, heard, tick
        if missed:
            missed += 1
            skipped += 1
            continue
        delay = answer_delay_ms(len(sent))
        if delay is not None:
            heard.append(tick + delay)
        sent.append((tick, skipped))
        missed, skipped = 1, 0
    return sent, heard, None


def ticks(count, jitter_ms=0, seed=0):
    """The timer's ticks: every interval, late by up to ``jitter_ms`` each (delayed work)."""
    rng = random.Random(seed)
    out, at = [], 1000
    for _ in range(count):
        out.append(at)
        at += INTERVAL_MS + rng.randint(0, jitter_ms)
    return out


def analyzed(sent, acks):
    """The analyzer's path after the client's HB_MSG ``sent`` and the server's HB_ACKs
    ``acks`` (ms), fed in time order as the analyzer's heartbeat rows feed it."""
    an = Analyzer()
    Engine(an)
    path = an.inferred_path(CLIENT, SERVER)
    beats = sorted([(t, True) for t in sent] + [(t, False) for t in acks])
    for frame, (t, is_msg) in enumerate(beats, 1):
        an.count_heartbeat(path, is_msg, is_msg, frame, t / 1e3)
        an.cm.heartbeat(path, frame, t / 1e3)
    return an, path


def gaps(path):
    return [(e["time"], e["missed_ticks"]) for e in path.events if e["kind"] == "heartbeat_gap"]


@pytest.mark.parametrize("jitter_ms", [0, 40])
def test_gaps_are_the_ticks_the_kernel_timer_skipped(jitter_ms):
    """The server answers some HB_MSG late (by 1 to 5 ticks and 300 ms), the others at
    once: the client's timer skips ticks, as many as the gap events say, whatever the
    timer's jitter."""
    late = {10: 1, 20: 2, 30: 3, 40: 4, 50: 5}
    sent, acks, gave_up = hb_work(ticks(120, jitter_ms, seed=jitter_ms),
                                  lambda n: late.get(n, 0) * INTERVAL_MS + 300
                                  if n in late else 1)
    assert gave_up is None
    expected = [(before / 1e3, skipped) for (before, _), (_, skipped) in zip(sent, sent[1:])
                if skipped]
    assert [m for _, m in expected] == [1, 2, 3, 4, 5]
    an, path = analyzed([t for t, _ in sent], acks)
    assert gaps(path) == expected
    assert path.heartbeats_lost == [] and path.up is None


def test_a_silence_the_timer_does_not_allow_is_a_loss_not_a_gap():
    """Worked out by hand: HB_MSG at 1 s answered, at 6 s unanswered, and the next seen
    at 46 s.  The timer counted ticks 11 … 36 s (1 + 5 more than RTRS_HB_MISSED_MAX:
    give-up at 6 + 6 × 5 = 36 s), so the path was lost at 36 s; no gap is told."""
    an, path = analyzed([1000, 6000, 46000], [1001])
    assert path.heartbeats_lost == [{"frame": 3, "last_time": 6.0, "time": 36.0}]
    assert path.down["cause"] == "heartbeat_lost" and path.up is False
    assert gaps(path) == []


def test_the_loss_is_when_the_kernel_timer_gives_up():
    """The server stops answering after the 20th HB_MSG: the kernel's timer gives up
    MISSED_MAX + 1 ticks after its last HB_MSG; the analyzer, asked at the capture's
    end, says the same time, and tells no gap."""
    tick = ticks(60)
    sent, acks, gave_up = hb_work(tick, lambda n: 1 if n < 20 else None)
    assert gave_up == sent[-1][0] + (MISSED_MAX + 1) * INTERVAL_MS
    an, path = analyzed([t for t, _ in sent], acks)
    an.cm.heartbeats_lost(path, tick[-1] / 1e3)
    assert [lost["time"] for lost in path.heartbeats_lost] == [gave_up / 1e3]
    assert gaps(path) == []


@pytest.mark.parametrize("previous, now, missed", [
    (0.0, 5.0, 0), (0.0, 5.2, 0), (0.0, 7.4, 0), (0.0, 7.6, 1), (0.0, 9.97, 1),
    (0.0, 10.03, 1), (0.0, 15.0, 2), (0.0, 30.1, 5), (0.0, 35.0, 6)])
def test_missed_ticks_by_hand(previous, now, missed):
    assert heartbeat.missed_ticks(previous, now) == missed
    assert heartbeat.allowed(missed) == (missed <= MISSED_MAX)


@pytest.mark.parametrize("traffic, now, fired", [
    ({}, 129.9, None), ({}, 130.0, 130.0),
    ({True: 120.0, False: 110.0}, 139.0, None), ({True: 120.0, False: 110.0}, 140.0, 130.0),
    ({True: 125.0}, 130.0, 130.0)])
def test_the_timeout_by_hand(traffic, now, fired):
    """The last heartbeat at 100 s: the timer gives up at 130 s, unless fresh RC traffic
    in both directions came later (the quieter direction + 30 s); a direction never
    seen is silent since the heartbeat."""
    assert heartbeat.timer_fired(100.0, traffic, now) == fired

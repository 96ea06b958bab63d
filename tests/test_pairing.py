"""The analyzer's pairing of a batch (analysis/pairing.py: one sort, then the compiled
pass of engine/pair_scan.py) against the rule walked event by event in capture order
(docs/PROTOCOL.md#pairing-requests-and-responses): a response answers the request of
its session and buf_id still waiting; a request that finds one waiting replaced it (on
another path a failover, whose chain keeps its first send, else a reuse); what waits
at the end is pending (hypothesis)."""

import numpy as np
from hypothesis import given, strategies as st

from rtrs_scapy.analysis import pairing

EVENT = st.tuples(st.booleans(), st.integers(0, 2), st.integers(0, 5), st.integers(0, 2))


def walked(events, first_frames, first_stamps):
    """The rule one event at a time: ``events`` (is_request, session, buf_id, path) in
    capture order."""
    requests = [k for k, event in enumerate(events) if event[0]]
    index = {k: i for i, k in enumerate(requests)}
    n_rsp = len(events) - len(requests)
    out = {"response_request": [-1] * n_rsp, "replaced_by": [-1] * len(requests),
           "failover": [False] * len(requests), "reused": [False] * len(requests),
           "first_frame": list(first_frames), "first_stamp": list(first_stamps),
           "pending": [False] * len(requests)}
    waiting, responses = {}, 0
    for k, (is_request, sess, key, path) in enumerate(events):
        if not is_request:
            if (sess, key) in waiting:
                out["response_request"][responses] = waiting.pop((sess, key))
            responses += 1
            continue
        i = index[k]
        old = waiting.get((sess, key))
        if old is not None:
            out["replaced_by"][old] = i
            moved = events[requests[old]][3] != path
            out["failover" if moved else "reused"][i] = True
            if moved:
                out["first_frame"][i] = out["first_frame"][old]
                out["first_stamp"][i] = out["first_stamp"][old]
        waiting[(sess, key)] = i
    for i in waiting.values():
        out["pending"][i] = True
    return out


@given(st.lists(EVENT, max_size=80), st.randoms(use_true_random=False))
def test_the_batchs_pairs_are_the_rule_walked_event_by_event(events, rnd):
    """Requests and responses of three sessions, six buf_ids and three paths, the
    requests' table in another order than their frames (carried requests come first)."""
    frames = list(range(100, 100 + len(events)))
    requests = [k for k, event in enumerate(events) if event[0]]
    responses = [k for k, event in enumerate(events) if not event[0]]
    table_order = list(range(len(requests)))
    rnd.shuffle(table_order)
    column = {c: np.zeros(len(requests), dtype=np.int64) for c in pairing.REQUEST_COLUMNS}
    for row, i in enumerate(table_order):
        _, sess, key, path = events[requests[i]]
        column["sess"][row], column["key"][row], column["path"][row] = sess, key, path
        column["frame"][row] = frames[requests[i]]
        column["first_frame"][row] = frames[requests[i]] - rnd.randrange(3)
        column["first_stamp"][row] = rnd.randrange(10 ** 9)
    result = pairing.pair(column, np.array([events[k][1] for k in responses], dtype=np.int64),
                          np.array([events[k][2] for k in responses], dtype=np.int64),
                          np.array([frames[k] for k in responses], dtype=np.int64))
    row_of = {i: row for row, i in enumerate(table_order)}
    expected = walked(events, [column["first_frame"][row_of[i]] for i in range(len(requests))],
                      [column["first_stamp"][row_of[i]] for i in range(len(requests))])
    by_row = {name: [expected[name][table_order[row]] for row in range(len(requests))]
              for name in ("replaced_by", "failover", "reused", "first_frame", "first_stamp",
                           "pending")}
    by_row["replaced_by"] = [-1 if i < 0 else row_of[i] for i in by_row["replaced_by"]]
    answered = [-1 if i < 0 else row_of[i] for i in expected["response_request"]]
    assert result.response_request.tolist() == answered
    for name, values in by_row.items():
        assert getattr(result, name).tolist() == values, name

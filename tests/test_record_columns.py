"""engine/record_columns.py: the message records' pairs by frame and address table,
against plain Python statements of what they do."""

import numpy as np

from rtrs_scapy.engine.record_columns import AddressIds, pair_by_frame
from rtrs_scapy.engine import transport as T


def _pairs_by_frame(rsp_frame, req_frame, req_paired):
    """The rule, record by record: a request gets the last response of the frame it was
    paired with; the requests of a frame all get the one of the last of them that got
    one; a response gets the last request paired with its frame that got one."""
    last_response = {frame: r for r, frame in enumerate(rsp_frame)}
    hit = [last_response.get(frame, -1) for frame in req_paired]
    per_frame = {frame: h for frame, h in zip(req_frame, hit) if h >= 0}
    got = [per_frame.get(frame, -1) for frame in req_frame]
    asked = {req_paired[q]: q for q in range(len(req_paired)) if hit[q] >= 0}
    answers = [asked.get(frame, -1) for frame in rsp_frame]
    return got, answers


def test_requests_and_responses_pair_by_frame_as_the_rule_says():
    """Frames shared by several requests or responses (retransmitted and failed-over
    IO), requests paired with a frame no response has, responses no request names;
    the requests' answers written apart or over their paired frames."""
    rng = np.random.default_rng(11)
    for size in (0, 1, 5, 200, 3000):
        rsp_frame = np.sort(rng.integers(0, size * 2 + 1, size))
        req_frame = np.sort(rng.integers(0, size * 2 + 1, size + 3))
        req_paired = rng.choice(np.append(rsp_frame, [-1, size * 5]), size + 3)
        expected = _pairs_by_frame(rsp_frame.tolist(), req_frame.tolist(), req_paired.tolist())
        got = np.empty(len(req_frame), dtype=np.int64)
        answers = np.empty(len(rsp_frame), dtype=np.int64)
        pair_by_frame(rsp_frame, req_frame, req_paired, got, answers)
        assert (got.tolist(), answers.tolist()) == expected
        in_place = req_paired.copy()        # the requests' answers over their paired frames
        pair_by_frame(rsp_frame, req_frame, in_place, in_place, answers)
        assert (in_place.tolist(), answers.tolist()) == expected
        if size >= 200:
            assert len(set(rsp_frame.tolist())) < size and (got >= 0).any() and (answers < 0).any()


def test_the_address_table_finds_what_it_was_given_and_numbers_the_rest():
    """Addresses added in rounds (the table doubling beyond half full; one given twice
    keeps its first id) are found by every row that names them; the others are numbered
    from the next id in the order their rows come, one id per address, across the
    table's growth; rows whose id is known already are left as they are."""
    rng = np.random.default_rng(3)
    table = AddressIds()
    known = {}
    for _ in range(6):
        his = rng.integers(-(1 << 63), 1 << 63, 40, dtype=np.int64)
        los = rng.integers(-(1 << 63), 1 << 63, 40, dtype=np.int64)
        values = np.arange(len(known), len(known) + 40)
        table.add(np.append(his, his[:1]), np.append(los, los[:1]), np.append(values, -5))
        known.update(zip(zip(his.tolist(), los.tolist()), values.tolist()))
    assert table.count == len(known) and len(table.ids) >= 2 * len(known)
    new = [(1, k) for k in range(300)] + [(0, 0)]
    pairs = list(known) + new + new[::7] + list(known)[::5]
    order = rng.permutation(len(pairs))
    pairs = [pairs[k] for k in order]
    rows = np.zeros((len(pairs), T.R_COLUMNS), dtype=np.int64)
    rows[:, T.R_SRC_HI], rows[:, T.R_SRC_LO] = zip(*pairs)
    keep = np.arange(len(pairs))[::-1].copy()
    found = np.full(len(pairs) + 2, -1, dtype=np.int32)
    found[2] = 77          # the first row kept: its id is left alone
    numbered = table.number(rows, keep, T.R_SRC_HI, T.R_SRC_LO, found, 2, len(known))
    expected, ids = [], dict(known)
    for k, r in enumerate(keep.tolist()):
        if k == 0:
            expected.append(77)
            continue
        if pairs[r] not in ids:
            ids[pairs[r]] = len(ids)
        expected.append(ids[pairs[r]])
    assert found[2:].tolist() == expected
    assert numbered == [pair for pair in ids if pair not in known]
    assert table.count == len(ids) and len(table.ids) >= 2 * len(ids)


def test_the_requests_so_far_answer_as_the_pairs_of_the_whole_capture():
    """records.RequestsSoFar, fed the records in frame order a row group at a
    time, gives each response the request the whole capture's pairs give it
    (Records.partners' rule), where every request comes before its answer; several
    records in one frame, a row group cut inside a frame, requests never answered."""
    from rtrs_scapy.analysis import records as R

    rng = np.random.default_rng(17)
    n = 3000
    frame = np.sort(rng.integers(0, n // 2, n))      # frames shared by a few records
    msg = rng.choice([R.READ, R.WRITE, R.IO_RSP, R.HB_MSG], n)
    paired = np.full(n, -1, dtype=np.int64)
    for q in np.flatnonzero((msg == R.READ) | (msg == R.WRITE)):
        later = np.flatnonzero((msg == R.IO_RSP) & (frame > frame[q]))
        if len(later) and rng.random() < 0.9:
            paired[q] = frame[rng.choice(later[:20])]
    records = np.arange(n) + 1000
    kind = np.where(msg == R.IO_RSP, 1, np.where((msg == R.READ) | (msg == R.WRITE), 2, 0))
    asked = kind == 2
    _, answers = _pairs_by_frame(frame[kind == 1].tolist(), frame[asked].tolist(),
                                 paired[asked].tolist())
    expected = np.full(n, -1)
    expected[kind == 1] = [records[asked][a] if a >= 0 else -1 for a in answers]
    so_far, got = R.RequestsSoFar(), []
    for start in range(0, n, 128):
        part = slice(start, start + 128)
        got.extend(so_far(records[part], msg[part], frame[part], paired[part]).tolist())
    assert got == expected.tolist() and (expected >= 0).sum() > n // 5
    assert len(so_far.paired) < 40


def test_a_request_answered_no_later_than_itself_is_noted():
    """Records.pairs notes a response paired with a request of a later frame (which
    RequestsSoFar could not answer): the tables then take the whole capture's pairs."""
    from rtrs_scapy.analysis.records import Records

    records = Records(None, chunk=None)
    first = records.cols.extend(3)
    records.cols.data["frame"][:3] = [10, 20, 30]
    records.pairs(np.array([first]), np.array([first + 1]), np.array([0.1]))
    assert not records.answered_first
    records.pairs(np.array([first + 2]), np.array([first + 1]), np.array([0.1]))
    assert records.answered_first

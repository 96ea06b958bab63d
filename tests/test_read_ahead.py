"""The read-ahead thread (engine/ahead.py): items in order, an error where it
happened, and a consumer that stops early never waits for the thread, whatever
the thread was doing when it stopped.  On one core, no thread: the same items, and
the same analysis."""

import threading
import time
from pathlib import Path

import pytest

from rtrs_scapy.engine import ahead as ahead_module
from rtrs_scapy.engine.ahead import ahead

CAPTURE = str(Path(__file__).parent.parent / "pcaps" / "real" / "basic_inval.pcap")


@pytest.fixture(autouse=True)
def two_cores(monkeypatch):
    """The thread's tests hold on any machine, one core given to the suite included."""
    monkeypatch.setattr(ahead_module, "usable_cores", lambda: 2)


def test_items_come_out_in_order():
    assert list(ahead(iter(range(100)), depth=2)) == list(range(100))


def test_an_error_comes_out_after_the_items_before_it():
    def failing():
        yield from range(5)
        raise ValueError("record 5 is torn")
    got = []
    with pytest.raises(ValueError, match="record 5 is torn"):
        for item in ahead(failing(), depth=2):
            got.append(item)
    assert got == list(range(5))


def test_by_default_three_chunks_wait_ahead_of_the_consumer():
    """Each chunk maps up to 8 MB of the file: the consumer's chunk, three queued and one
    in the making, no more, however long the consumer takes; ``behind`` gives a chunk
    back once four later ones are queued."""
    made, given_back = [], []

    def source():
        for item in range(10):
            made.append(item)
            yield item

    stream = ahead(source(), behind=given_back.append)
    first = next(stream)
    deadline = time.monotonic() + 5
    while len(made) < 5 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)                     # room for a thread that would go further
    assert first == 0 and made == [0, 1, 2, 3, 4]
    assert list(stream) == list(range(1, 10))
    assert given_back == list(range(6))    # the last four stay with the caller


def _stopped_early(items, depth, error=None):
    """Take one item, wait until the thread is as far as it can get (past the last
    item when all fit in the queue, and past raising the error, if any), close: the
    thread ends (close joins it) and the consumer returns."""
    produced = threading.Event()
    all_fit = len(items) <= depth + 1

    def source():
        yield from items[:-1]
        if not all_fit:
            produced.set()
        yield items[-1]
        produced.set()                  # the thread has queued the last item
        if error is not None:
            raise error
    stream = ahead(source(), depth=depth)
    first = next(stream)
    assert produced.wait(5)
    closer = threading.Thread(target=stream.close, daemon=True)
    closer.start()
    closer.join(5)
    return first, closer.is_alive()


@pytest.mark.parametrize("count", [2, 3, 4])
def test_stopping_with_the_queue_full_returns(count):
    # one item taken and two queued: with three items the thread still has the
    # end to hand over, with four an item; it waits for room that a stopped
    # consumer never makes, and must see that the consumer stopped
    first, still_closing = _stopped_early(list(range(count)), depth=2)
    assert first == 0
    assert not still_closing


def test_stopping_before_an_error_is_handed_over_returns():
    first, still_closing = _stopped_early([0, 1, 2], depth=2, error=OSError("read failed"))
    assert first == 0
    assert not still_closing


def test_an_analysis_stopped_after_the_first_chunk_returns():
    # `rtrs-dissect show FRAME` stops reading after the chunk holding FRAME; with
    # three chunks of 600 records the thread has read all three by then and waits
    # to hand over the end
    from rtrs_scapy.analysis import analyze
    done = []
    for _ in range(20):
        reader = threading.Thread(
            target=lambda: done.append(analyze(CAPTURE, chunk_records=600, until_frame=1)),
            daemon=True)
        reader.start()
        reader.join(20)
        assert not reader.is_alive()
    assert len(done) == 20
    assert all(result.summary["capture"]["packets"] == 600 for result in done)


def test_on_one_core_the_items_are_made_as_they_are_asked_for(monkeypatch):
    """No thread: an item is made when the consumer asks for it, ``behind`` gets it back
    once the consumer asks for the next one, and an error comes out where it happened."""
    monkeypatch.setattr(ahead_module, "usable_cores", lambda: 1)
    made, given_back = [], []

    def source():
        for item in range(4):
            made.append(item)
            yield item
        raise ValueError("record 4 is torn")
    threads = threading.active_count()
    stream = ahead(source(), behind=given_back.append, idle=lambda: made.append("idle"))
    assert next(stream) == 0 and made == [0] and given_back == []
    assert threading.active_count() == threads
    assert next(stream) == 1 and made == [0, 1] and given_back == [0]
    with pytest.raises(ValueError, match="record 4 is torn"):
        list(stream)
    assert made == [0, 1, 2, 3] and given_back == [0, 1, 2, 3]


def test_one_core_and_two_give_the_same_analysis(monkeypatch):
    """The thread changes where the batches of messages end, never what they say."""
    from rtrs_scapy.analysis import analyze
    summaries = []
    for cores in (1, 2):
        monkeypatch.setattr(ahead_module, "usable_cores", lambda cores=cores: cores)
        summaries.append(analyze(CAPTURE, chunk_records=300).summary)
    assert summaries[0] == summaries[1]
    assert summaries[0]["capture"]["packets"] == 1558

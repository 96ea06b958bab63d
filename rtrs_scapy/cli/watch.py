"""``rtrs-dissect watch SOURCE``: RTRS sessions second by second (a top for RTRS)."""

import json
import os
import signal
import sys
import threading

import click

from .common import queue_depth_option


def _parse_listen(text):
    """``[ADDR:]PORT`` -> (addr, port); IPv6 as ``[::1]:9464``."""
    addr, _, port = text.rpartition(":")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise click.BadParameter("expected [ADDR:]PORT, e.g. 9464 or 127.0.0.1:9464")
    return addr.strip("[]") or "0.0.0.0", int(port)


@click.command()
@click.argument("source", required=False)
@click.option("-i", "--interface", "iface", metavar="IFACE",
              help="Capture on IFACE with tcpdump (else dumpcap) instead of reading SOURCE.")
@click.option("--filter", "capture_filter", default=None, metavar="EXPR",
              help="Capture filter for -i (default: RoCE, 'udp port 4791 or ether proto "
                   "0x8915'; '' for none).")
@click.option("--interval", type=click.FloatRange(0.01, 3600), default=1.0, show_default=True,
              help="Seconds per interval (of the capture's clock for a file).")
@click.option("--replay", is_flag=True,
              help="Replay a capture file at its own pace (else as fast as possible).")
@click.option("--speed", type=click.FloatRange(0.001, 1e6), default=1.0, show_default=True,
              help="With --replay: capture seconds per second (2 = twice as fast).")
@click.option("--jsonl", is_flag=True,
              help="One JSON object per interval on stdout (the default when stdout is "
                   "not a terminal).")
@click.option("--prometheus", "listen", metavar="[ADDR:]PORT", default=None,
              help="Serve the counters to Prometheus on ADDR:PORT (/metrics).")
@click.option("--age-out", type=click.FloatRange(0), default=60.0, show_default=True,
              help="Seconds without IO, heartbeat or CM message after which a path leaves "
                   "the view (its totals stay in the exporter).")
@queue_depth_option
def watch(source, iface, capture_filter, interval, replay, speed, jsonl, listen, age_out,
          queue_depth):
    """Watch RTRS sessions live: per path IOPS, throughput, latency, requests in
    flight against the queue depth, errors, reconnects and heartbeats, interval by
    interval, with the events (connects, rejects, disconnects, failovers, IO errors).

    SOURCE is a capture file or - (standard input, e.g. tcpdump -U -w - udp port
    4791 | rtrs-dissect watch -); -i IFACE captures itself.  On a terminal: a
    full-screen view (q quit, s sort, p pause, Enter path details); otherwise, or
    with --jsonl, one JSON object per interval.  With --prometheus the exporter
    keeps serving the final counters after the input ends, until interrupted.
    """
    from ..watch.inputs import ROCE_FILTER, WatchError, ToolInput, file_input, stdin_input
    if (source is None) == (iface is None):
        raise click.UsageError("give a SOURCE (a capture file or -) or -i IFACE")
    if replay and (iface or source == "-"):
        raise click.UsageError("--replay replays a capture file; live input has its own pace")
    screen = not jsonl and sys.stdout.isatty()
    try:
        if iface:
            src = ToolInput(iface, ROCE_FILTER if capture_filter is None else capture_filter)
        elif source == "-":
            src = stdin_input(_keyboard_stdin() if screen else 0)
        else:
            src = file_input(source)
    except WatchError as exc:
        raise click.ClickException(str(exc)) from None
    stop = threading.Event()
    from ..watch.runner import Run
    from .compile import ensure_compiled
    ensure_compiled()
    # only the exporter shows the RNBD totals
    run = Run(src, interval, replay, speed, queue_depth, age_out, stop,
              rnbd_totals=listen is not None)
    if not src.live:
        try:
            run.open()
        except WatchError as exc:
            raise click.ClickException(str(exc)) from None
    exporter = None
    if listen:
        from ..watch.exporter import Exporter
        exporter = Exporter()
        try:
            exporter.serve(*_parse_listen(listen))
        except OSError as exc:
            raise click.ClickException("--prometheus %s: %s" % (listen, exc.strerror or exc))
    try:
        if screen:
            from ..watch.screen import WatchApp
            error = WatchApp(run, exporter, os.path.basename(src.name)).run()
        else:
            error = _jsonl(run, exporter, stop)
    except WatchError as exc:
        raise click.ClickException(str(exc)) from None
    if error:
        raise click.ClickException(error)
    for frame, kind, detail in run.problems():
        click.echo("warning: %s: %s at frame %d: %s" % (src.name, kind.replace("_", " "),
                                                          frame, detail), err=True)
    if exporter is not None and run.ended and not screen:
        click.echo("watch: input ended; serving the final counters on %s until interrupted"
                   % listen, err=True)
        _wait_for_signal()


def _jsonl(run, exporter, stop):
    """One JSON object per interval on stdout; None, or an error message."""
    from ..watch.inputs import WatchError
    out = sys.stdout
    intervals = run.intervals()
    try:
        for interval in intervals:
            if exporter is not None:
                exporter.add(interval)
            out.write(json.dumps(interval.json()) + "\n")
            out.flush()
    except WatchError as exc:
        return str(exc)
    except KeyboardInterrupt:
        stop.set()
    except BrokenPipeError:     # the reader went away (| head): not an error
        stop.set()
        sys.stdout = None
    finally:
        intervals.close()       # the capture closed, a capture tool stopped
    return None


def _keyboard_stdin():
    """The capture comes on stdin while the screen needs the keyboard on fd 0."""
    from ..watch.inputs import detach_stdin
    try:
        return detach_stdin()
    except OSError:
        raise click.ClickException("standard input carries the capture and there is no "
                                   "terminal for the keys; use --jsonl") from None


def _wait_for_signal():
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    while not done.wait(1.0):
        pass

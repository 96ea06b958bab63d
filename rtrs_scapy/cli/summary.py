"""``rtrs-dissect summary``: what every session did (the default command)."""

import json
import sys

import click

from ..report.indented import IndentedJson
from .common import analyze_capture, captures_argument, echo_batches, format_option, \
    kernel_log_option, queue_depth_option, quiet_option, with_kernel_logs
from .scale import analysis_runner, run_options


def write_summary_json(head, sessions, out, piece=1 << 20):
    """The summary as indented JSON (``json.dump(indent=1)`` of it, byte for byte,
    report/indented.py): the ``head`` (analysis.Analysis.summary_parts) with
    ``sessions`` written in place of its empty list, each encoded as it comes; written
    out every ``piece`` characters, so that neither the text nor the summary of
    thousands of sessions is ever whole in memory."""
    encoder = IndentedJson(indent=1)
    pieces = []
    held = 0        # characters in pieces

    def write(value, level):
        nonlocal held
        text = encoder.text(value, level)
        pieces.append(text)
        held += len(text)
        if held >= piece:
            out.write("".join(pieces))
            pieces.clear()
            held = 0

    pieces.append("{")
    for i, (key, value) in enumerate(head.items()):
        pieces.append((",\n " if i else "\n ") + json.dumps(key) + ": ")
        if key != "sessions":
            write(value, 1)
            continue
        pieces.append("[")
        closing = "]"
        for session in sessions:
            pieces.append("\n  " if closing == "]" else ",\n  ")
            write(session, 2)
            closing = "\n ]"
        pieces.append(closing)
    out.write("".join(pieces) + "\n}\n")


@click.command()
@captures_argument
@format_option
@quiet_option
@queue_depth_option
@run_options
@kernel_log_option
def summary(captures, fmt, quiet, queue_depth, jobs, dask, kernel_logs, device_map):
    """What every RTRS session in CAPTURES did (the default command).

    CAPTURES: pcap/pcapng files (gzip too), - for standard input, directories; several
    are one capture, merged in time order (a ring buffer, or the files of two hosts).
    The files of a ring buffer are read in parallel (--jobs, --dask) and stitched
    together here: the same summary as one pass.

    Paths, connections, handshake parameters, IO counts/bytes per direction,
    latency percentiles, errors, heartbeats, rkey refreshes, reconnects,
    disconnects and anomalies.  Exit 0 when the capture was read (even
    truncated: a warning goes to stderr), 1 when nothing could be read.
    """
    from ..report.text import render_parts
    with analysis_runner(jobs, dask) as run:
        result = analyze_capture(list(captures), quiet, keep_messages=False,
                                 queue_depth=queue_depth, analyze=run)
    # the summary is written session by session as it is made, unless something needs
    # it whole first: kernel logs and device maps match across sessions, and the line
    # of a cut capture counts the header-only requests of every session
    with_kernel_logs(result, kernel_logs, device_map, say=fmt != "text")
    head, sessions = result.summary_parts(whole=result.info["cut_records"] > 0)
    if fmt == "json":
        write_summary_json(head, sessions, sys.stdout)
    else:
        echo_batches(render_parts(head, sessions))

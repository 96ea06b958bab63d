"""``rtrs-dissect summary``: what every session did (the default command)."""

import json
import sys

import click

from .common import analyze_capture, captures_argument, echo_batches, format_option, \
    kernel_log_option, queue_depth_option, quiet_option, with_kernel_logs
from .scale import analysis_runner, run_options


def write_json(value, out, piece=1 << 16):
    """``value`` as indented JSON, written in pieces: a summary of thousands of
    sessions never exists whole as one string."""
    pieces = []
    for text in json.JSONEncoder(indent=1).iterencode(value):
        pieces.append(text)
        if len(pieces) == piece:
            out.write("".join(pieces))
            pieces.clear()
    out.write("".join(pieces) + "\n")


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
    with_kernel_logs(result.summary, kernel_logs, device_map, say=fmt != "text")
    if fmt == "json":
        write_json(result.summary, sys.stdout)
    else:
        echo_batches(render_parts(result.summary))

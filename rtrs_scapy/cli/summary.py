"""``rtrs-dissect summary``: what every session did (the default command)."""

import json

import click

from .common import analyze_capture, capture_argument, format_option, queue_depth_option, \
    quiet_option


@click.command()
@capture_argument
@format_option
@quiet_option
@queue_depth_option
def summary(capture, fmt, quiet, queue_depth):
    """What every RTRS session in CAPTURE did (the default command).

    Paths, connections, handshake parameters, IO counts/bytes per direction,
    latency percentiles, errors, heartbeats, rkey refreshes, reconnects,
    disconnects and anomalies.  Exit 0 when the capture was read (even
    truncated: a warning goes to stderr), 1 when nothing could be read.
    """
    from ..report.text import render
    result = analyze_capture(capture, quiet, keep_messages=False, queue_depth=queue_depth)
    if fmt == "json":
        click.echo(json.dumps(result.summary, indent=1))
    else:
        click.echo(render(result.summary), nl=False)

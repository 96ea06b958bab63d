"""``rtrs-dissect report CAPTURE… -o report.html``: one self-contained HTML file
(figures, tables and the plotting library inline) that opens offline from file://."""

import gc

import click

from .common import OutputPath, analyze_capture, captures_argument, kernel_log_option, \
    quiet_option, queue_depth_option, with_kernel_logs, writing


def capture_view(captures, quiet, queue_depth, kernel_logs=(), device_map=()):
    """One analysis run (summary, IO rows, message records) as the report sees it;
    several captures are handed to the analyzer together; the kernel logs join the
    paths' timelines."""
    from ..report.view import LADDER_MESSAGES, CaptureView, kept_rows
    kept = kept_rows()
    result = analyze_capture(list(captures), quiet, keep_messages=LADDER_MESSAGES,
                             queue_depth=queue_depth, io_sink=kept)
    with_kernel_logs(result, kernel_logs, device_map)
    view = CaptureView(result, kept)
    del result
    gc.collect()    # the analysis' state (in cycles) is freed before the report is drawn
    return view


@click.command()
@captures_argument
@click.option("-o", "--output", required=True, type=OutputPath(),
              help="The HTML file to write.")
@quiet_option
@queue_depth_option
@kernel_log_option
def report(captures, output, quiet, queue_depth, kernel_logs, device_map):
    """An HTML report of CAPTURES: for the capture, each session, path and RNBD
    device, the summary's figures, failed IOs, latency distributions, IOPS,
    throughput and latency over time with the events, requests in flight, load
    per connection, IO sizes, access pattern and the CM ladder.  One file, no
    network: it opens from file:// on an offline machine.

    CAPTURES: pcap/pcapng files (gzip too), - for standard input, directories; several
    are one capture, merged in time order (a ring buffer, or the files of two hosts)."""
    from ..report.html import render_parts
    view = capture_view(captures, quiet, queue_depth, kernel_logs, device_map)
    parts = render_parts(view)
    with writing(output), open(output, "w", encoding="utf-8") as out:
        out.writelines(parts)

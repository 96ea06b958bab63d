"""``rtrs-dissect iostat``: ``iostat -x`` per interval and device, path or session,
from the wire (docs/iostat.md)."""

import click

from ..report.iostat import BY
from .common import analyze_capture, captures_argument, chosen, echo_batches, kernel_log_option, \
    queue_depth_option, quiet_option, with_kernel_logs


@click.command()
@captures_argument
@click.option("--interval", "-i", "interval", type=click.FloatRange(min=1e-6), default=1.0,
              show_default=True, metavar="S", help="Seconds per interval.")
@click.option("--by", type=click.Choice(BY), default="device", show_default=True,
              help="One line per RNBD device, RTRS path or session.")
@click.option("--device", "devices", multiple=True, metavar="ID|NAME",
              help="Only this RNBD device: its id, its path (/dev/ram0) or the client's "
                   "name of it (rnbd0, from --kernel-log or --device-map); repeatable; "
                   "with --by device.")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "csv"]), default="text",
              show_default=True, help="Text like iostat -x, JSON lines or CSV.")
@quiet_option
@queue_depth_option
@kernel_log_option
def iostat(captures, interval, by, devices, fmt, quiet, queue_depth, kernel_logs, device_map):
    """iostat -x of CAPTURES from the wire: per interval and device (or path,
    session) the IOs per second, kB/s, mean latency (await) and its 99th
    percentile, the server's mean time (srv_ms), the mean queue size (aqu-sz), the
    time with an IO in flight (%util) and the errors; per path also the
    retransmissions and stalls.

    CAPTURES: files, - for standard input, directories: one capture, merged in time
    order.  An IO counts in the interval of its response (never answered: of its
    request), so the counts summed over the intervals are the summary's.
    """
    from functools import partial
    from ..analysis import analyze
    from ..analysis.iostat import kept_rows
    from ..report import iostat as view
    if devices and by != "device":
        raise click.UsageError("--device selects devices: use it with --by device")
    kept = kept_rows()
    # the IO rows carry the figures: the summary's per-IO latencies need not be kept
    result = analyze_capture(list(captures), quiet, keep_messages=False,
                             queue_depth=queue_depth, io_sink=kept,
                             analyze=partial(analyze, keep_latencies=False))
    summary, _ = with_kernel_logs(result, kernel_logs, device_map)
    # --device names a device across whole sessions: only then is every session summarized
    devices = [_server_name(summary or result.summary, value) for value in devices]
    try:
        table = view.table(result, kept, by=by, interval_s=interval, devices=devices)
    except view.UnknownDevice as exc:
        raise click.UsageError(str(exc)) from None
    except view.TooManyLines as exc:
        raise click.ClickException(str(exc)) from None
    if not table:
        click.echo("%s: no %s in the capture" % (" ".join(captures), "RNBD IO" if by == "device"
                                                 else "RTRS request"), err=True)
    parts = view.json_parts(table) if fmt == "json" else view.csv_parts(table) \
        if fmt == "csv" else view.text_parts(table, by)
    echo_batches(parts)


def _server_name(summary, wanted):
    """The id or server path of the device ``wanted`` names (naming.py: also the
    client's name); a usage error listing the devices when none."""
    from ..analysis.naming import match_device
    _, device_id, path, _ = chosen(match_device, "--device", summary["sessions"],
                                 wanted)[0]
    return path or str(device_id)

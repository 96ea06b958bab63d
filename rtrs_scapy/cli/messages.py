"""``rtrs-dissect messages`` and ``show``: message by message, frame by frame."""

import json
from functools import partial

import click

from .common import analyze_capture, capture_argument, captures_argument, chosen, echo_batches, \
    format_option, kernel_log_option, queue_depth_option, quiet_option, with_kernel_logs
from ..report.messages import HEADER, MESSAGE_KINDS, OTHER, RNBD_CONTROL, RNBD_OPS


class SectorRange(click.ParamType):
    """``N`` or ``FROM-TO`` (512-byte sectors, inclusive)."""
    name = "FROM-TO"

    def convert(self, value, param, ctx):
        first, _, last = value.partition("-")
        try:
            bounds = (int(first), int(last or first))
        except ValueError:
            self.fail("%r is not N or FROM-TO" % value, param, ctx)
        if bounds[0] < 0 or bounds[0] > bounds[1]:
            self.fail("%r is not an ascending range of sectors" % value, param, ctx)
        return bounds


@click.command()
@captures_argument
@format_option
@quiet_option
@queue_depth_option
@click.option("--session", "session_filter", default=None, metavar="NAME",
              help="Only this session: its name or label, paths_uuid or a path's sess_uuid "
                   "(or a unique prefix of one).")
@click.option("--msg", "msg_filter", multiple=True, type=click.Choice(MESSAGE_KINDS),
              help="Only these message kinds (repeatable).")
@click.option("--errors", is_flag=True,
              help="Only failures: CM rejects, refused connections, failed IO (request "
                   "and response).")
@click.option("--device", default=None, metavar="ID|PATH|NAME",
              help="Only RNBD messages of this device: its id, the server's path "
                   "(/dev/ram0) or the client's name (rnbd0, from --kernel-log or "
                   "--device-map).")
@click.option("--op", default=None, type=click.Choice(RNBD_OPS + RNBD_CONTROL),
              help="Only this RNBD operation or control message.")
@click.option("--sector", "sectors", default=None, type=SectorRange(),
              help="Only RNBD IO touching these 512-byte sectors (N or FROM-TO).")
@click.option("--min-latency", "min_latency", default=None, type=click.FloatRange(0),
              metavar="US", help="Only requests and responses paired after at least US µs.")
@click.option("--other", is_flag=True,
              help="Also the SENDs and RDMA WRITEs of other RDMA protocols' connections "
                   "(message other: the protocol, the operation, its length).")
@kernel_log_option
def messages(captures, fmt, quiet, queue_depth, session_filter, msg_filter, errors, device, op,
             sectors, min_latency, other, kernel_logs, device_map):
    """One line per RTRS/RNBD message of CAPTURES (JSON lines with --format json).

    CAPTURES: files, - for standard input, directories: one capture, merged in time
    order; frames are numbered in the merged capture.

    Requests and their responses match --device, --op and --sector by the
    request's RNBD header.
    """
    from ..report import message_lines
    from ..report.messages import MessageView
    from ..analysis import analyze
    from ..analysis.naming import session_identity
    kept = MESSAGE_KINDS + (OTHER,) if other else True
    # no line shows a figure of the summary's latencies or queues: none of their
    # per-IO arrays are kept (a line's latency is its response's time less its request's)
    result = analyze_capture(list(captures), quiet, keep_messages=kept, queue_depth=queue_depth,
                             analyze=partial(analyze, keep_latencies=False))
    summary, lines = with_kernel_logs(result, kernel_logs, device_map)
    if summary is None:   # the lines name sessions and devices: all they keep of each
        head, sessions = result.summary_parts()
        summary = dict(head, sessions=[session_identity(s) for s in sessions])
    view = MessageView(summary, result.messages, lines)
    session = None if session_filter is None else \
        chosen(view.find_sessions, "--session", session_filter)
    device = None if device is None else chosen(view.find_device, "--device", device)
    selected = view.select(session=session, kinds=msg_filter, errors=errors, device=device,
                           op=op, sectors=sectors, min_latency_us=min_latency)
    unfiltered = session is None and not msg_filter and not errors and device is None \
        and op is None and sectors is None and min_latency is None
    if fmt != "json":
        click.echo(HEADER.rstrip())
    if unfiltered and message_lines.fast(view):
        for block in message_lines.MessageLines(view, result.messages).blocks(fmt):
            click.echo(block, nl=False)
    elif fmt == "json":
        echo_batches(json.dumps(view.as_json(record)) + "\n" for record in selected)
    else:
        echo_batches(view.line(record) + "\n" for record in selected)


@click.command()
@capture_argument
@click.option("--frame", "frame_no", type=click.IntRange(1), required=True,
              help="Frame number, 1-based like Wireshark.")
@queue_depth_option
def show(capture, frame_no, queue_depth):
    """Scapy's show() of one frame plus what the session state adds.

    The analysis stops soon after the frame; it reads the whole capture only when
    the rest can still change what the frame says (a request not answered by then,
    a queue depth inferred from the traffic).
    """
    from ..report.messages import frame_context, frame_settled
    result = analyze_capture(capture, True, keep_messages=True, queue_depth=queue_depth,
                             until_frame=frame_no)
    if not frame_settled(result.summary, result.messages, frame_no):
        result = analyze_capture(capture, True, keep_messages=True, queue_depth=queue_depth)
    packet, context = frame_context(result, capture, frame_no)
    if packet is None:
        raise click.ClickException("%s has no frame %d" % (capture, frame_no))
    click.echo(packet.show(dump=True), nl=False)
    click.echo("###[ RTRS session state ]###")
    for line in context:
        click.echo("  " + line)

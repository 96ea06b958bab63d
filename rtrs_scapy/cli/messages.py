"""``rtrs-dissect messages`` and ``show``: message by message, frame by frame."""

import json

import click

from .common import analyze_capture, capture_argument, format_option, queue_depth_option, \
    quiet_option

MESSAGE_KINDS = ("conn_req", "conn_rsp", "conn_rej", "info_req", "info_rsp", "read", "write",
                 "io_rsp", "rkey_rsp", "hb_msg", "hb_ack", "disconnect")


@click.command()
@capture_argument
@format_option
@quiet_option
@queue_depth_option
@click.option("--session", "session_filter", default=None,
              help="Only this session (name, paths_uuid or sess_uuid).")
@click.option("--msg", "msg_filter", multiple=True, type=click.Choice(MESSAGE_KINDS),
              help="Only these message kinds (repeatable).")
@click.option("--errors", is_flag=True, help="Only failed IO responses and rejects.")
def messages(capture, fmt, quiet, queue_depth, session_filter, msg_filter, errors):
    """One line per RTRS/RNBD message of CAPTURE (JSON lines with --format json)."""
    from ..report.messages import message_line, select
    result = analyze_capture(capture, quiet, keep_messages=True, queue_depth=queue_depth)
    for record in select(result, session_filter, msg_filter, errors):
        if fmt == "json":
            click.echo(json.dumps(record, default=str))
        else:
            click.echo(message_line(record))


@click.command()
@capture_argument
@click.option("--frame", "frame_no", type=click.IntRange(1), required=True,
              help="Frame number, 1-based like Wireshark.")
@queue_depth_option
def show(capture, frame_no, queue_depth):
    """Scapy's show() of one frame plus what the session state adds."""
    from ..report.messages import frame_context
    result = analyze_capture(capture, True, keep_messages=True, queue_depth=queue_depth)
    packet, context = frame_context(result, capture, frame_no)
    if packet is None:
        raise click.ClickException("%s has no frame %d" % (capture, frame_no))
    click.echo(packet.show(dump=True), nl=False)
    click.echo("###[ RTRS session state ]###")
    for line in context:
        click.echo("  " + line)

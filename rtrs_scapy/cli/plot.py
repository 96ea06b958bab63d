"""``rtrs-dissect plot KIND CAPTURE… -o FILE.png|.svg``: a figure of the report as
an image (matplotlib), for terminals, CI artifacts and bug reports."""

import click

from .common import OutputPath, captures_argument, quiet_option, queue_depth_option, writing
from .report import capture_view

FORMATS = ("png", "svg")


def _output(ctx, param, value):
    if value.rsplit(".", 1)[-1].lower() not in FORMATS:
        raise click.BadParameter("the file name must end in .png or .svg")
    return value


KINDS = ("timeline", "latency", "inflight", "load", "sizes", "heatmap", "ladder")


@click.command()
@click.argument("kind", metavar="KIND", type=click.Choice(KINDS))
@captures_argument
@click.option("-o", "--output", required=True, type=OutputPath(),
              callback=_output, help="The image: FILE.png or FILE.svg.")
@click.option("--session", help="Only this session (name or label, paths_uuid or a "
                                "sess_uuid, or a unique prefix of one).")
@click.option("--path", "path_",
              help="Only this path (sess_uuid, client address or CLIENT→SERVER).")
@click.option("--device", help="Only this RNBD device (id or name): sizes, heatmap.")
@quiet_option
@queue_depth_option
def plot(kind, captures, output, session, path_, device, quiet, queue_depth):
    """Draw one KIND of figure of CAPTURES into an image (PNG or SVG).

    CAPTURES: files, - for standard input, directories; several are one capture.

    \b
    timeline  IOPS, throughput and latency p50/p99 over time, with the events
    latency   latency histogram (log axis) and CDF, by RNBD operation and by path
    inflight  requests in flight over time per path, against the queue depth
    load      requests and bytes per path and connection (cid)
    sizes     IO size histogram per RNBD device
    heatmap   access pattern (sector × time) per RNBD device
    ladder    CM handshake and teardown of each path (REQ/REP/RTU, info, DREQ/DREP, REJ)
    """
    from ..report import plots
    from ..report.view import Selection
    view = capture_view(captures, quiet, queue_depth)
    try:
        chosen = Selection(view, session=session, path=path_, device=device)
    except LookupError as exc:
        raise click.UsageError(str(exc)) from None
    figure = plots.draw(kind, view, chosen)
    with writing(output):
        plots.save(figure, output)

"""What the commands that read many captures share: the inputs, ``--jobs`` and
``--dask`` (rtrs_scapy/parallel.py), the table list, and a clear word when the
``scale`` extra is not installed."""

import contextlib

import click

#: files, ``-`` (standard input), directories: one capture
captures_argument = click.argument("captures", nargs=-1, required=True,
                                   type=click.Path(allow_dash=True))


def run_options(command):
    """``--jobs N`` and ``--dask ADDRESS|local``."""
    command = click.option(
        "--dask", default=None, metavar="ADDRESS|local",
        help="Map the files on a Dask cluster (scheduler address, e.g. tcp://host:8786), "
             "or on a LocalCluster on this machine ('local', --jobs workers).")(command)
    return click.option(
        "--jobs", "-j", type=click.IntRange(1), default=None,
        help="Processes (or local Dask workers) that map the files in parallel "
             "[default: one per core].")(command)


def table_list(ctx, param, value):
    from ..tables.schema import TABLES
    if value is None:
        return TABLES
    wanted = [t.strip() for t in value.split(",") if t.strip()]
    unknown = [t for t in wanted if t not in TABLES]
    if unknown or not wanted:
        raise click.BadParameter("%s: tables are %s" % (", ".join(unknown) or "none",
                                                        ", ".join(TABLES)))
    return tuple(t for t in TABLES if t in wanted)


def scale_imports(dask=False):
    """pyarrow and duckdb (and distributed for --dask), or a one-line error."""
    needed = ("pyarrow", "duckdb") + (("distributed",) if dask else ())
    for name in needed:
        try:
            __import__(name)
        except ImportError:
            raise click.ClickException(
                "%s is missing: pip install 'rtrs-scapy[scale]'" % name) from None


@contextlib.contextmanager
def analysis_runner(captures, jobs, dask):
    """(inputs, analyze) for CAPTURES: one path or a list; ``analyze`` maps the
    files on ``jobs`` local processes or on Dask, reduces here, and turns an
    unreadable capture into a one-line error (exit 1)."""
    from ..analysis import CaptureError
    from .. import parallel
    if dask:
        scale_imports(dask=True)
        runner = parallel.dask_runner(dask, workers=jobs)
    else:
        runner = parallel.local_runner(jobs)
    inputs = captures[0] if len(captures) == 1 else list(captures)

    def analyze(*args, **kwargs):
        try:
            return run(*args, **kwargs)
        except CaptureError as exc:
            raise click.ClickException(str(exc)) from None

    with runner as run:
        yield inputs, analyze

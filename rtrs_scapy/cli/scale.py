"""What the commands that read many captures share: ``--jobs`` and ``--dask``
(rtrs_scapy/analysis/parallel.py), the table list, and a clear word when the ``scale``
extra is not installed."""

import contextlib

import click


def run_options(command):
    """``--jobs N`` and ``--dask ADDRESS|local``."""
    command = click.option(
        "--dask", default=None, metavar="ADDRESS|local",
        help="Map the files on a Dask cluster (scheduler address, e.g. tcp://host:8786), "
             "or on a LocalCluster on this machine ('local', --jobs workers).")(command)
    return click.option(
        "--jobs", "-j", type=click.IntRange(1), default=None,
        help="Processes (or local Dask workers) that map the files in parallel "
             "[default: one per core; 1: one after the other in this process].")(command)


def table_list(ctx, param, value):
    scale_imports("pyarrow")    # the table schemas are pyarrow's
    from ..tables.schema import TABLES
    if value is None:
        return TABLES
    wanted = [t.strip() for t in value.split(",") if t.strip()]
    unknown = [t for t in wanted if t not in TABLES]
    if unknown or not wanted:
        raise click.BadParameter("%s: tables are %s" % (", ".join(unknown) or "none",
                                                        ", ".join(TABLES)))
    return tuple(t for t in TABLES if t in wanted)


def scale_imports(*needed):
    """The modules ``needed`` of the ``scale`` extra (pyarrow, duckdb, distributed for
    --dask), or a one-line error; each command imports only its own (duckdb alone
    adds 17 MiB to a process)."""
    for name in needed:
        try:
            __import__(name)
        except ImportError:
            raise click.ClickException(
                "%s is missing: pip install 'rtrs-scapy[scale]'" % name) from None


@contextlib.contextmanager
def analysis_runner(jobs, dask):
    """What runs the analysis of several files: ``jobs`` local processes (one per
    core by default; 1: this process) or Dask (``--dask``)."""
    from ..analysis import parallel
    if dask:
        scale_imports("distributed")
        runner = parallel.dask_runner(dask, workers=jobs)
    else:
        runner = parallel.local_runner(jobs)
    with runner as run:
        yield run

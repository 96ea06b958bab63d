"""``rtrs-dissect export``: a capture's tables as Parquet files (docs/TABLES.md)."""

import os

import click

from .common import OutputPath, captures_argument, queue_depth_option, quiet_option, writing
from .scale import run_options, scale_imports, table_list

# Arrow's C allocator rather than its default (mimalloc or jemalloc): a row group's
# buffers go back to the system once written, where the default kept ~50 MiB of them
# resident (docs/export.md#memory).  Arrow reads it when it loads, so it is set as the
# command's module loads, before its options are parsed; a user's own choice stands.
os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")


@click.command()
@captures_argument
@click.option("--output", "-o", "out_dir", required=True,
              type=OutputPath(folder=True),
              help="Folder of the tables (a folder per table, created when missing).")
@click.option("--tables", "tables", default=None, callback=table_list, metavar="T1,T2",
              help="Tables to write (default: all of ios, messages, sessions, paths, events).")
@quiet_option
@queue_depth_option
@run_options
def export(captures, out_dir, tables, quiet, queue_depth, jobs, dask):
    """Write the tables of CAPTURES as Parquet into a folder.

    CAPTURES: files, - for standard input, directories; several are one capture,
    merged in time order (frames numbered in the merged capture); the files of a
    ring buffer are read in parallel (--jobs, --dask).  Tables: ios (one row per
    RTRS request), messages, sessions, paths, events; their columns are in
    docs/TABLES.md.  Each goes to DIR/TABLE/CAPTURE-HASH.parquet.
    """
    scale_imports("pyarrow")
    with writing(out_dir):
        done = write_tables(list(captures), out_dir, tables, quiet, queue_depth, jobs, dask)
    for table, path in done.files.items():
        click.echo("%-9s %9d rows  %s" % (table, done.rows[table], path))


def write_tables(captures, out_dir, tables, quiet, queue_depth, jobs, dask):
    """The export of CAPTURES through the CLI's analysis run (progress, errors)."""
    from ..tables.export import export as write
    from .common import analyze_capture
    from .scale import analysis_runner
    inputs = captures[0] if len(captures) == 1 else captures

    with analysis_runner(jobs, dask) as run:
        def analyze(inputs, keep_messages, queue_depth, io_sink, progress=None, **options):
            return analyze_capture(inputs, quiet, keep_messages, queue_depth=queue_depth,
                                   analyze=run, io_sink=io_sink, **options)
        return write(inputs, out_dir, tables=tables, analyze=analyze, queue_depth=queue_depth)

"""``rtrs-dissect export``: a capture's tables as Parquet files (docs/TABLES.md)."""

import click

from .common import queue_depth_option
from .scale import captures_argument, run_options, scale_imports, table_list


@click.command()
@captures_argument
@click.option("--output", "-o", "out_dir", required=True,
              type=click.Path(file_okay=False, writable=True),
              help="Folder of the tables (a folder per table, created when missing).")
@click.option("--tables", "tables", default=None, callback=table_list, metavar="T1,T2",
              help="Tables to write (default: all of ios, messages, sessions, paths, events).")
@queue_depth_option
@run_options
def export(captures, out_dir, tables, queue_depth, jobs, dask):
    """Write the tables of CAPTURES as Parquet into a folder.

    CAPTURES: files, - for standard input, directories; several are one capture,
    merged in time order (frames numbered in the merged capture).  Tables: ios
    (one row per RTRS request), messages, sessions, paths, events; their columns
    are in docs/TABLES.md.  Each goes to DIR/TABLE/CAPTURE-HASH.parquet.
    """
    scale_imports()
    from ..tables.export import export as write
    from .scale import analysis_runner
    with analysis_runner(captures, jobs, dask) as (inputs, analyze):
        done = write(inputs, out_dir, tables=tables, analyze=analyze, queue_depth=queue_depth)
    for table, path in done.files.items():
        click.echo("%-9s %9d rows  %s" % (table, done.rows[table], path))

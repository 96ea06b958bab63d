"""tables/encoding.py: pieces whose texts are dictionaries (arrays.py) or plain, written
into one Parquet file that reads as the table's schema, the heap trimmed after each
row group."""

import os

import pyarrow as pa
import pyarrow.parquet as pq

from conftest import real_pcap
from rtrs_scapy.tables import encoding
from rtrs_scapy.tables.encoding import Encoder, arriving
from rtrs_scapy.tables.export import export
from rtrs_scapy.tables.schema import JSON_TEXTS, schema


def test_pieces_of_dictionaries_and_of_strings_make_one_file_of_the_tables_schema(
        tmp_path, monkeypatch):
    done = export(str(real_pcap("basic_inval")), str(tmp_path / "tables"),
                  tables=("messages",))
    rows = pq.read_table(done.files["messages"])
    first, second = rows.slice(0, 100), rows.slice(100, 50)
    columns = {name: first.column(name).combine_chunks() for name in first.column_names}
    for name in ("capture", "session", "src", "dst", "msg"):     # as message_table.py makes them
        columns[name] = columns[name].dictionary_encode()
    fields = schema("messages")
    as_made = pa.Table.from_arrays([columns[f.name] for f in fields],
                                   schema=arriving(fields, columns))
    assert pa.types.is_dictionary(as_made.schema.field("src").type)
    assert not pa.types.is_dictionary(as_made.schema.field("fields").type)
    trims = []
    monkeypatch.setattr(encoding, "_trim_heap", lambda: trims.append(0))
    encoder = Encoder(str(tmp_path / "again.parquet"), "messages")
    encoder.write(as_made)
    encoder.write(second)       # plain strings after dictionaries: cast to them
    encoder.close()
    again = pq.ParquetFile(tmp_path / "again.parquet")
    assert again.schema_arrow.equals(schema("messages"), check_metadata=True)
    assert again.read().equals(pa.concat_tables([first, second]))
    assert again.metadata.num_row_groups == 2 and trims == [0, 0]
    assert again.metadata.metadata == pq.ParquetFile(done.files["messages"]).metadata.metadata


def test_no_piece_makes_a_file_of_no_rows(tmp_path):
    encoder = Encoder(str(tmp_path / "none.parquet"), "events")
    encoder.close()
    empty = pq.read_table(tmp_path / "none.parquet")
    assert empty.num_rows == 0 and empty.schema.equals(schema("events"), check_metadata=True)


def test_the_heap_is_trimmed_only_above_its_bound(monkeypatch):
    """The C heap's free pages go back to the system after a row group only while the
    process holds more than TRIM_ABOVE: below it they are kept for the next row group,
    which would fault every page in again."""
    trim_heap = encoding._heap_trimmer()
    with open("/proc/self/statm", "rb") as statm:
        resident = int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    monkeypatch.setattr(encoding, "TRIM_ABOVE", resident * 4)
    assert trim_heap() is False
    monkeypatch.setattr(encoding, "TRIM_ABOVE", 0)
    assert trim_heap() is True


def test_statistics_for_every_column_but_the_json_texts(tmp_path):
    """A column's min and max let a reader skip row groups; of a JSON text they prune
    nothing (a filter parses the object), and computing them took an eighth of the
    messages table's encoding."""
    done = export(str(real_pcap("basic_inval")), str(tmp_path / "tables"))
    for table, path in done.files.items():
        group = pq.ParquetFile(path).metadata.row_group(0)
        with_statistics = {group.column(k).path_in_schema for k in range(group.num_columns)
                           if group.column(k).is_stats_set}
        names = set(schema(table).names)
        assert with_statistics == names - JSON_TEXTS, table
    assert {"fields", "rnbd"} <= set(schema("messages").names) & JSON_TEXTS

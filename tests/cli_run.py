"""``rtrs-dissect`` run in this process (click's runner), for the tests that read its
output: a Python exception fails the test at once, an exit with a message does not."""

from click.testing import CliRunner

from rtrs_scapy.cli import main


def run(*args):
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        result.exception
    return result

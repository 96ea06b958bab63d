"""The suite refuses skips (tests/no_skips.py): each way of skipping fails the run."""

from pathlib import Path

import pytest

import no_skips

SKIPPING = {
    "skip_call": "import pytest\ndef test_a():\n    pytest.skip('no luac')\n",
    "skipif_mark": "import pytest\n@pytest.mark.skipif(True, reason='no luac')\n"
                   "def test_a():\n    pass\n",
    "xfail_mark": "import pytest\n@pytest.mark.xfail(reason='no luac')\n"
                  "def test_a():\n    assert False\n",
    "module_skip": "import pytest\npytest.importorskip('no_such_module_anywhere')\n"
                   "def test_a():\n    pass\n",
    "empty_params": "import pytest\n@pytest.mark.parametrize('x', [])\n"
                    "def test_a(x):\n    pass\n",
}


@pytest.mark.parametrize("kind", sorted(SKIPPING))
def test_a_skip_fails_the_session(pytester, kind):
    pytester.makepyfile(**{"test_%s" % kind: SKIPPING[kind]})
    result = pytester.runpytest("-p", "no_skips")
    # a failed test (exit 1), or a failed collection that stops the run (exit 2)
    assert result.ret in (pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.INTERRUPTED)
    outcomes = result.parseoutcomes()
    assert "skipped" not in outcomes and "xfailed" not in outcomes
    result.stdout.fnmatch_lines(["*skipped tests are failures in this suite*"])


def test_a_passing_test_still_passes(pytester):
    pytester.makepyfile(test_ok="def test_a():\n    assert 1 + 1 == 2\n")
    result = pytester.runpytest("-p", "no_skips")
    assert result.ret == pytest.ExitCode.OK
    assert result.parseoutcomes() == {"passed": 1}


@pytest.mark.parametrize("kind", ["skip_call", "module_skip"])
def test_a_skip_on_an_xdist_worker_fails_the_session(pytester, kind):
    """The suite runs on pytest-xdist workers (setup.cfg ``-n auto``): a skip in a test or
    while collecting a module there fails the session as well.  The plugin is loaded as
    tests/conftest.py loads it, from beside the conftest (the workers import it there)."""
    pytester.makepyfile(no_skips=Path(no_skips.__file__).read_text(encoding="utf-8"))
    pytester.makeconftest('pytest_plugins = ["no_skips"]\n')
    pytester.makepyfile(**{"test_%s" % kind: SKIPPING[kind]})
    result = pytester.runpytest("-n", "2")
    assert result.ret in (pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.INTERRUPTED)
    outcomes = result.parseoutcomes()
    assert "skipped" not in outcomes
    result.stdout.fnmatch_lines(["*skipped tests are failures in this suite*"])

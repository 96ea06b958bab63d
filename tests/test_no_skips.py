"""The suite refuses skips (tests/no_skips.py): each way of skipping fails the run, and
so does each skip in disguise (a return, a block on a tool, a list of files filtered by
their existence)."""

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


#: skips in disguise: the test passes having asserted nothing where something is missing
DISGUISED = {
    "early_return": "import shutil\ndef test_a():\n    if not shutil.which('luac'):\n"
                    "        return\n    assert 1\n",
    "tool_block": "import shutil\nLUAC = shutil.which('no-such-tool')\ndef test_a():\n"
                  "    if LUAC:\n        assert 1\n",
    "imported_tool_block": "from tools import LUAC\ndef test_a():\n"
                           "    assert 1 if LUAC else None\n",
    "filtered_params": "import pytest\nfrom pathlib import Path\n"
                       "@pytest.mark.parametrize('p', [p for p in (Path('a'), Path('b')) "
                       "if p.exists()])\ndef test_a(p):\n    assert p\n",
    "filtered_loop": "from pathlib import Path\ndef test_a():\n    for p in (Path('a'),):\n"
                     "        if p.is_file():\n            assert p.read_text()\n",
}


@pytest.mark.parametrize("kind", sorted(DISGUISED))
def test_a_skip_in_disguise_fails_the_module(pytester, kind):
    pytester.makepyfile(tools="import shutil\nLUAC = shutil.which('no-such-tool')\n")
    pytester.makepyfile(**{"test_%s" % kind: DISGUISED[kind]})
    result = pytester.runpytest("-p", "no_skips")
    assert result.ret in (pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.INTERRUPTED)
    assert "passed" not in result.parseoutcomes()
    result.stdout.fnmatch_lines(["*skips in disguise*", "*line *"])


def test_what_is_not_a_skip_in_disguise():
    """A helper's return, a nested function's, an existence check that is asserted, a
    directory walked for what it holds: none of them leaves a test out."""
    source = ("import shutil\nfrom pathlib import Path\nTOOL = shutil.which('x')\n"
              "def helper():\n    return 1\n"
              "def test_a():\n    def inner():\n        return 2\n"
              "    assert TOOL and inner() == 2\n    assert Path('a').exists()\n"
              "    assert [p for p in Path('.').iterdir() if p.is_dir()] is not None\n")
    assert no_skips.disguised_skips(source) == []


def test_the_suite_has_no_skip_in_disguise():
    folder = Path(__file__).parent
    found = {p.name: no_skips.disguised_skips(p.read_text(encoding="utf-8"), folder)
             for p in sorted(folder.glob("test_*.py"))}
    assert {name: hits for name, hits in found.items() if hits} == {}
    assert len(found) > 50


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
    result = pytester.runpytest("-n", "1")   # one worker: still a worker, half the start
    assert result.ret in (pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.INTERRUPTED)
    outcomes = result.parseoutcomes()
    assert "skipped" not in outcomes
    result.stdout.fnmatch_lines(["*skipped tests are failures in this suite*"])

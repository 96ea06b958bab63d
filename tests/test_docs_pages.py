"""README.md and the pages of docs/: what they show is what the commands print.

* Every block marked ``<!-- output: COMMAND -->`` shows ``$ COMMAND`` and then that
  command's output; the command is run again (once per session, from a folder where
  ``pcaps``, ``wireshark`` and ``docs`` are the repository's) and its stdout must be the block.
* Every ``<!-- doctest -->`` Python session runs as shown.
* Every relative link and ``#anchor`` of those pages resolves (GitHub's anchor rules).
* The README fits on a screen, and its table of commands is the click group's.
* Every command's page shows its options (its ``--help``, held fresh as above).
* The man pages are generated for every command and ``man -l`` renders the main one.
* click's shell completion scripts are produced.
"""

import doctest
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest

from conftest import REPO
from markdown_util import anchors, github_anchor, prose
from rtrs_scapy.cli import main

README = REPO / "README.md"
PAGES = [README] + sorted((REPO / "docs").glob("*.md"))
BIN = Path(sys.executable).parent

#: the group's commands, in the order of ``rtrs-dissect --help``
COMMANDS = main.list_commands(click.Context(main, info_name="rtrs-dissect"))

#: the environment of every command: this interpreter's scripts first, 80 columns
ENV = dict(os.environ, PATH="%s%s%s" % (BIN, os.pathsep, os.environ.get("PATH", "")),
           COLUMNS="80", PYTHONIOENCODING="utf-8")

OUTPUT = re.compile(r"^<!-- output: (.+?) -->\n```[\w-]*\n(.*?)^```$", re.S | re.M)


def rel(path):
    return str(path.relative_to(REPO))


def output_blocks():
    """(page, command, block text) of every marked block, in page order."""
    found = []
    for page in PAGES:
        for match in OUTPUT.finditer(page.read_text(encoding="utf-8")):
            found.append((page, match.group(1), match.group(2)))
    return found


BLOCKS = output_blocks()


def normal(text):
    """Trailing blanks of lines and of the text do not count."""
    return "\n".join(line.rstrip() for line in text.rstrip("\n").splitlines())


@pytest.fixture(scope="session")
def run_command(tmp_path_factory):
    """Runs a page's command once per session in a scratch folder; stdout, stderr, code."""
    workdir = tmp_path_factory.mktemp("docs-outputs")
    for name in ("pcaps", "wireshark", "docs"):
        (workdir / name).symlink_to(REPO / name)
    done = {}

    def run(command):
        if command not in done:
            proc = subprocess.run(["bash", "-c", command], cwd=workdir, env=ENV,
                                  capture_output=True, text=True, timeout=300)
            done[command] = (proc.stdout, proc.stderr, proc.returncode)
        return done[command]
    return run


def test_pages_have_output_blocks():
    pages = {page for page, _, _ in BLOCKS}
    assert README in pages
    assert len(BLOCKS) >= 20


@pytest.mark.parametrize("page,command,block", BLOCKS,
                         ids=["%s: %s" % (rel(p), c.splitlines()[0][:60]) for p, c, _ in BLOCKS])
def test_shown_output_is_the_commands(page, command, block, run_command):
    shown = "$ " + command + "\n"
    assert block.startswith(shown), "%s: the block must begin with %r" % (rel(page), shown)
    stdout, stderr, code = run_command(command)
    assert stdout.strip(), "%s: %r printed nothing (exit %d): %s" % (
        rel(page), command, code, stderr[-2000:])
    assert normal(block[len(shown):]) == normal(stdout)


DOCTEST = re.compile(r"^<!-- doctest -->\n```python\n(.*?)^```$", re.S | re.M)
SESSIONS = [(page, match.group(1)) for page in PAGES
            for match in DOCTEST.finditer(page.read_text(encoding="utf-8"))]


@pytest.mark.parametrize("page,session", SESSIONS, ids=[rel(p) for p, _ in SESSIONS])
def test_shown_python_session_runs(page, session, monkeypatch):
    """A ``<!-- doctest -->`` session runs as shown, from the repository root."""
    monkeypatch.chdir(REPO)
    test = doctest.DocTestParser().get_doctest(session, {}, rel(page), rel(page), 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    report = io.StringIO()
    result = runner.run(test, out=report.write)
    assert result.attempted > 0 and result.failed == 0, report.getvalue()


# --- links ------------------------------------------------------------------------

def test_github_anchor_rules():
    assert github_anchor("The engine's compilation") == "the-engines-compilation"
    assert github_anchor("Many files: local cores and a Dask cluster") == \
        "many-files-local-cores-and-a-dask-cluster"
    assert anchors("# A\n```\n# not\n```\n## A\n") == ["a", "a-1"]


LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_relative_links_resolve(page):
    text = page.read_text(encoding="utf-8")
    broken = []
    for line in prose(text):
        for target in LINK.findall(line):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.exists():
                broken.append(target)
            elif anchor and linked.suffix == ".md" and \
                    anchor not in anchors(linked.read_text(encoding="utf-8")):
                broken.append(target)
    assert broken == [], "%s: links that do not resolve: %s" % (rel(page), broken)


def test_every_page_is_linked_from_the_readme_or_a_page():
    linked = set()
    for page in PAGES:
        for line in prose(page.read_text(encoding="utf-8")):
            for target in LINK.findall(line):
                path = target.partition("#")[0]
                if path and not re.match(r"[a-z]+:", path):
                    linked.add((page.parent / path).resolve())
    assert [rel(p) for p in PAGES[1:] if p.resolve() not in linked] == []


# --- the README -------------------------------------------------------------------

def test_readme_fits_on_a_screen():
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 250


def readme_command_table():
    text = README.read_text(encoding="utf-8")
    section = text.split("\n## Commands\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| \[`([\w-]+)`\]\(docs/([\w-]+)\.md\) \| \S", section, re.M)


def test_readme_commands_are_the_groups():
    table = readme_command_table()
    assert [name for name, _ in table] == COMMANDS
    assert all(name == page for name, page in table)


def test_the_two_commands_are_in_the_readme():
    text = README.read_text(encoding="utf-8")
    assert "scripts/dissect.sh " in text and "scripts/test.sh " in text
    assert (REPO / "scripts" / "dissect.sh").exists() and (REPO / "scripts" / "test.sh").exists()


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_page_shows_its_options(command):
    """Its ``--help`` (held fresh by test_shown_output_is_the_commands)."""
    shown = {c for p, c, _ in BLOCKS if p == REPO / "docs" / (command + ".md")}
    assert "rtrs-dissect %s --help" % command in shown


# --- man pages and completion ---------------------------------------------------------

def command_paths(group, prefix="rtrs-dissect"):
    """Every command path of the group, subgroups' commands included."""
    from rtrs_scapy.cli.man import resolved
    paths = [prefix]
    for name, command in resolved(group).commands.items():
        if isinstance(command, click.Group):
            paths += command_paths(command, prefix + "-" + name)
        else:
            paths.append(prefix + "-" + name)
    return paths


def test_man_pages_for_every_command(tmp_path):
    done = subprocess.run([sys.executable, "-m", "rtrs_scapy.cli.man", str(tmp_path)],
                          capture_output=True, text=True, cwd=REPO, env=ENV)
    assert done.returncode == 0, done.stderr
    expected = sorted(command_paths(main))
    assert "rtrs-dissect-wireshark-export" in expected and len(expected) >= len(COMMANDS) + 1
    assert sorted(p.stem for p in tmp_path.glob("*.1")) == expected
    assert sorted(done.stdout.split()) == sorted(str(tmp_path / (n + ".1")) for n in expected)
    env = dict(ENV, MANPAGER="cat", PAGER="cat", MANWIDTH="80")
    shown = subprocess.run(["man", "-l", str(tmp_path / "rtrs-dissect.1")],
                           capture_output=True, text=True, env=env)
    assert shown.returncode == 0, shown.stderr
    assert "RTRS-DISSECT(1)" in shown.stdout and "Decode and summarise" in shown.stdout
    for command in COMMANDS:
        assert "rtrs-dissect-%s(1)" % command in shown.stdout
    sub = subprocess.run(["man", "-l", str(tmp_path / "rtrs-dissect-summary.1")],
                         capture_output=True, text=True, env=env)
    assert sub.returncode == 0 and "--queue-depth" in sub.stdout


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_script(shell):
    done = subprocess.run([str(BIN / "rtrs-dissect")], capture_output=True, text=True,
                          env=dict(ENV, _RTRS_DISSECT_COMPLETE=shell + "_source"))
    assert done.returncode == 0, done.stderr
    assert "_RTRS_DISSECT_COMPLETE" in done.stdout and "rtrs-dissect" in done.stdout


def test_completion_of_a_command_name():
    done = subprocess.run([str(BIN / "rtrs-dissect")], capture_output=True, text=True,
                          env=dict(ENV, _RTRS_DISSECT_COMPLETE="bash_complete",
                                   COMP_WORDS="rtrs-dissect su", COMP_CWORD="1"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["plain,summary"]

"""pytest plugin: a skipped test is a failed test.

On the README's set-up (scripts/test.sh installs tshark, luac5.2, the package and its
test extras) every test can run, so a skip can only mean that something is missing:
it must fail the session loudly instead of hiding in a count.  Skips raised while
collecting a module (``pytest.importorskip``, an empty parameter set) and inside a
test (``pytest.skip``, ``skipif``, ``xfail``) all become failures.

Skips in disguise pass without asserting anything; they are read off each test
module's source when it is collected (``disguised_skips``), and fail its collection:

* a ``return`` in a test function (the rest of the test left out);
* an ``if`` in a test function on a tool looked up with ``shutil.which`` (``if TSHARK:``:
  the block left out where the tool is missing);
* a fixed list of files filtered by their existence (``[p for p in (a, b) if
  p.exists()]``, or the same as a ``for`` loop): the test runs on fewer files.
"""

import ast
from pathlib import Path

import pytest

ADVICE = ("skipped tests are failures in this suite: run it through scripts/test.sh, "
          "which installs everything the tests need")
EXISTENCE = ("exists", "is_file", "is_dir")


def _reason(report):
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:  # (file, line, message)
        return longrepr[2]
    return str(longrepr)


def _as_failure(report):
    report.longrepr = "%s\n%s skipped: %s" % (ADVICE, report.nodeid, _reason(report))
    report.outcome = "failed"
    if hasattr(report, "wasxfail"):
        del report.wasxfail


def _tool_names(tree, folder):
    """Names bound to ``shutil.which(...)`` here or in the module beside it they come from."""
    names = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) \
                and ast.unparse(node.value.func).split(".")[-1] == "which":
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.ImportFrom) and node.module and folder is not None:
            source = folder / (node.module + ".py")
            if source.is_file():
                theirs = _tool_names(ast.parse(source.read_text(encoding="utf-8")), None)
                names |= {a.asname or a.name for a in node.names if a.name in theirs}
    return names


def _own_nodes(function):
    """The nodes of a function's body, without those of functions defined in it."""
    stack = list(function.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def _existence_filter(test):
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
               and n.func.attr in EXISTENCE for n in ast.walk(test))


def _fixed_list(node):
    return isinstance(node, (ast.List, ast.Tuple))


def disguised_skips(source, folder=None):
    """[(line, what)] of the skips in disguise in a test module's source."""
    tree = ast.parse(source)
    tools = _tool_names(tree, folder)
    found = []
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                or not function.name.startswith("test"):
            continue
        for node in _own_nodes(function):
            if isinstance(node, ast.Return):
                found.append((node.lineno, "return in %s" % function.name))
            elif isinstance(node, (ast.If, ast.IfExp)) and any(
                    isinstance(n, ast.Name) and n.id in tools for n in ast.walk(node.test)):
                found.append((node.lineno, "if on a tool (%s) in %s" % (
                    ast.unparse(node.test), function.name)))
    for node in ast.walk(tree):
        if isinstance(node, ast.comprehension) and _fixed_list(node.iter):
            found += [(cond.lineno, "a fixed list filtered by %s" % ast.unparse(cond))
                      for cond in node.ifs if _existence_filter(cond)]
        elif isinstance(node, ast.For) and _fixed_list(node.iter):
            found += [(inner.lineno, "a fixed list filtered by %s" % ast.unparse(inner.test))
                      for inner in node.body
                      if isinstance(inner, ast.If) and _existence_filter(inner.test)]
    return sorted(found)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped:
        _as_failure(report)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    report = outcome.get_result()
    if report.skipped:
        _as_failure(report)
    elif isinstance(collector, pytest.Module) and report.passed:
        path = Path(collector.path)
        found = disguised_skips(path.read_text(encoding="utf-8"), path.parent)
        if found:
            report.outcome = "failed"
            report.longrepr = "%s: skips in disguise (a test that asserts nothing where " \
                "something is missing):\n%s" % (collector.nodeid, "\n".join(
                    "  line %d: %s" % hit for hit in found))

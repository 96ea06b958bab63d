"""pytest plugin: a skipped test is a failed test.

On the README's set-up (scripts/test.sh installs tshark, luac5.2, the package and its
test extras) every test can run, so a skip can only mean that something is missing:
it must fail the session loudly instead of hiding in a count.  Skips raised while
collecting a module (``pytest.importorskip``, an empty parameter set) and inside a
test (``pytest.skip``, ``skipif``, ``xfail``) all become failures.
"""

import pytest

ADVICE = ("skipped tests are failures in this suite: run it through scripts/test.sh, "
          "which installs everything the tests need")


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

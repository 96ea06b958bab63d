"""The check that runs before the suite (tests/installed.py) reads setup.cfg."""

from installed import missing, requirements


def test_the_check_names_what_the_package_and_its_tests_ask_for():
    wanted = set(requirements())
    assert {"scapy", "numba", "numpy", "click", "pytest", "hypothesis", "selenium"} <= wanted
    assert {"pyarrow", "duckdb", "dask", "distributed"} <= wanted   # via rtrs-scapy[scale]
    assert "rtrs-scapy" not in wanted


def test_this_environment_has_everything():
    assert missing() == []

"""The check that runs before the suite (tests/installed.py) reads setup.cfg."""

from installed import missing, requirements


def test_the_check_names_what_the_package_and_its_tests_ask_for():
    wanted = set(requirements())
    assert {"scapy", "numba", "numpy", "click", "pytest", "hypothesis", "selenium"} <= wanted
    assert {"pyarrow", "duckdb", "dask", "distributed"} <= wanted   # via rtrs-scapy[scale]
    assert "rtrs-scapy" not in wanted


def test_this_environment_has_everything():
    assert missing() == []


def test_the_set_up_asks_it_before_running_pip():
    """scripts/setup-venv.sh runs pip again only when setup.cfg changed or when
    ``python tests/installed.py EXTRAS`` exits 1 (something they ask for is missing)."""
    import subprocess
    import sys
    from pathlib import Path
    script = Path(__file__).with_name("installed.py")
    for extras in ("test", "scale", ""):
        assert subprocess.run([sys.executable, str(script), extras]).returncode == 0, extras

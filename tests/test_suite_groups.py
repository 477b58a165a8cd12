"""The suite's own scheduling: tests marked `xdist_group` run on one pytest-xdist worker.

The fault tests rely on it (they share a Redis database and loopback ports), so a pytest or
pytest-xdist upgrade that quietly stops grouping must fail here rather than as a flaky fault
test. The check runs a small suite of its own in a subprocess, outside Django.
"""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

GROUPED = textwrap.dedent("""
    import os
    import time

    import pytest

    @pytest.mark.xdist_group("together")
    @pytest.mark.parametrize("n", range(6))
    def test_grouped(n):
        time.sleep(0.05)
        out = os.environ["GROUP_OUT"]
        with open(os.path.join(out, f"grouped-{n}"), "w") as f:
            f.write(os.environ["PYTEST_XDIST_WORKER"])

    @pytest.mark.parametrize("n", range(6))
    def test_free(n):
        time.sleep(0.05)
""")


def test_tests_marked_with_one_xdist_group_all_run_on_one_worker(tmp_path: Path):
    suite = tmp_path / "suite"
    out = tmp_path / "out"
    suite.mkdir()
    out.mkdir()
    (suite / "test_grouped.py").write_text(GROUPED)
    (suite / "pytest.ini").write_text("[pytest]\n")
    env = {**os.environ, "GROUP_OUT": str(out)}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:django", "-p", "no:cacheprovider",
         "-n", "2", "--dist", "loadgroup", str(suite)],
        cwd=suite, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    workers = {p.name: p.read_text() for p in out.iterdir()}
    assert len(workers) == 6
    assert len(set(workers.values())) == 1, f"the grouped tests ran on several workers: {workers}"

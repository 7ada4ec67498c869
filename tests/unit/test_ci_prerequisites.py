"""Under CI a missing prerequisite fails the Mininet tests instead of skipping them
(tests/conftest.py). Runs pytest on one Mininet test file with Open vSwitch hidden from PATH and
reads the outcome from its JUnit XML report."""
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ONE_MININET_TEST = "tests/integration/test_teardown.py"


def outcome_without_ovs(tmp_path: Path, ci: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PATH"] = "/nonexistent"  # no ovs-vsctl, no mnexec
    if ci:
        env["CI"] = "1"
    report = tmp_path / "report.xml"
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                    f"--junitxml={report}", ONE_MININET_TEST], cwd=REPO, env=env,
                   capture_output=True, timeout=120)
    suite = ET.parse(report).getroot().find("testsuite")
    messages = [f.get("message", "") for f in suite.iter("failure")] + \
               [e.get("message", "") for e in suite.iter("error")]
    return {"tests": int(suite.get("tests")), "skipped": int(suite.get("skipped")),
            "failed": int(suite.get("failures")) + int(suite.get("errors")), "messages": messages}


def test_missing_ovs_fails_under_ci(tmp_path):
    r = outcome_without_ovs(tmp_path, ci=True)
    assert r["tests"] > 0 and r["skipped"] == 0 and r["failed"] == r["tests"], r
    assert all("a Mininet prerequisite is missing" in m for m in r["messages"]), r


def test_missing_ovs_skips_outside_ci(tmp_path):
    r = outcome_without_ovs(tmp_path, ci=False)
    assert r["tests"] > 0 and r["failed"] == 0 and r["skipped"] == r["tests"], r

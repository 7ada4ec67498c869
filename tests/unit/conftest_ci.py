"""The project's rule for a missing prerequisite in a unit test: skipped with the reason on a
developer's machine, failed under CI (the `CI` environment variable set), so a broken CI machine
cannot pass by skipping."""
import os

import pytest


def missing_or_fail(why: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"CI is set and a prerequisite is missing: {why}", pytrace=False)
    pytest.skip(why)

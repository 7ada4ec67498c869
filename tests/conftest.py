import os
import shutil

import pytest


def pytest_collection_modifyitems(config, items):
    """Mininet tests need root and Open vSwitch; say so plainly instead of failing obscurely."""
    why = None
    if os.geteuid() != 0:
        why = "needs root (Mininet, OVS, raw sockets)"
    elif shutil.which("ovs-vsctl") is None or shutil.which("mnexec") is None:
        why = "needs Open vSwitch and Mininet (make deps)"
    if why:
        for item in items:
            if "mininet" in item.keywords:
                item.add_marker(pytest.mark.skip(reason=why))

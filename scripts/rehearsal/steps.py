"""The deployment's steps, in order: the one list that docs/deploy.md and the rehearsal share.

docs/deploy.md has one section per step, headed `## Step N: <title>` in this order
(deploy_doc_problems checks it, tests/unit/test_rehearsal.py runs the check), and the rehearsal
(main.py) runs the steps from this list, so the guide and the rehearsal cannot drift apart.
START_ORDER is the part of it that docs/operations.md's "Start order" lists (checked the same way).
"""
from __future__ import annotations

import re
from typing import NamedTuple


class Step(NamedTuple):
    key: str    # the rehearsal's function for it: main.py STEP_FUNCTIONS[key]
    title: str  # the heading in docs/deploy.md


STEPS = (
    Step("install", "Install the package"),
    Step("config", "Write the cluster config"),
    Step("certs", "Make the certificates"),
    Step("firewall", "Firewall the management network"),
    Step("switch", "Set up the switch"),
    Step("controller", "Start the controller"),
    Step("db_nodes", "Start the db nodes"),
    Step("cache_nodes", "Start the cache nodes"),
    Step("proxies", "Start the proxies"),
    Step("metrics", "Scrape the metrics"),
    Step("smoke", "Check the cluster through a proxy"),
)
# What docs/operations.md's "Start order on real hardware" names, item by item, in this order.
START_ORDER = (("switch", "Switch"), ("controller", "Controller"), ("db_nodes", "Db nodes"),
               ("cache_nodes", "Cache nodes"), ("proxies", "Proxies"))

_HEADING = re.compile(r"^## Step (\d+): (.+?)\s*$", re.M)
_START_ITEM = re.compile(r"^(\d+)\. \*\*(.+?)\*\*", re.M)


def deploy_doc_problems(text: str) -> list[str]:
    """What differs between docs/deploy.md's `## Step N: title` headings and STEPS."""
    found = [(int(n), title) for n, title in _HEADING.findall(text)]
    want = [(i, s.title) for i, s in enumerate(STEPS, 1)]
    if found == want:
        return []
    out = [f"step {n}: docs/deploy.md has {t!r}" for n, t in found if (n, t) not in want]
    out += [f"step {n}: missing `## Step {n}: {t}`" for n, t in want if (n, t) not in found]
    return out or ["the steps are in another order than scripts/rehearsal/steps.py STEPS"]


def start_order_problems(operations_md: str) -> list[str]:
    """What differs between the numbered **bold** items of docs/operations.md's "Start order on real
    hardware" section and START_ORDER."""
    m = re.search(r"^## Start order on real hardware\n(.*?)(?=^## )", operations_md, re.M | re.S)
    if not m:
        return ["docs/operations.md: no '## Start order on real hardware' section"]
    found = [name for _, name in _START_ITEM.findall(m.group(1))]
    want = [name for _, name in START_ORDER]
    return [] if found == want else [f"docs/operations.md start order is {found}, want {want}"]

"""`exo down`: stop a cluster `exo up` started. SIGTERM to its supervisor, which tears the
cluster down (supervisor.py); then a sweep for anything left (cleanup.py), which is also all
there is to do when the supervisor was killed with SIGKILL. Removes the state file.

Exit status: 0 when the cluster is down (or nothing was up), 1 when something could not be
removed (it is listed), 2 when the cluster to stop cannot be chosen."""
from __future__ import annotations

import os
import signal
import time
from typing import Optional

from . import state
from .cleanup import cleanup


def down(cluster: Optional[str], timeout: float) -> int:
    states, problems = state.all_states()
    for p in problems:
        print(f"exo down: ignoring {p}")
    st = state.choose(states, cluster)
    if st is None:
        print(f"cluster {cluster!r} is not up (no state file {state.state_path(cluster)})" if cluster
              else f"nothing is up (no state file in {state.state_dir()})")
        return 0
    sup = st.data.get("supervisor") or {}
    pid, start = sup.get("pid"), sup.get("start")
    t0 = time.monotonic()
    if st.supervisor_alive():
        print(f"stopping cluster {st.cluster!r}: SIGTERM to its supervisor (pid {pid}), which tears it down",
              flush=True)
        os.kill(pid, signal.SIGTERM)
        next_note = 5.0
        while state.same_process(pid, start):
            waited = time.monotonic() - t0
            if waited > timeout:
                print(f"  the supervisor did not finish within {timeout:g} s (see {st.log}): SIGKILL, "
                      "then cleaning up after it", flush=True)
                os.kill(pid, signal.SIGKILL)
                break
            if waited >= next_note:
                print(f"  still tearing down ({waited:.0f} s)", flush=True)
                next_note += 5.0
            time.sleep(0.2)
        else:
            print(f"  supervisor done in {time.monotonic() - t0:.1f} s", flush=True)
    else:
        print(f"the supervisor of cluster {st.cluster!r} (pid {pid}) is gone: cleaning up what it left",
              flush=True)
    left = cleanup(st.data)
    state.remove(st.path)
    if left:
        print(f"cluster {st.cluster!r}: could not remove: {'; '.join(left)}")
        return 1
    print(f"cluster {st.cluster!r} is down (logs stay in {st.run_dir})")
    return 0

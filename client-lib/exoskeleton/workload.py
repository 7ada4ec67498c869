# moved to exo_harness; kept until callers are updated (`python -m exoskeleton.workload` too)
from exo_harness.workload import *  # noqa: F401,F403
from exo_harness.workload import main

if __name__ == "__main__":
    raise SystemExit(main())

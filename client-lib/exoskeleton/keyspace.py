# moved to exo_harness; kept until callers are updated
from exo_harness.keyspace import *  # noqa: F401,F403

# moved to exo_harness; kept until callers are updated
from exo_harness.history import *  # noqa: F401,F403

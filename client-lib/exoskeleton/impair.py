# moved to exo_harness; kept until callers are updated
from exo_harness.impair import *  # noqa: F401,F403

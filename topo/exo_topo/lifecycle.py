"""`with thing:` for objects that have start() and stop(): start() on entering, stop() on leaving,
and stop() also when start() fails half-way (an exception or Ctrl-C), so a half-started cluster or
server leaves nothing behind. stop() must therefore cope with a start() that got anywhere.
Shared by EmulatedCluster (cluster.py) and PrometheusServer (prometheus.py)."""
from __future__ import annotations

from typing import Self


class StartStop:
    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:  # Ctrl-C too: undo what start() made, then let it through
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

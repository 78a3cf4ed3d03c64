"""Helpers of the hostile-input tests: the gateway's resident memory, read
from /proc, and its peak while an attack runs."""

import threading
import time


def rss_mb(pid):
    """Resident memory of process `pid` now, MB."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


class RssPeak:
    """The highest RSS of a process, sampled every 5 ms while in use.
    `over` (MB above the RSS at the start) sets `tripped`, so that an
    attack that would eat the machine's memory can be stopped early."""

    def __init__(self, pid, over=None):
        self.pid, self.start = pid, rss_mb(pid)
        self.peak, self.over = self.start, over
        self.tripped = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def grown(self):
        return self.peak - self.start

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_mb(self.pid))
            if self.over is not None and self.grown > self.over:
                self.tripped.set()
            time.sleep(0.005)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

"""Celery worker heartbeats while a solo-pool task runs.

A prove and an aggregate worker run Celery's ``solo`` pool: the task runs inside the worker's
event loop, and that loop is also what sends the ``worker-heartbeat`` event every 2 s
(``celery.worker.heartbeat.Heart``). During a proof (seconds on a GPU, minutes on a CPU) no
heartbeat goes out, so Flower marks the busy prover *Offline* after about 4 s (Celery's expiry:
twice the heartbeat interval) and counts no active task. ``BusyHeartbeat.send`` is called by the
registry's heartbeat thread while a task runs and sends the same event as ``Heart._send``
through its own connection and dispatcher (the consumer's are not thread-safe), under the
worker's node name, with the running task counted as active.
"""
from __future__ import annotations

import logging

log = logging.getLogger(__name__)


class BusyHeartbeat:
    def __init__(self, app, hostname: str, interval_s: float = 2.0):
        self.app, self.hostname, self.interval_s = app, hostname, interval_s
        self._conn = None
        self._dispatcher = None

    def send(self) -> None:
        from celery.utils.sysinfo import load_average
        from celery.worker import state
        from celery.worker.heartbeat import SOFTWARE_INFO

        try:
            if self._dispatcher is None:
                self._conn = self.app.connection_for_write()
                self._dispatcher = self.app.events.Dispatcher(self._conn, hostname=self.hostname,
                                                              enabled=True, buffer_while_offline=False)
            self._dispatcher.send("worker-heartbeat", freq=self.interval_s,
                                  active=max(1, len(state.active_requests)),
                                  processed=state.all_total_count[0], loadavg=load_average(),
                                  retry=False, **SOFTWARE_INFO)
        except Exception as e:  # the broker away for a moment: the next beat tries again
            log.warning("could not send a worker heartbeat: %s", e)
            self.close()

    def close(self) -> None:
        for x in (self._dispatcher, self._conn):
            try:
                if x is not None:
                    x.close()
            except Exception:
                pass
        self._dispatcher = self._conn = None

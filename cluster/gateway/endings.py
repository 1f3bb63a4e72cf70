"""AwaitProof woken when its job ends, instead of at its next poll (issue 37).

The job store publishes a job's id on ``cluster.pipeline.jobs.ENDED`` once it ends (done,
failed, cancelled). One thread of the gateway holds one subscription and sets the events of the
calls waiting for that job; a call still reads the job's state itself (the message only says
when), and still polls, so a message lost while the subscription reconnects costs at most one
poll. A WinningPoSt's AwaitProof polled every 20 ms (10 ms late on average, 20 at most), a PoRep
job's every 200 ms.
"""
from __future__ import annotations

import contextlib
import logging
import threading

log = logging.getLogger(__name__)

#: seconds the thread waits after the subscription failed (Redis away) before subscribing again
RESUBSCRIBE_S = 1.0


class Endings:
    def __init__(self, redis):
        self.r = redis
        self._lock = threading.Lock()
        self._waiters: dict[str, set[threading.Event]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: True once the subscription is in place (tests wait for it)
        self.subscribed = threading.Event()

    @contextlib.contextmanager
    def watch(self, job_id: str):
        """An event set when ``job_id`` ends, for the ``with`` block (the thread starts on first use)."""
        self._start()
        ended = threading.Event()
        with self._lock:
            self._waiters.setdefault(job_id, set()).add(ended)
        try:
            yield ended
        finally:
            with self._lock:
                left = self._waiters.get(job_id)
                if left is not None:
                    left.discard(ended)
                    if not left:
                        del self._waiters[job_id]

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def _start(self) -> None:
        with self._lock:
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(target=self._run, name="zkhive-endings", daemon=True)
                self._thread.start()

    def _wake(self, job_id: str) -> None:
        with self._lock:
            for ended in self._waiters.get(job_id, ()):
                ended.set()

    def _run(self) -> None:
        import redis

        from cluster.pipeline.jobs import ENDED

        down = False  # said once an outage, not every RESUBSCRIBE_S
        while not self._stop.is_set():
            ps = None
            try:
                ps = self.r.pubsub(ignore_subscribe_messages=True)
                ps.subscribe(ENDED)
                self.subscribed.set()
                if down:
                    log.info("job endings: subscribed again")
                    down = False
                while not self._stop.is_set():
                    msg = ps.get_message(timeout=0.5)
                    if msg is not None and msg.get("type") == "message":
                        data = msg["data"]
                        self._wake(data.decode() if isinstance(data, bytes) else str(data))
            except (redis.exceptions.RedisError, OSError) as e:  # the calls poll meanwhile
                self.subscribed.clear()
                if not down:
                    log.warning("job endings: the subscription failed (%s); AwaitProof polls until it is back",
                                str(e).splitlines()[0] if str(e) else type(e).__name__)
                down = True
                self._stop.wait(RESUBSCRIBE_S)
            finally:
                if ps is not None:
                    with contextlib.suppress(Exception):
                        ps.close()

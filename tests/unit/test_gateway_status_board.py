"""The gateway's status board (cluster/gateway/status.py): callers read a snapshot made by a
thread of its own; a stuck or failing refresher is never hidden behind an old snapshot."""
from __future__ import annotations

import threading
import time

import pytest

from cluster.gateway.status import Snapshot, StatusBoard


class Maker:
    def __init__(self):
        self.calls = 0
        self.threads: set[str] = set()
        self.block = threading.Event()
        self.block.set()
        self.fail: Exception | None = None

    def __call__(self) -> Snapshot:
        self.calls += 1
        self.threads.add(threading.current_thread().name)
        if self.fail is not None:
            raise self.fail
        self.block.wait()
        return Snapshot(at=time.monotonic(), response=self.calls, queued=[(0, 5.0), (6, 1.0), (6, 2.0), (9, 0.5)])


def test_many_callers_read_one_refresher_s_snapshot():
    m = Maker()
    board = StatusBoard(m, every_s=0.1, stale_s=2.0, idle_s=5.0)
    t0 = time.monotonic()
    answers = [board.latest().response for _ in range(2000)]
    took = time.monotonic() - t0
    assert answers[0] >= 1 and answers == sorted(answers)
    assert m.threads == {"gateway-status"} and board.computed_by_caller == 0
    assert m.calls <= 2 + took / 0.1, (m.calls, took)  # made at the refresh rate, not per call
    time.sleep(0.35)
    assert board.latest().response > answers[-1]  # refreshed while asked


def test_queue_order_from_the_snapshot():
    snap = Maker()()
    assert snap.served_before(6, 1.5) == 2      # the critical job and the normal one submitted earlier
    assert snap.served_before(0, 0.1) == 0      # critical first
    assert snap.served_before(9, 9.0) == 4      # bulk last
    assert snap.served_before(6, 1.0) == 1      # itself not counted


def test_a_stuck_refresher_is_not_hidden_the_caller_makes_the_answer_itself():
    m = Maker()
    board = StatusBoard(m, every_s=0.05, stale_s=0.3, idle_s=5.0)
    assert board.latest().response >= 1
    m.block.clear()  # the refresher's next make hangs (a Redis that does not answer)
    time.sleep(0.5)
    out: dict = {}
    caller = threading.Thread(target=lambda: out.update(r=board.latest()), daemon=True)
    caller.start()
    caller.join(0.5)
    assert caller.is_alive(), "a stale snapshot was served: a stuck gateway would pass the keeper's probe"
    assert board.computed_by_caller == 1
    m.block.set()
    caller.join(5)
    assert "r" in out


def test_a_failing_refresher_makes_the_callers_see_the_error():
    m = Maker()
    m.fail = ConnectionError("Redis refused")
    board = StatusBoard(m, every_s=0.05, stale_s=0.3, idle_s=5.0)
    with pytest.raises(ConnectionError, match="Redis refused"):
        board.latest()
    m.fail = None
    assert board.latest().response >= 1


def test_the_refresher_stops_when_nobody_asks_and_starts_again_fresh():
    m = Maker()
    board = StatusBoard(m, every_s=0.05, stale_s=2.0, idle_s=0.2)
    first = board.latest().response
    time.sleep(0.6)
    stopped_at = m.calls
    time.sleep(0.3)
    assert m.calls == stopped_at  # no Redis traffic for a gateway nobody watches
    assert board.latest().response > stopped_at >= first  # a new snapshot, not the old one


class _Handler:
    def __init__(self, lane, fn=lambda: None):
        self._zkhive_lane, self.fn = lane, fn

    def __call__(self):
        return self.fn()


def test_a_burst_of_refusals_never_delays_a_getstatus():
    """The gateway's lanes (cluster/gateway/server.py Lanes), as grpc drives them: every heavy
    thread busy, 500 more calls refused; the refusals are answered on a thread of their own, so a
    GetStatus sent after them is not queued behind them (it was: the 1,000-call bench's max)."""
    from cluster.gateway.server import Lanes

    lanes = Lanes(threads=6, queue=0)
    release = threading.Event()
    run = lambda h: (time.sleep(0.005) if h is lanes._refuse else h())  # noqa: E731 - a refusal takes 5 ms
    try:
        held = [lanes.submit(run, _Handler("heavy", release.wait)) for _ in range(lanes.cap)]
        refused = [lanes.submit(run, _Handler("heavy")) for _ in range(500)]
        assert lanes.refused == 500
        t0 = time.monotonic()
        lanes.submit(run, _Handler("cheap", lambda: "status")).result(timeout=5)
        took = time.monotonic() - t0
        assert took < 0.5, f"GetStatus waited {took:.2f} s behind the refusals"
        assert not refused[-1].done()  # the refusals still queued meanwhile (2.5 s of them)
    finally:
        release.set()
        for f in held:
            f.result(timeout=5)
        lanes.shutdown(wait=False, cancel_futures=True)


def test_a_burst_of_submissions_runs_on_a_few_threads_and_is_still_counted():
    """SubmitProof's calls (lane ``submit``) run on ``SUBMIT_THREADS`` threads of their own, the
    rest waiting without a thread (a thousand at once used to wake 60 threads, each a turn at the
    interpreter lock before a GetStatus's answer): 100 held submissions, never more than 3
    running, all counted; an AwaitProof (heavy lane) and a GetStatus still run at once; one call
    past ``threads - reserve + queue`` is refused."""
    from cluster.gateway.server import SUBMIT_THREADS, Lanes

    lanes = Lanes(threads=64, queue=64)
    release = threading.Event()
    lock, running, most = threading.Lock(), [0], [0]

    def held():
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        release.wait(10)
        with lock:
            running[0] -= 1
    run = lambda h: ("refused" if h is lanes._refuse else h())  # noqa: E731
    try:
        subs = [lanes.submit(run, _Handler("submit", held)) for _ in range(100)]
        time.sleep(0.2)
        assert most[0] == SUBMIT_THREADS == 3, most[0]  # 3 running, 97 waiting without a thread
        assert lanes.in_progress == 100 and lanes.refused == 0
        waited = lanes.submit(run, _Handler("heavy", lambda: "await"))
        assert waited.result(timeout=2) == "await"  # not behind the submissions
        assert lanes.submit(run, _Handler("cheap", lambda: "status")).result(timeout=2) == "status"
        more = [lanes.submit(run, _Handler("submit", held)) for _ in range(lanes.cap + lanes.queue - 100)]
        assert lanes.in_progress == lanes.cap + lanes.queue
        assert lanes.submit(run, _Handler("submit", held)).result(timeout=2) == "refused"
        assert lanes.refused == 1
        release.set()
        for f in subs + more:
            f.result(timeout=10)
        assert most[0] == 3 and lanes.in_progress == 0
    finally:
        release.set()
        lanes.shutdown(wait=False, cancel_futures=True)

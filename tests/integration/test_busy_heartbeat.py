"""A solo-pool worker's Celery heartbeat while its task runs (cluster.pipeline.busy_heartbeat): the event
goes out on its own connection, under the worker's node name, counting the task as active, so
Flower keeps a busy prover online. Received here by Celery's own event receiver on the real
Redis."""
from __future__ import annotations

import threading
import time

import pytest

pytestmark = pytest.mark.integration


def test_busy_heartbeat_reaches_an_event_receiver(cluster):
    from cluster.pipeline.app import app
    from cluster.pipeline.busy_heartbeat import BusyHeartbeat

    cluster.configure_here()
    got, ready = [], threading.Event()

    def listen():
        with app.connection_for_read() as conn:
            recv = app.events.Receiver(conn, handlers={"worker-heartbeat": got.append})
            it = recv.itercapture(limit=None, timeout=10, wakeup=False)
            ready.set()
            for _ in it:
                if got:
                    return

    t = threading.Thread(target=listen, daemon=True)
    t.start()
    assert ready.wait(10)
    time.sleep(0.5)  # the receiver's queue is bound
    beat = BusyHeartbeat(app, "prove.test.cpu0.0@test", interval_s=2.0)
    end = time.monotonic() + 10
    while not got and time.monotonic() < end:
        beat.send()
        time.sleep(0.3)
    beat.close()
    t.join(5)
    assert got, "no worker-heartbeat event received"
    ev = got[0]
    assert ev["hostname"] == "prove.test.cpu0.0@test" and ev["active"] >= 1 and ev["freq"] == 2.0


def test_busy_heartbeat_survives_an_unreachable_broker(cluster, caplog):
    """Survives: the failed beat raises nothing (the prove goes on), says why in one warning,
    drops its connection, and the next beat, with the broker back, connects again and sends."""
    import logging

    from cluster import settings
    from cluster.pipeline.app import configure, app
    from cluster.pipeline.busy_heartbeat import BusyHeartbeat
    from cluster.ops.redis_server import free_port

    env = {k: v for k, v in cluster.env.items() if k.startswith("ZKHIVE_")}
    port = free_port()
    env["ZKHIVE_REDIS__URL"] = f"redis://127.0.0.1:{port}/0"
    configure(settings.load(env=env))
    try:
        beat = BusyHeartbeat(app, "prove.test.cpu0.0@test")
        t0 = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="cluster.pipeline.busy_heartbeat"):
            beat.send()  # logs a warning, raises nothing: the prove goes on
        assert beat._dispatcher is None and beat._conn is None and time.monotonic() - t0 < 30
        warnings = [r.getMessage() for r in caplog.records
                    if r.name == "cluster.pipeline.busy_heartbeat"]
        assert len(warnings) == 1, warnings
        assert warnings[0].startswith("could not send a worker heartbeat: "), warnings
        assert "\n" not in warnings[0]
    finally:
        cluster.configure_here()
    # the broker is reachable again: the same object's next beat reconnects and sends
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="cluster.pipeline.busy_heartbeat"):
        beat.send()
    try:
        assert beat._dispatcher is not None and beat._conn is not None
        assert not [r for r in caplog.records if r.name == "cluster.pipeline.busy_heartbeat"]
    finally:
        beat.close()

"""The Celery app: Redis broker and result backend, JSON only, the delivery settings for long
proving tasks, and the queues.

Queues::

    synthesis           CPU workers: C1 input -> one partition's assignment
    prove.<host>.<n>    one per GPU (prove.<host>.cpu<n> for a CPU prover), routed by residency
    aggregate           the chord body (verify, assemble), submissions, the job watchdog

``celery -A cluster.pipeline.app worker`` works, but start workers with ``zkhive worker ...``: that takes
the device lock, loads keys and registers before consuming. Settings come from
``cluster.settings.load()`` (``$ZKHIVE_CONFIG`` + ``ZKHIVE_*__*``) when this module is imported.
"""
from __future__ import annotations

import contextlib
import os
import threading

from celery import Celery
from celery.app import backends as celery_backends
from celery.backends.redis import RedisBackend
from kombu.exceptions import LimitExceeded

from cluster import settings as settings_mod
from cluster.errors import DispatchBusy

# the queue names live with the code that reads the broker's lists (no cycle through routing)
from .queues import AGGREGATE_QUEUE, PRIORITY_STEPS, SYNTHESIS_QUEUE, UNASSIGNED_QUEUE  # noqa: F401


def celery_config(s: settings_mod.Settings) -> dict:
    d = s.delivery
    url = s.redis.url_with_password()
    return dict(
        broker_url=url,
        result_backend=url,
        # JSON only: a message is data. pickle would let anyone who can write to Redis run code
        # in every worker; accept_content makes workers refuse anything else.
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        result_accept_content=["json"],
        # Late acks: a message leaves the queue only after its task finished, so a prover that
        # dies mid-prove (OOM, GPU fault, power) leaves the partition to be redelivered.
        task_acks_late=True,
        # A pool child killed under a task requeues it instead of recording a failure; the number
        # of attempts whose worker died is bounded by delivery.max_redeliveries (cluster.pipeline.lease).
        task_reject_on_worker_lost=True,
        # Prefetch 1: a prover reserves only the task it runs. With the default (4) one device
        # would sit on four multi-minute proofs while another device idles.
        worker_prefetch_multiplier=1,
        broker_transport_options={
            # Redis redelivers an unacked message after this long. It must exceed the longest task
            # (checked in settings), or a healthy long prove is handed to a second device.
            "visibility_timeout": d.visibility_timeout_s,
            # priorities as separate lists per level, so a critical job's partitions overtake
            # bulk work already queued on the same queue
            "priority_steps": PRIORITY_STEPS,
            "queue_order_strategy": "priority",
        },
        result_backend_transport_options={"visibility_timeout": d.visibility_timeout_s},
        # a lost connection must not cancel a half-done multi-minute prove that can still ack
        worker_cancel_long_running_tasks_on_connection_loss=False,
        broker_connection_retry_on_startup=True,
        task_default_queue=AGGREGATE_QUEUE,
        task_routes=("cluster.pipeline.routing.route_task",),
        task_create_missing_queues=True,
        # Task results are small and short-lived: the job's state is in the job store
        # (cluster.pipeline.jobs, delivery.result_ttl_s). Not result_extended: it would copy every task's
        # arguments, a submit's whole C1 input, into its result for as long as the result lives.
        result_expires=d.task_result_ttl_s,
        result_extended=False,
        # the chord's join counters must outlive the job, or its body never fires
        result_chord_expires=int(max(d.job_deadline_s, *(v or 0 for v in s.deadlines.model_dump().values()))) + 3600,
        task_track_started=True,
        # events for Flower (issue 5) and `celery events`
        worker_send_task_events=True,
        task_send_sent_event=True,
        worker_hijack_root_logger=False,
        # no publish waits for the broker pool forever (issue 39): celery's own sends fail after
        # this long with one line; a job's dispatch takes its one producer with a shorter wait
        # (ZkhiveCelery.one_producer)
        broker_pool_acquire_timeout=POOL_WAIT_S,
    )


#: seconds a publish waits for a producer of the broker pool (``broker_pool_limit``, 10)
POOL_WAIT_S = 10.0
#: seconds a job's dispatch waits for its producer before it is refused as busy
DISPATCH_WAIT_S = 5.0
#: Redis connections of one process's runtime, and how long a command waits for a free one
REDIS_CONNECTIONS = 100
REDIS_WAIT_S = 30.0


_held = threading.local()


class ResultStore(RedisBackend):
    """Celery's Redis result backend without the sender's result subscriptions.

    Celery subscribes the sending thread to each task's result channel as it sends
    (``on_task_call``), so that ``AsyncResult.get`` can wait on pub/sub. zkhive never waits on a
    Celery result (a job's outcome is in cluster.pipeline.jobs), so each subscription was a
    connection per sending thread and a channel per task that nobody read. Worse, the garbage
    collector unsubscribes a dropped result (``AsyncResult.__del__``) in whatever thread it runs:
    with that result's Redis gone (a test's second server, a cluster reconfigured), the
    unsubscribe retried it for 20 s under the consumer's lock, and a submitting thread hung past
    90 s in CI (test_concurrent_submit after test_bounds). Workers still store task results: the
    chord's counter needs them. An explicit ``AsyncResult.get`` (Flower's task/result API) still
    subscribes, and reads the stored result first."""

    def on_task_call(self, producer, task_id):
        pass  # the send: no one waits yet

    def add_pending_result(self, result, weak=False, start_drainer=True):
        # called as results are made (a chord's GroupResult, a group's barrier): bookkeeping for
        # a waiter that may never come; the subscription is made by the wait itself, below
        return result

    def wait_for_pending(self, result, **kwargs):
        super().add_pending_result(result)
        return super().wait_for_pending(result, **kwargs)

    def iter_native(self, result, no_ack=True, **kwargs):  # a ResultSet's join: it waits
        for node in result.results or ():
            super().add_pending_result(node)
        return super().iter_native(result, no_ack=no_ack, **kwargs)


class ZkhiveCelery(Celery):
    """Celery whose sends in one thread share the producer that thread holds.

    The deadlock of issue 39: a chord's header (a group of chains) takes a producer from the
    pool and, for each chain, celery's ``chain.run`` drops the producer it was given, so the
    chain's first task takes a second one while the group still holds the first. With more
    threads than ``broker_pool_limit`` each holding one and waiting for another, none ever got
    its second (16 threads: 0 returned). ``one_producer`` takes one producer, with a timeout, for
    the whole dispatch of a job; every send inside (group, chains, body) uses it: one resource
    per dispatch, never a nested acquire."""

    def _get_backend(self):
        backend, url = celery_backends.by_url(self.backend_cls or self.conf.result_backend, self.loader)
        if backend is RedisBackend:  # redis:// and rediss:// (a sentinel backend keeps its own class)
            backend = ResultStore
        return backend(app=self, url=url)

    def producer_or_acquire(self, producer=None):
        if producer is None:
            producer = getattr(_held, "producer", None)
        return super().producer_or_acquire(producer)

    @contextlib.contextmanager
    def one_producer(self, wait_s: float | None = None):
        if getattr(_held, "producer", None) is not None:  # already inside one dispatch
            yield _held.producer
            return
        wait_s = DISPATCH_WAIT_S if wait_s is None else wait_s
        pool = self.producer_pool
        if not getattr(pool, "_zkhive_bounded", False):
            # kombu's producer pool takes its connection from the connection pool without a
            # timeout: a connection held elsewhere (a broadcast awaiting replies) must not hang us
            conns = pool.connections
            pool._acquire_connection = lambda: conns.acquire(block=True, timeout=DISPATCH_WAIT_S)
            pool._zkhive_bounded = True
        try:
            producer = pool.acquire(block=True, timeout=wait_s)
        except LimitExceeded:
            raise DispatchBusy(f"dispatch busy: all {self.conf.broker_pool_limit} broker connections of "
                               f"this process stayed in use for {wait_s:g} s; retry") from None
        _held.producer = producer
        try:
            yield producer
        finally:
            _held.producer = None
            producer.release()


def make_app(s: settings_mod.Settings | None = None) -> Celery:
    s = s or settings_mod.load()
    # srs_control: the provers' remote-control commands (PreloadSRS/EvictSRS of the gateway)
    app = ZkhiveCelery("zkhive", include=["cluster.pipeline.tasks", "cluster.pipeline.srs_control"])
    app.conf.update(celery_config(s))
    app.zkhive_settings = s
    return app


app = make_app()


def configure(s: settings_mod.Settings) -> None:
    """Point this process's app at other settings (a test, a client of a second cluster)."""
    global _runtime
    from .bounds import reset_publisher

    app.conf.update(celery_config(s))
    app.zkhive_settings = s
    # this thread's result backend was made for the old settings (celery keeps one per thread)
    app._local.__dict__.pop("backend", None)
    app._backend_cache = None
    reset_publisher(app)  # the pools would keep publishing to the broker of the old settings
    with _runtime_lock:
        _runtime = None


# -- the per-process runtime ---------------------------------------------------------------------

class Runtime:
    """What every task needs, created once per process (after fork: connections do not survive it)."""

    def __init__(self, s: settings_mod.Settings):
        import importlib

        import redis

        from .blobs import open_store
        from .jobs import JobStore
        from .keys import KeyCache
        from .lease import Leases
        from .workflow import CeleryDispatch

        self.settings = s
        # a blocking pool: with more threads at once than connections (200 client threads, issue
        # 39) a command waits up to REDIS_WAIT_S for a free one instead of failing with
        # redis-py's "Too many connections" (its pool's default bound, 100)
        self.redis = redis.Redis(connection_pool=redis.BlockingConnectionPool.from_url(
            s.redis.url_with_password(), health_check_interval=30, max_connections=REDIS_CONNECTIONS,
            timeout=REDIS_WAIT_S))
        self.blobs = open_store(s, self.redis)
        self.jobs = JobStore(self.redis, s.delivery.result_ttl_s)
        #: liveness of claimed units (cluster.pipeline.lease), renewed while their tasks run
        self.leases = Leases(self.redis, s.delivery.lease_ttl_s, s.delivery.result_ttl_s)
        self.keys = KeyCache.from_settings(s)
        #: sends the jobs' messages (the unit tests' stub runtime records them instead)
        self.dispatch = CeleryDispatch(app)
        #: set by cluster.pipeline.lifecycle in a prove worker: the device's Prover
        self.prover = None
        #: this worker's registry entry (lifecycle), or None in clients
        self.worker = None
        for mod in s.worker.circuit_modules:
            importlib.import_module(mod)

    def ttl(self) -> int:
        return self.settings.delivery.result_ttl_s


_runtime: Runtime | None = None
_inherited_worker = None
_runtime_lock = threading.Lock()


def runtime() -> Runtime:
    global _runtime
    with _runtime_lock:
        if _runtime is None:
            _runtime = Runtime(app.zkhive_settings)
            _runtime.worker = _inherited_worker
        return _runtime


def _reset_after_fork() -> None:
    # connections do not survive fork: a prefork child makes its own runtime, but keeps the
    # parent worker's registry identity for its timeline events
    global _runtime, _inherited_worker
    if _runtime is not None:
        _inherited_worker = _runtime.worker
    _runtime = None


os.register_at_fork(after_in_child=_reset_after_fork)

"""Worker lifecycle, in one place: lock the device, load keys, register, report ready, time
limits, and the warm shutdown that frees the device and leaves the registry.

Order of a prove worker's start (``zkhive worker prove --device cuda:0``)::

    acquire the device lock     refused with DeviceBusy naming the holder; stale locks taken over
                                (``[worker] prover_standby``: a busy lock is waited on as a
                                standby, its circuits' host work and its backend (context,
                                cubins) made meanwhile; the rest follows the takeover)
    register (ready = false)    heartbeat starts: the entry lives while the process does
    create the Prover           the backend's device context is made here, after start, never at import
    load the preload keys       ``[srs] preload``; a missing key stops the worker with its path
    start consuming             Celery ``worker_ready`` -> the entry says ready = true

SIGTERM is Celery's warm shutdown: the task in hand finishes and is acknowledged, then
``worker_shutdown`` runs ``WorkerLifecycle.shutdown``: stop the heartbeat, leave the registry,
free the resident keys (device memory), release the device lock. SIGKILL runs nothing: the entry
expires after ``worker.registry_ttl_s``, the lock after ``worker.lock_ttl_s``, the lease of the
unit in hand after ``delivery.lease_ttl_s``, and the watchdog (a thread of every worker,
cluster.pipeline.watchdog) re-dispatches that unit.

Prove and aggregate workers use Celery's ``solo`` pool: the task runs in the process that owns
the device and its resident keys (CUDA contexts do not survive fork). The solo pool does not
enforce time limits, so this module does: the soft limit raises SoftTimeLimitExceeded in the task
(SIGALRM), the hard limit ends the process, which is what Celery's prefork pool does to a child.
"""
from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time

from celery import signals
from celery.exceptions import SoftTimeLimitExceeded

from cluster.errors import WorkerStartError
from cluster.version import code_digest, package_version

from . import registry
from .app import app, runtime
from .queues import AGGREGATE_QUEUE, SYNTHESIS_QUEUE, URGENT_SYNTHESIS_QUEUE
from .prover import Prover, parse_device

log = logging.getLogger(__name__)

#: the start's log lines, as Celery writes its own after (its worker_log_format)
START_LOG_FORMAT = "[%(asctime)s: %(levelname)s/%(processName)s] %(message)s"
#: exit status of a worker ended by a hard time limit (EX_SOFTWARE)
HARD_LIMIT_EXIT = 70
#: how often a standby prover tries its device's lock (a SET NX and a GET on Redis): the most a
#: takeover waits once the prover is gone
STANDBY_POLL_S = 0.05


class WorkerLifecycle:
    def __init__(self, role: str, device: str | None = None, *, urgent: bool = False):
        self.role = role
        if urgent and role != "synthesis":
            raise WorkerStartError(f"--urgent is for synthesis workers, not {role!r}")
        self.rt = runtime()
        s = self.rt.settings
        self.host = s.worker.host
        self.lock: registry.DeviceLock | None = None
        self.prover: Prover | None = None
        self.watchdog = None
        self.device = parse_device(device) if role == "prove" else None
        if role == "prove":
            self.queues = [self.device.queue(self.host)]
            self.pool, self.concurrency = "solo", 1
        elif role == "synthesis" and urgent:
            # one process that only CRITICAL jobs' synthesis reaches (cluster/pipeline/queues.py)
            self.queues = [URGENT_SYNTHESIS_QUEUE]
            self.pool, self.concurrency = "prefork", 1
        elif role == "synthesis":
            # the urgent queue too: served here whenever a process is free (no urgent worker, or
            # it is busy), before this queue's work when both wait (its messages are all
            # priority 0, and kombu's Redis consumer polls the levels before the queues)
            self.queues = [URGENT_SYNTHESIS_QUEUE, SYNTHESIS_QUEUE]
            self.pool, self.concurrency = "prefork", s.worker.partition_workers
        elif role == "aggregate":
            self.queues = [AGGREGATE_QUEUE]
            self.pool, self.concurrency = "solo", 1
        else:
            raise WorkerStartError(f"unknown worker role {role!r}: synthesis, prove or aggregate")
        self.heartbeat: registry.Heartbeat | None = None
        self.vk_watch = None  # the aggregate worker's reads of keys not yet written (warmup.VkWatch)
        self._limits = TimeLimits()

    # -- start --------------------------------------------------------------------------------------
    def start(self) -> None:
        """Everything before consuming: lock, register (not ready), prover, keys. Each phase's
        seconds are logged and kept (gpu/phases.py; ``WorkerInfo.start_phases``)."""
        from gpu import phases
        from synthesis.circuits import get_circuit

        s = self.rt.settings
        self.phases = rec = phases.Phases()
        t_start = time.time()
        rec.add("process start and imports", t_start - rec.origin, t_start)
        slot = 0
        prep = early = None
        if self.device is not None:
            self.lock = registry.DeviceLock(self.rt.redis, self.host, str(self.device),
                                            s.worker.gpu_workers_per_device, s.worker.lock_ttl_s,
                                            owner=f"prove worker pid {os.getpid()}")
            try:
                slot = self.lock.acquire()
            except registry.DeviceBusy as e:
                if not s.worker.prover_standby:
                    raise WorkerStartError(str(e)) from None
                # the preloaded circuits' host work done while standing by, not after, and
                # the device's context and cubins made (no allocation: keys come after the lock)
                prep = prepare_circuits(s.srs.preload, self.rt.keys)
                with phases.collect(rec):
                    early = self._make_prover()
                t = time.time()
                warm_celery()
                log.info("made Celery's start ahead (its command line, plugins and result "
                         "backend) in %.2f s", time.time() - t)
                slot = self._stand_by(str(e))
                # the start's phases from the takeover: what a standby saves is what came before
                self.phases = rec = phases.Phases(origin=time.time())
                t_start = rec.origin
        suffix = f".{self.device.kind}{self.device.index}.{slot}" if self.device else f".{os.getpid()}"
        info = self._info(f"{self.role}.{self.host}{suffix}", self.queues)
        self.rt.worker = info
        self.heartbeat = registry.Heartbeat(self.rt.redis, info, interval_s=s.worker.heartbeat_s,
                                            ttl_s=s.worker.registry_ttl_s, lock=self.lock,
                                            update=self._update).start()
        rec.add("device lock and registry", time.time() - t_start)
        try:
            if self.device is not None:
                # the preloaded circuits' host work (matrices, densities, digest) on a thread
                # while this one makes the device's context and loads its modules
                prep = prep or prepare_circuits(s.srs.preload, self.rt.keys)
                with phases.collect(rec):
                    if early is not None:   # made while standing by
                        made, self.prover = early
                    else:
                        made, self.prover = self._make_prover()
                    self.rt.prover = self.prover
                    # announced only where the device can ever hold the key (cluster/pipeline/inprocess.py)
                    info.makes_keys = made.fitting(self.prover.backend, preload=s.srs.preload)
                    t = time.time()
                    prep.wait()
                    rec.add("waited for the circuits' host work", time.time() - t)
                    for name in s.srs.preload:
                        t0 = time.time()
                        info.loading = [name]  # `zkhive status`: loading, not just "not ready"
                        self.heartbeat.beat()
                        self.prover.load(get_circuit(name))
                        info.loading = []
                        log.info("loaded the proving key of %s in %.2f s", name, time.time() - t0)
                self.heartbeat.beat()
            elif self.role == "synthesis":
                # build the preloaded circuits' matrices before the first job, not inside it
                # (prefork children inherit them)
                for name in s.srs.preload:
                    c = get_circuit(name)
                    # the compact form where the family has one (sdr-32g's full R1CS is ~32 GB)
                    c.compact_r1cs() if hasattr(c, "compact_r1cs") else c.r1cs()
            # the first job of a preloaded kind pays no first-use work (cluster/pipeline/warmup.py)
            from .warmup import warm_worker
            self.vk_watch = warm_worker(self.rt, self.role, s.srs.preload)
        except BaseException as e:
            self.shutdown()
            if isinstance(e, (KeyError, FileNotFoundError, RuntimeError, ValueError)):
                raise WorkerStartError(f"{info.worker_id}: {e}") from None
            raise
        self._started = time.time()
        self._connect_signals()

    def _make_prover(self):
        """(the in-process key maker, the Prover): the backend's device context and modules."""
        from gpu import phases

        from .inprocess import InProcessKeys
        s = self.rt.settings
        made = InProcessKeys(s.srs, self.rt.keys)
        with phases.phase("prover (backend)"):
            prover = Prover(self.device, self.rt.keys, s.worker.device_memory_bytes,
                            in_process=made, holder=self._holder_client())
        return made, prover

    def _info(self, worker_id: str, queues: list[str], standby: bool = False) -> registry.WorkerInfo:
        """This process's registry entry (a standby's: no queues, never routed to)."""
        d = self.device
        node = f"{self.role}.{self.host}.standby" if standby else worker_id
        return registry.WorkerInfo(
            worker_id=worker_id, role=self.role, host=self.host, pid=os.getpid(), queues=queues,
            device=str(d) if d else None, device_kind=d.kind if d else None,
            backend=d.kind if d else None, version=package_version(), code_digest=code_digest(),
            nodename=f"{node}@{self.host}", standby=standby)

    def _stand_by(self, busy: str) -> int:
        """``[worker] prover_standby``: the device's lock is held by a live prover, so wait for it
        as a standby, registered (``standby``, no queues: never routed to, ``up``'s readiness
        satisfied) and beating, trying the lock every STANDBY_POLL_S; a holder that is gone from
        this host is taken over at once (DeviceLock), a released lock (a warm stop) as soon as
        seen. Returns the slot taken. SIGTERM while waiting ends the process (``down``)."""
        s = self.rt.settings
        d = self.device
        info = self._info(f"{self.role}.{self.host}.{d.kind}{d.index}.standby.{os.getpid()}", [],
                          standby=True)
        beat = registry.Heartbeat(self.rt.redis, info, interval_s=s.worker.heartbeat_s,
                                  ttl_s=s.worker.registry_ttl_s).start()

        def stop(signum, frame):
            raise SystemExit(0)
        previous = signal.signal(signal.SIGTERM, stop)
        log.info("standing by for %s (%s)", d, busy.split(";")[0])
        t0 = time.time()
        try:
            while True:
                time.sleep(STANDBY_POLL_S)
                try:
                    slot = self.lock.acquire()
                    break
                except registry.DeviceBusy:
                    continue
                except Exception as e:  # Redis away for a moment: the standby waits on
                    log.warning("standby: cannot look at the device lock: %s", e)
                    time.sleep(1.0)
        finally:
            signal.signal(signal.SIGTERM, previous)
            beat.stop(leave_registry=True)
        log.info("took %s over after %.1f s as its standby (slot %d)", d, time.time() - t0, slot)
        # a prover that died held a unit: re-dispatched now (its PID is gone: reconcile's
        # holder_gone), not at the keeper's next poll, so it waits for this one in the queue
        self._ask_for_sweep("standby: ", "the keeper's request or the lapse")
        return slot

    def _ask_for_sweep(self, who: str, otherwise: str) -> None:
        """``watchdog.request_sweep``: the next deadline poll of any worker sweeps. Redis away:
        a warning naming what comes instead (``otherwise``), never an error of the start."""
        try:
            from .watchdog import request_sweep
            request_sweep(self.rt.redis)
        except Exception as e:
            log.warning("%scould not ask for a sweep (%s comes later): %s", who, otherwise, e)

    def _holder_client(self):
        """The device's key holder (``[gpu] key_holder``, CUDA devices of ``zkhive up``): a
        HolderClient once the holder answers, its watch started; None: keys held here."""
        s = self.rt.settings
        if not s.gpu.key_holder or self.device.kind != "cuda":
            return None
        from .keyholder import HolderClient, HolderGone, socket_path
        run_dir = os.environ.get("ZKHIVE_RUN_DIR")
        if not run_dir:
            raise WorkerStartError("gpu.key_holder is on, but this prover has no run directory "
                                   "(ZKHIVE_RUN_DIR: `zkhive up` sets it) to find its key holder in")
        client = HolderClient(socket_path(run_dir, self.device), timeout_s=s.gpu.key_holder_timeout_s)
        try:
            pid = client.wait(s.gpu.key_holder_timeout_s)
        except HolderGone as e:
            raise WorkerStartError(f"gpu.key_holder: {e}") from None
        log.info("%s: keys from the key holder pid %d on %s", self.device, pid, client.path)

        def told(event, **fields):  # the cluster's timeline (`zkhive timeline cluster`)
            from . import timeline
            try:
                timeline.emit(self.rt.redis, "cluster", event, device=str(self.device),
                              worker=self.rt.worker.worker_id if self.rt.worker else None, **fields)
            except Exception as e:  # Redis away: the log line stands
                log.warning("could not record %s in the timeline: %s", event, e)

        def lost(reason):
            if self.prover is not None:
                self.prover.holder_lost(reason)
            told("key_holder_lost", reason=reason)

        def back(pid):
            log.warning("%s: key holder pid %d answers again; keys are asked of it as needed",
                        self.device, pid)
            told("key_holder_back", pid=pid)
        client.watch(lost, back)
        return client

    def _update(self, info: registry.WorkerInfo) -> None:
        busy = getattr(self, "_busy", None)
        if busy is not None and getattr(self, "_task_running", False):
            busy.send()  # the event loop that sends Celery's heartbeat is running the task
        rec = getattr(self, "phases", None)
        if rec is not None:
            info.start_phases = rec.as_dict()
        if self.prover is not None:
            info.resident_keys = self.prover.resident_names()
            info.key_loads = self.prover.key_loads()
            info.key_mirror_errors = self.prover.mirror_errors()
            info.evictions = self.prover.evictions()
            info.evicted_counts = self.prover.evicted_counts()
            info.free_memory = self.prover.free_memory()
            info.total_memory = self.prover.total_memory()

    def _connect_signals(self) -> None:
        signals.worker_ready.connect(self._on_ready, weak=False)
        signals.worker_shutdown.connect(lambda **kw: self.shutdown(), weak=False)
        signals.task_prerun.connect(self._on_task_start, weak=False)
        signals.task_postrun.connect(self._on_task_end, weak=False)

    def _on_ready(self, sender=None, **kw) -> None:
        self._consumer = sender  # Celery's consumer: its event dispatcher (see _flush_task_events)
        if self.pool == "solo":  # Flower must not see a busy prover as offline
            from .busy_heartbeat import BusyHeartbeat
            self._busy = BusyHeartbeat(app, getattr(sender, "hostname", None) or self.rt.worker.nodename,
                                       self.rt.settings.worker.heartbeat_s)
        rec = getattr(self, "phases", None)
        if rec is not None and getattr(self, "_started", None):   # Celery's consumer, the broker
            rec.add("celery start", time.time() - self._started)
            rec.add("ready", time.time() - rec.origin)
        self.rt.worker.ready = True
        self.heartbeat.beat()
        if self.role == "prove":
            # a unit re-dispatched while no prover was ready (this one's predecessor SIGKILLed,
            # its standby or restart not ready yet) waits in prove.unassigned for a sweep that
            # sees a live prover: asked for now (within the watchdogs' 0.25 s poll), not left to
            # the next periodic one (delivery.watchdog_interval_s, 2 s)
            self._ask_for_sweep("", "the periodic sweep")
        # every role sweeps (one process per interval, under a lock): lost work is found even
        # while the aggregate worker is dead or frozen
        from .watchdog import Watchdog
        self.watchdog = Watchdog(self.rt).start()
        log.info("%s ready on %s (version %s, code %s)", self.rt.worker.worker_id, ",".join(self.queues),
                 package_version(), code_digest())

    # -- per task -----------------------------------------------------------------------------------
    def _on_task_start(self, task_id=None, task=None, args=(), **kw) -> None:
        if self.pool == "solo":
            self._flush_task_events()
            self._task_running = True
        if task is not None and task.name == "zkhive.prove_partition" and len(args) >= 3:
            self.rt.worker.inflight = [f"{args[1]}/{args[2]}"]
            self.heartbeat.beat()
        if self.pool == "solo" and task is not None:
            self._arm_limits(task)

    def _flush_task_events(self) -> None:
        """Send the task's ``task-received`` and ``task-started`` events now. Celery buffers task
        events for its event loop to send, and the solo pool runs the task inside that loop: they
        went out only when the task had ended, so Flower showed a running prove as PENDING and
        its executing gauge at 0 for the whole proof."""
        dispatcher = getattr(getattr(self, "_consumer", None), "event_dispatcher", None)
        if dispatcher is not None:
            try:
                dispatcher.flush()
            except Exception as e:  # the broker away: the events go with the next flush
                log.warning("could not send task events: %s", e)

    def _on_task_end(self, task=None, **kw) -> None:
        self._task_running = False
        self._disarm_limits()
        if self.rt.worker.inflight:
            self.rt.worker.inflight = []
            self.heartbeat.beat()

    def _arm_limits(self, task) -> None:
        self._limits.arm(task.name, task.soft_time_limit, task.time_limit)

    def _disarm_limits(self) -> None:
        self._limits.disarm()

    # -- stop ---------------------------------------------------------------------------------------
    def shutdown(self) -> None:
        """Leave the registry, free the device, release the lock (idempotent)."""
        if self.watchdog is not None:
            self.watchdog.stop()
            self.watchdog = None
        if self.vk_watch is not None:
            self.vk_watch.stop()
            self.vk_watch = None
        if self.heartbeat is not None:
            self.heartbeat.stop(leave_registry=True)
            self.heartbeat = None
        if getattr(self, "_busy", None) is not None:
            self._busy.close()
            self._busy = None
        if self.prover is not None:
            self.prover.close()
            self.prover = self.rt.prover = None
        if self.lock is not None:
            self.lock.release()
            self.lock = None
        log.info("left the registry and released the device")

    # -- run ----------------------------------------------------------------------------------------
    def celery_argv(self, loglevel: str = "INFO") -> list[str]:
        node = self.rt.worker.nodename if self.rt.worker else f"{self.role}@{self.host}"
        return ["worker", "-Q", ",".join(self.queues), "-n", node, "-P", self.pool,
                "-c", str(self.concurrency), "-l", loglevel, "--without-gossip", "--without-mingle",
                "-E"]

    def run(self, loglevel: str = "INFO") -> int:
        quiet_chord_errors()
        # the start logs before Celery sets up logging (worker_main): a handler of its own
        # until then, or its INFO lines (each start phase, the key's sections) are lost
        handler = None
        root = logging.getLogger()
        if not root.handlers:
            handler = logging.StreamHandler(sys.__stderr__)
            handler.setFormatter(logging.Formatter(START_LOG_FORMAT))
            root.addHandler(handler)
            root.setLevel(loglevel.upper() if isinstance(loglevel, str) else loglevel)
        try:
            self.start()
        finally:
            if handler is not None:
                root.removeHandler(handler)
        try:
            app.worker_main(self.celery_argv(loglevel))
        except SystemExit as e:
            return int(e.code or 0)
        finally:
            self.shutdown()
        return 0


def warm_celery() -> None:
    """What Celery's worker start does first and the same every time, done now: a standby does it
    while it waits, so that after the takeover the start is only the worker's own (its consumer,
    the broker). Measured on the dev VM (2 cores): ``app.worker_main`` to ``worker_ready`` took
    0.38-0.43 s cold and 0.15-0.16 s after this; the standby's "celery start" phase after a
    takeover was 0.571 s. Most of it is imports: ``celery.bin.celery`` loads the command line
    (click-repl, prompt-toolkit) and every ``celery.commands`` plugin (Flower's command, and
    through it tornado), then the result backend's class is looked up by name among the entry
    points (~0.1 s). The backend made here is the one the worker uses (``app.backend`` is
    cached on the app)."""
    import celery.apps.worker  # noqa: F401  (the worker's banner, its signal handlers)
    import celery.bin.celery  # noqa: F401  (the command line and its plugins)
    app.backend  # noqa: B018  (by_url: the entry points' scan, then the instance, cached)


def prepare_circuits(names, keys) -> threading.Event:
    """Start a thread that does the host work of loading each of ``names``'s keys: the compact
    matrices (built, or read from $ZKHIVE_CACHE_DIR/r1cs) and their digest, then (the returned
    event set: the load may start) where the key cache holds a bellperson .params, the
    densities and their indices, cached on the matrices where the .params reader finds them
    (gpu/groth16/bellperson.py shape_of: a reader that asks meanwhile waits for this one) while
    the dense sections stream. Meanwhile the caller makes the device's context and loads its
    modules. Errors are left for the load, which does the same work again and raises them."""
    host = threading.Event()

    def run():
        from gpu.backends.forms import circuit_digest
        from gpu.groth16 import bellperson
        from gpu.native.compact import compact_of
        from synthesis.circuits import get_circuit

        later = []
        try:
            for name in names:
                try:
                    c = get_circuit(name)
                    circuit_digest(compact_of(c) if hasattr(c, "compact_r1cs") else c.r1cs())
                    path = keys.find(c, "params")
                    if path is not None and path.suffix == ".params":
                        later.append(c)
                except Exception as e:   # the load says it
                    log.debug("preparing %s: %s", name, e)
            if later:   # the verifying key's point checks: built on a machine's first start
                bellperson._host()   # (points_host.cpp, g++ -O3: 6.3 s on the dev machine)
        except Exception as e:
            log.debug("preparing the host point checks: %s", e)
        finally:
            host.set()
        for c in later:
            try:
                bellperson.densities_of(c)
            except Exception as e:
                log.debug("preparing %s's densities: %s", c.name, e)

    threading.Thread(target=run, name="prepare-circuits", daemon=True).start()
    return host


class _ChordOfAFailedJob(logging.Filter):
    """Celery's Redis backend logs ``Chord %r raised: %r`` with a traceback at ERROR when a chord's
    member failed; ours fail on purpose when their job fails (bad input, retries spent), which
    the job's error already says in one line. Every bad job wrote a ChordError traceback into a
    worker's log (issue 27): now one WARNING line, no traceback. Any other ChordError (a join
    error of the backend itself) keeps its ERROR and traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        from celery.exceptions import ChordError

        args = record.args if isinstance(record.args, tuple) else ()
        if record.msg == "Chord %r raised: %r" and len(args) == 2 and isinstance(args[1], ChordError) \
                and "JobFailed" in str(args[1]):
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            record.exc_info = record.exc_text = None
            record.msg, record.args = "chord %s not run: its job failed (%s)", (args[0], str(args[1])[:300])
        return True


def quiet_chord_errors() -> None:
    logger = logging.getLogger("celery.backends.redis")
    if not any(isinstance(f, _ChordOfAFailedJob) for f in logger.filters):
        logger.addFilter(_ChordOfAFailedJob())


class TimeLimits:
    """Soft and hard time limits for a task running in the main thread (the solo pool).

    The soft limit is SIGALRM, whose handler raises SoftTimeLimitExceeded inside the task (the
    prove task then retries the partition on another device). The hard limit is a timer thread
    that calls ``on_hard`` (default: end the process): a task stuck in native code never returns
    to the interpreter to see the soft limit.
    """

    def __init__(self, on_hard=None):
        self.on_hard = on_hard or _hard_limit_exit
        self._timer: threading.Timer | None = None

    def arm(self, name: str, soft: float | None, hard: float | None) -> None:
        self.disarm()
        if soft:
            signal.signal(signal.SIGALRM, _raise_soft_limit)
            signal.setitimer(signal.ITIMER_REAL, soft)
        if hard:
            self._timer = threading.Timer(hard, self.on_hard, args=(name, hard))
            self._timer.daemon = True
            self._timer.start()

    def disarm(self) -> None:
        if threading.current_thread() is threading.main_thread():
            signal.setitimer(signal.ITIMER_REAL, 0)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def _raise_soft_limit(signum, frame):
    raise SoftTimeLimitExceeded("soft time limit exceeded")


def _hard_limit_exit(name: str, seconds: float) -> None:
    # the task did not stop at its soft limit (stuck in native code): end the process like
    # Celery's prefork pool ends a child; late acks leave the message for another device
    print(f"zkhive worker: task {name} passed its hard time limit of {seconds} s; exiting",
          file=sys.stderr, flush=True)
    os._exit(HARD_LIMIT_EXIT)

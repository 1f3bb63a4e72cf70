"""cuzk's ProvingEngine over the cluster: each call of the service mapped onto zkhive's jobs.

    SubmitProof   cluster.pipeline.workflow.submit_job: request_id is the job id (the same id
                  again is the same job, never a second proof, unless the job FAILED or was
                  CANCELLED: the same input then starts a new attempt, cuzk's retry; another
                  input under the id is ALREADY_EXISTS); priority LOW/NORMAL/HIGH/CRITICAL
                  -> bulk/normal/high/critical; vanilla_proof a Commit2 input or a zkhive C1
                  document (cluster.gateway.c2input)
    AwaitProof    the job store's state, read when the job ends (its ending published:
                  endings.py) and polled; the proof is the job's N x 192 bytes; timings from
                  the job's timeline (``timings``)
    Prove         SubmitProof + AwaitProof. The job does not depend on the call: a prover killed
                  under it is re-dispatched by the watchdog and the call still gets the proof; a
                  call cut off (client gone, gateway restarted) leaves the job running, and the
                  caller's retry with the same request_id finds it
    CancelProof   cluster.client.cancel
    GetStatus     the registry (provers, their devices, memory, resident keys, the partition in
                  hand), the key cache (keys on disk only: COLD), the job store (queued/running
                  jobs, totals), as the status board last read them (status.py: a thread of its
                  own refreshes it every 0.25 s while someone asks)
    GetMetrics    the exporter's collector (cluster.ops.metrics), in this process
    PreloadSRS,   the provers' remote-control commands (cluster.pipeline.srs_control)
    EvictSRS

WINNING_POST and WINDOW_POST_PARTITION are PoSt jobs (cluster.gateway.postinput), SNAP_DEALS_UPDATE
an update job (cluster.gateway.snap); a bad request is INVALID_ARGUMENT with one line naming the field; an unknown job
NOT_FOUND.
"""
from __future__ import annotations

import logging
import re
import threading
import time

import grpc

from cluster.errors import BlobStoreFull, DispatchBusy, JobConflict, JobError
from cluster.pipeline import registry, timeline
from cluster.pipeline.jobs import DONE, FAILED, QUEUED, RUNNING, TERMINAL

from . import c2input
from .endings import Endings
from .status import Snapshot, StatusBoard
from .wire import PRIORITIES, Abort  # noqa: F401 - PRIORITIES: the gateway's names, read by tests too
from .pb import proving_pb2 as pb
from .pb import proving_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)

#: cuzk's name of PoRep C2 (QueueStatus.proof_kind, GPUStatus.current_proof_kind), the default kind
POREP = "porep-c2"
#: timeline stages that are not device compute (cluster.pipeline.tasks)
NOT_COMPUTE = ("fetch_assignment", "key_load")
#: AwaitProof's poll: a call is woken when its job ends (endings.py); the poll only covers a
#: message lost while the subscription reconnects
POLL_S = 0.2
#: AwaitProof's poll for a critical job (a WinningPoSt: its whole budget is a few seconds, goal
#: 1 s): few such jobs wait at once
POLL_CRITICAL_S = 0.02
#: submissions in progress at once (the others wait their turn, on their gateway threads)
SUBMITTING = 2
#: a proving key's file in the key cache (cluster.pipeline.keys): name, digest, kind
KEY_FILE = re.compile(r"(.+)\.([0-9a-f]{16})\.(pk|params)")


def _line(e: BaseException) -> str:
    return (str(e).splitlines() or [type(e).__name__])[0]


def timings(events: list[dict], submitted_at: float, finished_at: float | None) -> dict[str, int]:
    """cuzk's stage timings of a job, in ms, from its timeline: queue wait (submission to the
    first synthesis), key loads, synthesis (every partition's, summed), device compute (the
    prover stages, summed over partitions and devices) and the total (submission to the end).
    A retried job's timeline holds every attempt: only the last (after its ``attempt`` event) counts."""
    last = max((i for i, e in enumerate(events) if e["event"] == "attempt"), default=None)
    if last is not None:
        events = events[last:]
    first_synth = min((e["t"] for e in events if e["event"] == "synthesis_start"), default=None)
    starts: dict[int, float] = {}
    synth = load = compute = 0.0
    for e in events:
        ev, k = e["event"], e.get("partition")
        if ev == "synthesis_start" and k is not None:
            starts[k] = e["t"]
        elif ev == "synthesis_end" and k in starts:
            synth += max(0.0, e["t"] - starts.pop(k))
        elif ev == "stage":
            if e.get("stage") == "key_load":
                load += float(e.get("seconds") or 0)
            elif e.get("stage") not in NOT_COMPUTE:
                compute += float(e.get("seconds") or 0)
    end = finished_at if finished_at is not None else time.time()
    ms = lambda s: int(round(max(0.0, s) * 1000))
    return {"queue_wait_ms": ms(first_synth - submitted_at) if first_synth else 0,
            "srs_load_ms": ms(load), "synthesis_ms": ms(synth), "gpu_compute_ms": ms(compute),
            "total_ms": ms(end - submitted_at)}


def circuit_name(circuit_id: str) -> str:
    """Our parameter set for a circuit id: our own names as they are, and cuzk's ids
    (``porep-32g``, ``porep-2k``; ``wpost-32g``, ``winning-32g``) as the Filecoin family's
    (``filecoin-32g``; ``window-post-32g``, ``winning-post-32g``) where it is registered.
    KeyError (one line) for anything else."""
    from synthesis.circuits import get_circuit, known

    from synthesis.limits import clip

    try:
        return get_circuit(circuit_id).name
    except KeyError as e:
        why = e.args[0] if e.args else str(e)   # the close names and the families: one line
    for theirs, ours in (("porep-", "filecoin-"), ("wpost-", "window-post-"), ("winning-", "winning-post-")):
        alias = ours + circuit_id[len(theirs):]
        if circuit_id.startswith(theirs) and alias in known():
            return alias
    raise KeyError(f"circuit_id {clip(circuit_id)} is not a parameter set of this cluster, nor "
                   f"cuzk's porep-/wpost-/winning- id of one ({why.split('; ', 1)[-1]})")


class ProvingEngine(pb_grpc.ProvingEngineServicer):
    def __init__(self, rt, *, control_timeout_s: float = 30.0):
        from cluster.ops.metrics import make_registry

        self.rt = rt
        self.started = time.time()
        self.control_timeout_s = control_timeout_s
        self._metrics_registry, _ = make_registry(rt.redis, rt.settings.metrics.job_window)
        #: submissions decoded and dispatched at once: the work is Python (one interpreter lock),
        #: so more only makes every thread, GetStatus's too, wait longer for its turn
        self._submitting = threading.BoundedSemaphore(SUBMITTING)
        #: GetStatus's answer and the queue order, refreshed by a thread of their own (status.py)
        #: (job id, attempt) -> (kind, priority, submitted_at) of the active jobs, kept by
        #: ``_snapshot`` (the status board's thread; a caller too when that thread is stuck: an
        #: entry lost to two writers is only read again)
        self._records: dict[tuple[str, bytes], tuple[str, int, float]] = {}
        self._board = StatusBoard(self._snapshot)
        #: wakes AwaitProof calls when their job ends (one subscription, a thread of its own)
        self._endings = Endings(rt.redis)

    # -- the calls --------------------------------------------------------------------------------
    def SubmitProof(self, request, context):
        return self._call(context, lambda: self._submit(request)[0])

    def AwaitProof(self, request, context):
        return self._call(context, lambda: self._await(request.job_id, request.timeout_ms, context))

    def Prove(self, request, context):
        def run():
            if not request.HasField("submit"):
                raise Abort(grpc.StatusCode.INVALID_ARGUMENT, "field submit: missing")
            resp, _ = self._submit(request.submit)
            return pb.ProveResponse(result=self._await(resp.job_id, 0, context))
        return self._call(context, run)

    def CancelProof(self, request, context):
        return self._call(context, lambda: self._cancel(request.job_id))

    def GetStatus(self, request, context):
        return self._call(context, self._status)

    def GetMetrics(self, request, context):
        from prometheus_client import generate_latest

        return self._call(context, lambda: pb.GetMetricsResponse(
            prometheus_text=generate_latest(self._metrics_registry).decode()))

    def PreloadSRS(self, request, context):
        return self._call(context, lambda: self._preload(request.circuit_id))

    def EvictSRS(self, request, context):
        return self._call(context, lambda: self._evict(request.circuit_id))

    def _call(self, context, fn):
        import redis

        from kombu.exceptions import OperationalError

        try:
            return fn()
        except Abort as e:
            context.abort(e.code, str(e))
        except redis.exceptions.RedisError as e:
            context.abort(grpc.StatusCode.UNAVAILABLE, f"the cluster's Redis does not answer: "
                                                       f"{str(e).splitlines()[0] if str(e) else type(e).__name__}")
        # the codes say whether to retry (docs/gateway.md): a full store passes, a bad id never does
        except BlobStoreFull as e:
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, f"{_line(e)}; retry later")
        except JobError as e:  # a malformed job id (AwaitProof, CancelProof): never valid
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"field job_id: {_line(e)}")
        except (OperationalError, ConnectionError) as e:  # the broker's connection (kombu)
            context.abort(grpc.StatusCode.UNAVAILABLE, f"the cluster's broker does not answer: {_line(e)}")

    # -- submit and await ---------------------------------------------------------------------------
    def _submit(self, req) -> tuple[pb.SubmitProofResponse, bool]:
        with self._submitting:
            return self._submit_one(req)

    def _submit_one(self, req) -> tuple[pb.SubmitProofResponse, bool]:
        kind = req.proof_kind
        if kind in (pb.WINNING_POST, pb.WINDOW_POST_PARTITION):  # cluster.gateway.postinput
            from . import postinput
            return postinput.submit(self, req)
        if kind == pb.SNAP_DEALS_UPDATE:  # SnapDeals: cluster/gateway/snap.py makes the job document
            from . import snap
            if req.priority not in PRIORITIES:
                raise Abort(grpc.StatusCode.INVALID_ARGUMENT, f"field priority: {req.priority} is not a Priority")
            try:
                return self._submit_doc(req, snap.job_document(req))
            except snap.SnapRequestError as e:
                raise Abort(grpc.StatusCode.INVALID_ARGUMENT, str(e)) from None
        if kind != pb.POREP_SEAL_COMMIT:
            raise Abort(grpc.StatusCode.INVALID_ARGUMENT,
                        f"field proof_kind: {kind} is not a proof kind (PoRep C2 is POREP_SEAL_COMMIT = 1)")
        if req.priority not in PRIORITIES:
            raise Abort(grpc.StatusCode.INVALID_ARGUMENT, f"field priority: {req.priority} is not a Priority")
        limits = self.rt.settings.limits.limits()
        try:
            c2 = c2input.decode(req.vanilla_proof, limits, miner_id=req.miner_id or None)
            # a Filecoin C1 held against the request as seal_commit_phase2 holds it (docs/gateway.md)
            c2input.check_filecoin(c2, registered_proof=req.registered_proof, sector_number=req.sector_number,
                                   miner_id=req.miner_id)
        except c2input.C2InputError as e:
            raise Abort(grpc.StatusCode.INVALID_ARGUMENT, str(e)) from None
        if req.sector_size and c2.sector_size and req.sector_size != c2.sector_size:
            raise Abort(grpc.StatusCode.INVALID_ARGUMENT,
                        f"field sector_size: {req.sector_size}, but the Commit2 input's SectorSize is {c2.sector_size}")
        return self._submit_doc(req, c2.doc)

    def _submit_doc(self, req, doc: dict) -> tuple[pb.SubmitProofResponse, bool]:
        """Submit a checked job document under the request's id and priority."""
        from cluster.pipeline.workflow import submit_job

        try:
            rec, created = submit_job(self.rt, doc, job_id=req.request_id or None,
                                      priority=PRIORITIES[req.priority])
        except JobConflict as e:
            raise Abort(grpc.StatusCode.ALREADY_EXISTS, f"field request_id: {e}") from None
        except DispatchBusy as e:  # a retry succeeds: cuzk clients retry RESOURCE_EXHAUSTED
            raise Abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(e).splitlines()[0]) from None
        except JobError as e:
            text = str(e).splitlines()[0]
            code = (grpc.StatusCode.RESOURCE_EXHAUSTED if "broker memory full" in text
                    else grpc.StatusCode.INVALID_ARGUMENT)
            raise Abort(code, f"field request_id: {text}" if text.startswith("job id") else text) from None
        log.info("%s %s (%s, %d partitions, priority %s)", rec.job_id,
                 "submitted" if created else "already submitted", rec.params, rec.num_partitions,
                 PRIORITIES[req.priority])
        return pb.SubmitProofResponse(job_id=rec.job_id, queue_position=self._queue_position(rec)), created

    def _queue_position(self, rec) -> int:
        """Jobs not yet started that are served before this one (higher priority, or the same
        and submitted earlier), from the status board's snapshot (cluster/gateway/status.py: at
        most a refresh old, so jobs submitted in the last moments may be missing); 0 once it runs."""
        if self.rt.jobs.status(rec.job_id) != QUEUED:
            return 0
        return self._board.latest().served_before(rec.priority, rec.submitted_at)

    def _await(self, job_id: str, timeout_ms: int, context) -> pb.AwaitProofResponse:
        jobs = self.rt.jobs
        rec = jobs.get(job_id) if job_id else None
        if rec is None:
            raise Abort(grpc.StatusCode.NOT_FOUND, f"field job_id: no job {job_id!r} (never submitted, or expired)")
        end = time.monotonic() + timeout_ms / 1000 if timeout_ms else None
        poll = POLL_CRITICAL_S if rec.priority == 0 else POLL_S
        with self._endings.watch(job_id) as ended:  # watched before the first read: no ending missed
            while True:
                st = jobs.state(job_id)
                status = st.get("status")
                if status in TERMINAL:
                    return self._result(rec, st)
                now = time.monotonic()
                if end is not None and now >= end:
                    return pb.AwaitProofResponse(job_id=job_id, status=pb.AwaitProofResponse.TIMEOUT,
                                                 error_message=f"job {job_id} is still {status} after {timeout_ms} ms")
                if context is not None and not context.is_active():
                    # the caller is gone (cancelled, deadline, disconnected): the job goes on
                    return pb.AwaitProofResponse(job_id=job_id, status=pb.AwaitProofResponse.UNKNOWN)
                ended.wait(poll if end is None else max(0.0, min(poll, end - now)))
                ended.clear()

    def _result(self, rec, st: dict) -> pb.AwaitProofResponse:
        status = st["status"]
        finished = float(st["finished_at"]) if st.get("finished_at") else None
        t = timings(timeline.load(self.rt.redis, rec.job_id), rec.submitted_at, finished)
        if status == DONE:
            doc = self.rt.blobs.get_json(st["result"])
            proof = bytes.fromhex(doc["proof"])
            if len(proof) != 192 * rec.num_partitions:  # never expected: the aggregation checked it
                raise Abort(grpc.StatusCode.INTERNAL, f"job {rec.job_id}: the stored proof has {len(proof)} "
                                                      f"bytes, not {rec.num_partitions} x 192")
            return pb.AwaitProofResponse(job_id=rec.job_id, status=pb.AwaitProofResponse.COMPLETED,
                                         proof=proof, **t)
        code = pb.AwaitProofResponse.FAILED if status == FAILED else pb.AwaitProofResponse.CANCELLED
        return pb.AwaitProofResponse(job_id=rec.job_id, status=code, error_message=st.get("error", ""), **t)

    def _cancel(self, job_id: str) -> pb.CancelProofResponse:
        from cluster.client import cancel

        before = self.rt.jobs.status(job_id) if job_id else None
        try:
            cancelled = cancel(job_id)
        except KeyError:
            raise Abort(grpc.StatusCode.NOT_FOUND, f"field job_id: no job {job_id!r}") from None
        return pb.CancelProofResponse(was_running=bool(cancelled and before == RUNNING))

    # -- status -----------------------------------------------------------------------------------------
    def _status(self) -> pb.GetStatusResponse:
        return self._board.latest().response

    def _snapshot(self) -> Snapshot:
        """GetStatus's answer and the queue order, read from the registry, the key cache and
        the job store (made by the status board's thread, cluster/gateway/status.py). Queues by
        cuzk's proof kind (the job record's ``kind``): PoRep's always, the others when they
        hold a job."""
        import json

        r = self.rt.redis
        queued: list[tuple[int, float]] = []
        kind_of: dict[str, str] = {}
        by_kind: dict[str, list[int]] = {POREP: [0, 0]}  # kind -> [pending, in progress]
        active = self.rt.jobs.active()
        # each active job's status and attempt; its record (kind, priority, submission time:
        # fixed within an attempt) read and parsed only when this attempt is not known yet, so
        # a snapshot during a burst is one small reply a job, not a record parsed per job
        known = self._records
        live: dict[tuple[str, bytes], tuple[str, int, float]] = {}
        for i in range(0, len(active), 500):  # one round trip per 500 jobs
            pipe = r.pipeline(transaction=False)
            chunk = active[i:i + 500]
            for job_id in chunk:
                pipe.hmget(f"zkhive:job:{job_id}:state", "status", "attempt")
            states = pipe.execute()
            todo = [(j, st, att or b"1") for j, (st, att) in zip(chunk, states)
                    if st in (QUEUED.encode(), RUNNING.encode())]
            missing = [(j, att) for j, _, att in todo if (j, att) not in known]
            if missing:
                pipe = r.pipeline(transaction=False)
                for job_id, _ in missing:
                    pipe.get(f"zkhive:job:{job_id}")
                for seen, raw in zip(missing, pipe.execute()):
                    if raw is not None:
                        rec = json.loads(raw)
                        known[seen] = (str(rec.get("kind") or POREP), int(rec["priority"]),
                                       float(rec["submitted_at"]))
            for job_id, st, att in todo:
                got = known.get((job_id, att))
                if got is None:  # ended and expired between the two reads
                    continue
                live[(job_id, att)] = got
                kind, priority, submitted_at = got
                kind_of[job_id] = kind
                counts = by_kind.setdefault(kind, [0, 0])
                if st == QUEUED.encode():
                    counts[0] += 1
                    queued.append((priority, submitted_at))
                else:
                    counts[1] += 1
        self._records = live  # only the jobs still active are kept
        queued.sort()
        # a standby prover ([worker] prover_standby) is not a GPU of its own
        provers = [w for w in registry.workers(r, role="prove") if not w.standby]
        gpus = []
        for w in provers:
            job = w.inflight[0].rpartition("/")[0] if w.inflight else ""
            kind = w.device_kind or ""
            ordinal = int(w.device.rpartition(":")[2]) if w.device and w.device[-1:].isdigit() else 0
            gpus.append(pb.GPUStatus(ordinal=ordinal, name=f"{w.device} {w.worker_id}" if kind else w.worker_id,
                                     vram_total_bytes=w.total_memory or 0, vram_free_bytes=w.free_memory or 0,
                                     current_job_id=job, current_proof_kind=kind_of.get(job, POREP) if job else ""))
        resident: dict[str, int] = {}
        for w in provers:
            for name in w.resident_keys:
                resident[name] = resident.get(name, 0) + 1
        cached = self._cached_keys()
        srs = [pb.SRSStatus(circuit_id=name, tier=pb.SRSStatus.HOT, size_bytes=cached.get(name, 0))
               for name in sorted(resident)]
        srs += [pb.SRSStatus(circuit_id=name, tier=pb.SRSStatus.COLD, size_bytes=size)
                for name, size in sorted(cached.items()) if name not in resident]
        queues = [pb.QueueStatus(proof_kind=k, pending=p, in_progress=n)
                  for k, (p, n) in sorted(by_kind.items(), key=lambda kv: (kv[0] != POREP, kv[0]))]
        done, failed = self.rt.jobs.totals()
        return Snapshot(at=time.monotonic(), queued=queued, response=pb.GetStatusResponse(
            gpus=gpus, loaded_srs=srs, queues=queues,
            total_proofs_completed=done, total_proofs_failed=failed,
            uptime_seconds=int(time.time() - self.started)))

    def _cached_keys(self) -> dict[str, int]:
        """Parameter sets with a proving key in the key cache, ``<params>.<digest16>.pk`` (or
        bellperson's ``.params`` under the same name): {name: bytes}."""
        out: dict[str, int] = {}
        root = self.rt.keys.root
        for p in root.iterdir() if root.is_dir() else ():
            m = KEY_FILE.fullmatch(p.name)
            if m is None:
                continue
            try:
                out[m.group(1)] = max(out.get(m.group(1), 0), p.stat().st_size)
            except OSError:
                continue
        return out

    # -- resident keys ------------------------------------------------------------------------------------
    def _provers(self) -> list:
        provers = [w for w in registry.workers(self.rt.redis, role="prove", ready_only=True) if w.nodename]
        if not provers:
            raise Abort(grpc.StatusCode.UNAVAILABLE, "no prover is ready in the cluster")
        return provers

    def _ask(self, command: str, circuit_id: str) -> tuple[str, list, dict[str, dict]]:
        from cluster.pipeline.app import app
        from cluster.pipeline.srs_control import ask_provers

        try:
            name = circuit_name(circuit_id)
        except KeyError as e:
            raise Abort(grpc.StatusCode.NOT_FOUND, e.args[0]) from None
        provers = self._provers()
        replies = ask_provers(app, command, name, [w.nodename for w in provers], self.control_timeout_s)
        bad = [f"{node}: {rep.get('error')}" for node, rep in replies.items() if not rep.get("ok")]
        if bad:
            raise Abort(grpc.StatusCode.FAILED_PRECONDITION, f"{name}: " + "; ".join(bad))
        if not replies:
            raise Abort(grpc.StatusCode.DEADLINE_EXCEEDED,
                        f"{name}: no prover answered within {self.control_timeout_s:g} s (gateway.control_timeout_s): "
                        f"each answers between proofs")
        return name, provers, replies

    def _preload(self, circuit_id: str) -> pb.PreloadSrsResponse:
        from cluster.pipeline.srs_control import PRELOAD

        _, _, replies = self._ask(PRELOAD, circuit_id)
        return pb.PreloadSrsResponse(already_loaded=all(r.get("already") for r in replies.values()),
                                     load_time_ms=max(int(r.get("ms", 0)) for r in replies.values()))

    def _evict(self, circuit_id: str) -> pb.EvictSrsResponse:
        from cluster.pipeline.srs_control import EVICT

        _, _, replies = self._ask(EVICT, circuit_id)
        return pb.EvictSrsResponse(was_loaded=any(r.get("was_loaded") for r in replies.values()),
                                   freed_bytes=sum(int(r.get("freed", 0)) for r in replies.values()))


"""Per-job timelines: every partition's events with wall-clock timestamps, in one Redis list.

Events (``event`` field): ``queued``, ``synthesis_start``/``synthesis_end``, ``prove_routed``
(queue chosen), ``prove_pickup`` (a prover took the message), ``stage`` (one prover stage with
start and end, from gpu.timing.StageTimer), ``prove_end``, ``duplicate`` (a second proof of a
partition, discarded), ``lease_lapsed`` (a unit's worker stopped renewing its lease),
``holder_gone`` (a unit's worker, a process of the sweeping machine, is gone: before the lapse),
``unaccounted`` (a unit neither queued, leased nor done: lost in the hand-over), ``redispatched``
(with ``waited_s``), ``redelivered``, ``key_load_wait`` (a partition waits for its proving key
to load: not resident, not preloaded; the load is then the ``key_load`` stage), ``verify_failed``,
``waiting_for_space`` / ``space_returned`` (a unit waits for room in the blob store, then resumes),
``aggregated``, ``failed``, ``deadline_missed`` (beside ``failed`` at the job's deadline: kind,
priority, the setting), ``cancelled``, ``attempt`` (a failed or cancelled job resubmitted:
the events after it are the new attempt's). ``zkhive timeline JOB`` prints them and draws a Gantt chart.
"""
from __future__ import annotations

import json
import time
from contextlib import contextmanager
from typing import Any, Iterable

from .jobkeys import key as job_key


def key(job_id: str) -> str:
    """The job's event list (one of the job keys listed in cluster.pipeline.jobs; the id is
    checked by cluster.pipeline.jobkeys)."""
    return job_key(job_id, "events")


def emit(r, job_id: str, event: str, *, partition: int | None = None, ttl_s: int = 7 * 86400,
         t: float | None = None, **fields: Any) -> None:
    doc = {"t": time.time() if t is None else t, "event": event, "partition": partition, **fields}
    pipe = r.pipeline()
    pipe.rpush(key(job_id), json.dumps(doc))
    pipe.expire(key(job_id), ttl_s)
    pipe.execute()


@contextmanager
def stage(r, name: str, *, job: str, partition: int | None = None, device: str | None = None, **fields):
    """Time one stage and record it as a ``stage`` event (start, end, seconds)."""
    start = time.time()
    try:
        yield
    finally:
        end = time.time()
        emit(r, job, "stage", partition=partition, t=start, stage=name, start=start, end=end,
             seconds=end - start, device=device, **fields)


def load(r, job_id: str) -> list[dict]:
    return sorted((json.loads(x) for x in r.lrange(key(job_id), 0, -1)), key=lambda e: e["t"])


# -- rendering ---------------------------------------------------------------------------------

def format_text(job_id: str, events: list[dict]) -> str:
    if not events:
        return f"job {job_id}: no events (unknown job, or expired)"
    t0 = events[0]["t"]
    lines = [f"job {job_id}: {len(events)} events, t=0 at "
             f"{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(t0))} UTC",
             f"{'t (s)':>9}  {'part':>4}  {'event':<16} detail"]
    for e in events:
        part = "" if e.get("partition") is None else str(e["partition"])
        detail = {k: v for k, v in e.items() if k not in ("t", "event", "partition", "start", "end")}
        if e["event"] == "stage":
            detail = {"stage": e["stage"], "seconds": round(e["seconds"], 4),
                      **({"device": e["device"]} if e.get("device") else {})}
        text = " ".join(f"{k}={v}" for k, v in detail.items() if v is not None)
        lines.append(f"{e['t'] - t0:9.3f}  {part:>4}  {e['event']:<16} {text}")
    return "\n".join(lines)


def spans(events: list[dict]) -> list[tuple[int | None, str, float, float]]:
    """(partition, label, start, end) bars: queue wait, synthesis, wait for a prover, each prove
    stage, and the aggregation."""
    out = []
    by_part: dict[int, dict[str, float]] = {}
    queued = {}
    agg_start = None
    for e in events:
        p = e.get("partition")
        ev = e["event"]
        if ev == "queued" and p is not None:
            queued[p] = e["t"]
        elif ev in ("synthesis_start", "synthesis_end", "prove_pickup") and p is not None:
            by_part.setdefault(p, {}).setdefault(ev, e["t"])
        elif ev == "stage" and p is not None:
            out.append((p, e["stage"], e["start"], e["end"]))
        elif ev == "aggregate_start":
            agg_start = e["t"]
        elif ev == "aggregated" and agg_start is not None:
            out.append((None, "aggregate", agg_start, e["t"]))
    for p, marks in by_part.items():
        if p in queued and "synthesis_start" in marks:
            out.append((p, "queued", queued[p], marks["synthesis_start"]))
        if "synthesis_start" in marks and "synthesis_end" in marks:
            out.append((p, "synthesis", marks["synthesis_start"], marks["synthesis_end"]))
        if "synthesis_end" in marks and "prove_pickup" in marks:
            out.append((p, "wait_prover", marks["synthesis_end"], marks["prove_pickup"]))
    return sorted(out, key=lambda s: (s[0] is None, s[0] or 0, s[2]))


def gantt_png(job_id: str, events: list[dict], path) -> None:
    """A Gantt chart, one row per partition (and one for the aggregation), to ``path``."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bars = spans(events)
    if not bars:
        raise ValueError(f"job {job_id} has no timed spans to draw")
    t0 = min(s[2] for s in bars)
    rows = sorted({s[0] for s in bars if s[0] is not None}) + ([None] if any(s[0] is None for s in bars) else [])
    labels = sorted({s[1] for s in bars})
    cmap = plt.get_cmap("tab20")
    color = {lab: cmap(i % 20) for i, lab in enumerate(labels)}
    fig, ax = plt.subplots(figsize=(10, 1.2 + 0.5 * len(rows)))
    for p, label, start, end in bars:
        y = rows.index(p)
        ax.barh(y, max(end - start, 1e-4), left=start - t0, color=color[label], edgecolor="black",
                linewidth=0.3, label=label)
    ax.set_yticks(range(len(rows)), [f"partition {p}" if p is not None else "aggregate" for p in rows])
    ax.invert_yaxis()
    ax.set_xlabel("seconds since the first event")
    ax.set_title(f"zkhive job {job_id}")
    handles, names = ax.get_legend_handles_labels()
    uniq = dict(zip(names, handles))
    ax.legend(uniq.values(), uniq.keys(), loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def stage_records_to_events(r, job_id: str, partition: int, device: str, records: Iterable[dict], ttl_s: int) -> None:
    """Turn a gpu.timing.StageTimer's records into ``stage`` events in one round trip."""
    pipe = r.pipeline()
    for rec in records:
        doc = {"t": rec["start"], "event": "stage", "partition": partition, "stage": rec["stage"],
               "start": rec["start"], "end": rec["end"], "seconds": rec["seconds"], "device": device}
        pipe.rpush(key(job_id), json.dumps(doc))
    pipe.expire(key(job_id), ttl_s)
    pipe.execute()

"""The task layer: a job's path from submission to proof, and the workers that run it.

    app        the Celery app (``celery -A cluster.pipeline.app``), its delivery settings, the
               per-process Runtime (Redis, blob store, job store, key cache, dispatch)
    queues     queue names, priority levels, queue depth and the messages waiting
    jobs       the job store: a job's record, partitions, and each final transition once
    workflow   submission and dispatch: the chord of synthesis -> prove chains, by task name
    routing    which device queue proves a partition (key residency, room, load)
    tasks      the Celery tasks (``zkhive.*`` names) and their bodies
    retry      the one retry policy: transient, unverifiable, lost, bad input
    blobs      the blob store that carries C1 inputs, assignments and results
    timeline   per-job events (emit, stage, load) and their text and Gantt rendering
    registry   the worker registry (roles, devices, resident keys, heartbeats)
    keys       the proving-key cache on disk
    prover     a device's Prover: the one owner of which keys are resident
    prefetch   a prover's prove-ahead of the next partitions
    lifecycle  a worker process from start to shutdown: device lock, keys, readiness, signals
    watchdog   re-dispatches lost partitions and unassigned prove tasks
    busy_heartbeat  a solo-pool worker's Celery heartbeat while its task runs

May import: ``arith``, ``synthesis``, ``gpu`` and cluster's base modules (``cluster.errors``,
``cluster.settings``, ``cluster.version``). Never ``cluster.ops``, ``cluster.user``,
``cluster.client`` or ``cluster.cli``: workers run this package without the operator's tools or
the command line (tests/unit/test_layering.py holds it to that).
"""

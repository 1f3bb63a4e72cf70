"""zkhive's cluster: where and when a C2 job is proved (Celery + Redis).

Three subpackages, each importing only the ones below it (tests/unit/test_layering.py)::

    cluster.user      the user's commands (submit, status, timeline, prove, demo, ...)
    cluster.ops       the operator's tools (up, down, ps, restart, supervisor, keeper, metrics)
    cluster.pipeline  the task layer: app, queues, jobs, workflow, routing, tasks, workers

and, below all three, a few modules at this level::

    cluster.client    the Python API (submit, cancel, get_job); imports cluster.pipeline only
    cluster.cli       the ``zkhive`` command: builds its parser from each package's commands
                      (by module name: it imports none of them), CommandError, cli_name
    cluster.errors    the error tree
    cluster.settings  the settings model (TOML file + ZKHIVE_<SECTION>__<KEY>)
    cluster.version   package version and code digest

docs/architecture.md draws the whole picture and one job's path through these files.
"""

"""The user's commands: what ``zkhive`` does for someone who proves, submits and follows jobs.

    commands  ``zkhive worker``, ``keys``, ``submit``, ``result``, ``status``, ``timeline``,
              ``cancel``
    local     ``zkhive prove`` and ``verify`` on this machine, without a cluster
    progress  progress bars and spinners for the long waits
    demo      ``zkhive demo``: keys, ``up``, a sector, a job, its proof verified

May import everything below it: ``cluster.ops`` (demo starts a cluster; commands find the
running one through ``cluster.ops.current``), ``cluster.pipeline``, ``cluster.client``, the
base modules, and ``arith``/``synthesis``/``gpu``. Nothing imports it but ``cluster.cli``, by
name (``COMMAND_MODULES``).
"""

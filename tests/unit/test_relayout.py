"""tools/relayout.py, the rewriter of issue 18's move: imports, strings and paths are rewritten,
code that only looks like a module path is not, a second run changes nothing, and a merge
conflict is settled only where main's side was the move alone."""
from __future__ import annotations

from pathlib import Path

from tools import relayout as rl

ROOT = Path(rl.ROOT)


def test_imports_strings_and_paths_are_rewritten():
    src = ('from cluster import registry, settings\n'
           'from cluster.up_commands import plan, cmd_up\n'
           'from cluster.commands import _settings\n'
           'import cluster.jobs as jobs\n'
           'APP = ["-A", "cluster.app"]  # see cluster/tasks.py\n'
           'def f(cluster):\n'
           '    return cluster.jobs, cluster.keys\n')
    out = rl.rewrite_python(src, ROOT / "tests" / "unit" / "x.py")
    assert out.splitlines() == [
        "from cluster.pipeline import registry",
        "from cluster import settings",
        "from cluster.ops.plan import plan",
        "from cluster.ops.commands import cmd_up",
        "from cluster.ops.current import settings_for as _settings",
        "import cluster.pipeline.jobs as jobs",
        'APP = ["-A", "cluster.pipeline.app"]  # see cluster/pipeline/tasks.py',
        "def f(cluster):",
        "    return cluster.jobs, cluster.keys",  # a variable named cluster: left alone
    ]
    assert rl.rewrite_python(out, ROOT / "tests" / "unit" / "x.py") == out


def test_relative_imports_inside_cluster_follow_the_move():
    src = ("from .errors import JobError\n"
           "from .jobs import TERMINAL\n"
           "from .routing import queued_messages, route_partition\n"
           "from . import registry, current\n")
    out = rl.rewrite_python(src, ROOT / "cluster" / "pipeline" / "x.py")
    assert out.splitlines() == [
        "from cluster.errors import JobError",
        "from .jobs import TERMINAL",  # the same subpackage: stays relative
        "from .queues import queued_messages",
        "from .routing import route_partition",
        "from . import registry",
        "from cluster.ops import current",
    ]


def test_free_text_is_rewritten_once():
    text = "celery -A cluster.app worker; cluster/metrics.py; cluster.json; cluster.client.submit"
    once = rl.rewrite_text(text)
    assert once == ("celery -A cluster.pipeline.app worker; cluster/ops/metrics.py; cluster.json; "
                    "cluster.client.submit")
    assert rl.rewrite_text(once) == once
    assert rl.rewrite_text("cluster.up_commands.detect_devices") == "cluster.ops.plan.detect_devices"


def test_a_conflict_is_settled_only_where_main_made_the_move_alone():
    mechanical = ("<<<<<<< ours\n# my new words (cluster.jobs)\n"
                  "||||||| base\n# old words (cluster.jobs)\n"
                  "=======\n# old words (cluster.pipeline.jobs)\n>>>>>>> theirs\n")
    text, settled, left = rl.resolve_text("a\n" + mechanical + "b\n")
    assert (text, settled, left) == ("a\n# my new words (cluster.pipeline.jobs)\nb\n", 1, 0)
    real = mechanical.replace("# old words (cluster.pipeline.jobs)", "# main's new words")
    text, settled, left = rl.resolve_text(real)
    assert (text, settled, left) == (real, 0, 1)


def test_an_edit_to_a_split_module_finds_its_new_place():
    """A hunk of a branch's edit to up_commands.py lands where its old lines stand now, compared
    after the move's renames (here: a relative import made absolute); else nowhere."""
    hunk = [(" ", "    _metrics_behind_auth()\n"), ("+", "    bound(s)\n"),
            (" ", "    from .app import app\n")]
    target = ["def cmd_flower(args):\n", "    _metrics_behind_auth()\n",
              "    from cluster.pipeline.app import app\n", "    app.start()\n"]
    at = rl._place(hunk, target)
    assert at == 1
    assert rl._apply(hunk, target, at) == ["def cmd_flower(args):\n", "    _metrics_behind_auth()\n",
                                           "    bound(s)\n", "    from cluster.pipeline.app import app\n",
                                           "    app.start()\n"]
    assert rl._place([(" ", "    not here\n"), ("+", "x\n")], target) is None


def test_the_rewriter_leaves_this_test_and_its_table_alone():
    assert not rl._wanted(Path(__file__)) and not rl._wanted(Path(rl.__file__))

"""``python -m cluster ...`` is the ``zkhive`` command (for checkouts that are not pip-installed)."""
import sys

from cluster.cli import main

sys.exit(main())

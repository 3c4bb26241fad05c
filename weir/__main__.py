"""``python -m weir`` is the ``weir`` command."""

import sys

from weir.engine.cli import main

sys.exit(main())

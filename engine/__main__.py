import sys

from weir.engine.cli import main

sys.exit(main())

"""``python -m app ...``: the ``bench`` command without its console script."""

import sys

from app.cli import main

sys.exit(main())

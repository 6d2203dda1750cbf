"""``python -m infralens``: see :mod:`infralens.cli`."""

import sys

from infralens.cli import main

sys.exit(main())

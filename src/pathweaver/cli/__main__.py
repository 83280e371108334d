"""``python -m pathweaver.cli``: the command line, as the ``pathweaver`` script runs it."""

import sys

from pathweaver.cli import main

sys.exit(main())

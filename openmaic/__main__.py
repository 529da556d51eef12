"""``python -m openmaic``: the same command line as the ``openmaic`` script."""

from openmaic.cli import main

raise SystemExit(main())

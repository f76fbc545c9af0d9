"""``python -m hycq.cli``: the ``hycq`` command."""

from hycq.cli.app import main

raise SystemExit(main())

"""`python -m dltestbed` is the CLI."""

from dltestbed.cli import main

raise SystemExit(main())

"""What each command asks of the library, as one frozen request made of typed groups: each group one panel of the
command's `--help`, its options declared once on its fields (dltestbed/panels.py). Pure data, no import of the
library behind it: the CLI reads these for `--help` (bench/cli_start.py measures its start-up)."""

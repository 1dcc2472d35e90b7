"""Stands in for a target's Python in runner tests: replays a captured workload stdout.

Env: REPLAY_FILE (lines to print), REPLAY_EXIT (exit code, default 0), REPLAY_STDERR (a line for
stderr), REPLAY_KILL (send itself this signal after the lines), REPLAY_HANG (then wait to be stopped,
as a co-tenant or a distributed worker waiting for its peer does), REPLAY_DONE (a file to create once every
line is written). Arguments are ignored.
"""

import os
import sys

with open(os.environ["REPLAY_FILE"], encoding="utf-8") as f:
    for line in f:
        sys.stdout.write(line)
        sys.stdout.flush()
if os.environ.get("REPLAY_DONE"):
    open(os.environ["REPLAY_DONE"], "w").close()
if os.environ.get("REPLAY_STDERR"):
    print(os.environ["REPLAY_STDERR"], file=sys.stderr)
if os.environ.get("REPLAY_KILL"):
    os.kill(os.getpid(), int(os.environ["REPLAY_KILL"]))
if os.environ.get("REPLAY_HANG"):
    import time

    while True:
        time.sleep(1)
sys.exit(int(os.environ.get("REPLAY_EXIT", "0")))

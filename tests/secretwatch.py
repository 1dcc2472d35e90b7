"""Watch for a secret leaking: every process on this machine (lab hosts, containers and their CLIs,
ansible, ssh) is read for it — its environment and its command line — while the CLI runs, and every
file written under given folders since the watch began is grepped for it afterwards.

The CLI processes the test started are not read: they were given the secret (as a user exports it),
and /proc/PID/environ shows a process's environment as it started, not as it is now. Nor is a fork of
one of them in the instant before it execs its program (same command line as its parent): it holds a
copy of the CLI's memory, and what it then runs gets the environment the CLI passes on."""

from __future__ import annotations

import os
import secrets
import stat
import threading
import time
from collections.abc import Iterable
from pathlib import Path


def new_token() -> str:
    """A token no file or process could hold by chance."""
    return "tok-" + secrets.token_hex(16)


class SecretWatch:
    """`with SecretWatch(token) as w:` … then w.leaks (processes), w.files(roots) (files), w.seen (names)."""

    def __init__(self, secret: str, every: float = 0.05, cli_children: bool = True) -> None:
        """cli_children: the test's children are CLIs given the secret (not read); False when the
        test calls dltestbed in its own process, so that its children are what is watched."""
        self.secret = secret.encode()
        self.cli_children = cli_children
        self.every = every
        self.leaks: list[str] = []  # "pid comm (environ|cmdline)" of each process that held it
        self.seen: set[str] = set()  # the command names of every process read
        self.procs: dict[int, tuple[int, str, int, str]] = {}  # pid → parent, name, real uid, command line (last read)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self.started = 0.0

    def __enter__(self) -> SecretWatch:
        self.started = time.time()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _loop(self) -> None:
        me = os.getpid()
        while not self._stop.is_set():
            for entry in os.scandir("/proc"):
                if entry.name.isdigit():
                    self._read(entry.name, me)
            self._stop.wait(self.every)

    def _read(self, pid: str, me: int) -> None:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            comm = stat[stat.index("(") + 1 : stat.rindex(")")]
            ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            uid = int(
                next(x for x in Path(f"/proc/{pid}/status").read_text().splitlines() if x.startswith("Uid:")).split()[1]
            )
            known = self.procs.get(int(pid))
            shown = cmdline.replace(b"\0", b" ").decode(errors="replace")
            if not shown and known is not None and known[0] == ppid:
                shown = known[3]  # a process that has exited (a zombie) shows no command line: keep the last one
            self.procs[int(pid)] = (ppid, comm, uid, shown)
            if int(pid) == me or (self.cli_children and ppid == me):
                return  # the test itself, or a CLI the test started (given the secret)
            if self.cli_children and self._is_cli(ppid, me) and cmdline == Path(f"/proc/{ppid}/cmdline").read_bytes():
                return  # the CLI forked, not yet exec'd
            self.seen.add(comm)
            for part in ("environ", "cmdline"):
                if self.secret in Path(f"/proc/{pid}/{part}").read_bytes():
                    self.leaks.append(f"{pid} {comm} ({part})")
        except (OSError, ValueError, IndexError):
            return  # gone, or not ours to read

    def descendants(self, root: int) -> list[tuple[int, str, int, str]]:
        """The processes seen below `root` (pid, name, real uid, command line), as their parents were read. A child
        last seen between its fork and its exec (a short-lived command: it ran and ended between two reads) is a
        copy of its parent, its user and command line the parent's: it is not a process of its own, and is left
        out (read while a charliecloud bench ran, it once counted as a root process the bench had started)."""
        below = {root}
        grew = True
        while grew:
            new = {pid for pid, (ppid, *_) in self.procs.items() if ppid in below and pid not in below}
            below |= new
            grew = bool(new)
        return [
            (pid, *self.procs[pid][1:])
            for pid in sorted(below - {root})
            if pid in self.procs and not self._unexeced(pid)
        ]

    def _unexeced(self, pid: int) -> bool:
        """Whether a process was last read as a copy of its parent (forked, not yet exec'd)."""
        ppid, _, uid, shown = self.procs[pid]
        parent = self.procs.get(ppid)
        return parent is not None and (parent[2], parent[3]) == (uid, shown)

    @staticmethod
    def _is_cli(pid: int, me: int) -> bool:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat[stat.rindex(")") + 2 :].split()[1]) == me

    def _holds(self, path: Path) -> bool:
        keep = len(self.secret) - 1
        # O_NONBLOCK: should the path have become a FIFO since it was checked, opening it does not wait for a writer
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW), "rb") as f:
            tail = b""
            while chunk := f.read(1 << 20):
                if self.secret in tail + chunk:
                    return True
                tail = chunk[-keep:]
        return False

    def files(self, roots: Iterable[Path]) -> list[str]:
        """Regular files under `roots` written since the watch began that hold the secret. Nothing else is
        opened: a FIFO (a Podman container's `ctl` and `winsz` in its store) would block the read forever.
        Nor is another filesystem mounted below a root entered (a proc or sysfs mount of a chroot being
        built: reading /proc/kmsg waits for the kernel's next message)."""
        found = []
        for root in roots:
            try:
                dev = os.stat(root).st_dev  # a root given as a link: the filesystem it leads to
            except OSError:
                continue  # no such folder: nothing written there
            for dirpath, dirs, names in os.walk(root):
                dirs[:] = [d for d in dirs if _same_device(Path(dirpath) / d, dev)]
                for name in names:
                    path = Path(dirpath) / name
                    try:
                        st = path.lstat()
                        if not stat.S_ISREG(st.st_mode) or st.st_dev != dev or st.st_mtime < self.started - 1:
                            continue
                        if self._holds(path):
                            found.append(str(path))
                    except OSError:
                        continue
        return found


def _same_device(path: Path, dev: int) -> bool:
    try:
        return path.lstat().st_dev == dev
    except OSError:
        return False

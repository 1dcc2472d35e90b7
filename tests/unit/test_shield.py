"""A cleanup runs to its end through a second Ctrl-C; the stop is raised after it."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from dltestbed.shield import shielded


def test_a_signal_during_a_cleanup_is_raised_after_it() -> None:
    # Python's own handler, whatever this process was started with (a shell's background job ignores SIGINT)
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        done = []
        with pytest.raises(KeyboardInterrupt), shielded():
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while the container is being removed
            done.append("removed")
        assert done == ["removed"]
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back
    finally:
        signal.signal(signal.SIGINT, before)


def test_a_cleanup_of_a_stop_in_progress_lets_that_stop_go_on() -> None:
    with pytest.raises(SystemExit):
        try:
            raise SystemExit(130)  # the bench is ending on the first Ctrl-C
        finally:
            with shielded():
                os.kill(os.getpid(), signal.SIGINT)  # the second, while the store is closed


def test_no_signal_nothing_raised_and_other_threads_untouched() -> None:
    with shielded():
        pass
    seen = []
    t = threading.Thread(target=lambda: seen.append(shielded().__enter__() is None))
    t.start()
    t.join()
    assert seen == [True]

"""The `dltestbed` command. Expected errors are one red line and a non-zero exit; unexpected ones
write their traceback to a debug log and say where.

The command modules import dltestbed's other layers inside their functions: for start-up time only
(`dltestbed --help` loads none of them; bench/cli_start.py measures it), never to hide a cycle."""

from __future__ import annotations

import signal
import sys
import traceback
from pathlib import Path
from typing import Any

import typer

from dltestbed import __version__, secretenv
from dltestbed.cli import accept as _accept
from dltestbed.cli import bench as _bench
from dltestbed.cli import data as _data
from dltestbed.cli import image as _image
from dltestbed.cli import lab as _lab
from dltestbed.cli import provision as _provision
from dltestbed.cli import results as _results
from dltestbed.cli import runs as _runs
from dltestbed.cli import teardown as _teardown
from dltestbed.cli import validate as _validate
from dltestbed.errors import DltestbedError, Stopped
from dltestbed.shield import STOP_SIGNALS

app = typer.Typer(
    name="dltestbed",
    help="Measure what each layer — VM, container — costs a deep-learning workload, on your own hardware.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        print(f"dltestbed {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """Measure what each layer — VM, container — costs a deep-learning workload, on your own hardware."""


app.command("bench", epilog=_bench.EXAMPLES)(_bench.bench)
app.command("provision", epilog=_provision.EXAMPLES)(_provision.provision)
app.command("runs")(_runs.runs)
app.command("report")(_runs.report)
app.command("validate")(_validate.validate)
app.command("accept", epilog=_accept.EXAMPLES)(_accept.accept)
app.command("push")(_results.push)
app.command("teardown")(_teardown.teardown)
app.add_typer(_data.app, name="data")
app.add_typer(_lab.app, name="lab")
app.add_typer(_image.app, name="image")
app.add_typer(_results.app, name="results", hidden=True)


def debug_log_path() -> Path:
    """$DLTESTBED_DEBUG_LOG, else $XDG_STATE_HOME/dltestbed/debug.log (~/.local/state/...)."""
    from dltestbed import paths

    return paths.debug_log()


def error_line(message: str) -> None:
    """Print `error: message` on stderr, red on a terminal, never wrapped."""
    from rich.console import Console
    from rich.markup import escape

    Console(stderr=True, soft_wrap=True).print(f"[bold red]error:[/] {escape(message)}", highlight=False)


def _write_debug_log() -> Path | None:
    path = debug_log_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as f:
            f.write(f"--- dltestbed {__version__}: {' '.join(sys.argv)}\n")
            traceback.print_exc(file=f)
    except OSError:
        return None
    return path


def _interrupt(signum: int, frame: object) -> None:
    """The first stop: raised where the program is, so every `finally` (containers, VMs, the run's
    status, the stream) runs; a later one only says that it is under way."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, _stopping)
    raise KeyboardInterrupt


def _stopping(signum: int, frame: object) -> None:
    sys.stderr.write("stopping: cleaning up (containers, VMs, the runs' status); it ends by itself\n")


def main(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code. Run as the program (argv None), a Ctrl-C that comes once
    the command has ended — while the first one's exit is under way — changes nothing. Called with
    argv (in a test), it leaves the signal handlers as it found them."""
    saved = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    try:
        return _main(argv)
    except KeyboardInterrupt:  # outside any command's own handling: between its end and here
        error_line("interrupted")
        return 130
    finally:
        for sig, old in saved.items():
            signal.signal(sig, signal.SIG_IGN if argv is None else old)


def _stops_said(command: Any) -> None:
    """A stop that reaches the top of a command (one that has no handling of its own, such as a check under
    way) is said in one line: typer would turn it into a silent exit 130."""
    invoke = command.invoke

    def said(ctx: Any) -> Any:
        try:
            return invoke(ctx)
        except KeyboardInterrupt:
            raise Stopped("stopped (Ctrl-C or a stop signal) before it finished") from None

    command.invoke = said


def _main(argv: list[str] | None) -> int:
    from typer import exceptions as typer_exc
    from typer._click import exceptions as click_exc
    from typer.main import get_command

    from dltestbed.cli.helpstyle import tidy
    from dltestbed.cli.voice import bad_parameter

    command = get_command(app)
    tidy(command)
    _stops_said(command)
    secretenv.take(fresh=True)  # the stream's token stays in this process: no child (ansible, docker, ssh) inherits it
    # SIGTERM and SIGHUP stop dltestbed the way Ctrl-C does, so teardown (containers, remote
    # workloads, the run's status) always runs; a plain kill would skip every `finally`. A second
    # Ctrl-C does not cut that cleanup short.
    for sig in STOP_SIGNALS:
        signal.signal(sig, _interrupt)
    try:
        rv = command.main(args=argv, prog_name="dltestbed", standalone_mode=False)
    except DltestbedError as exc:
        error_line(str(exc))
        return exc.exit_code
    except click_exc.NoArgsIsHelpError as exc:
        text = exc.format_message()  # typer's rich help has printed itself already; plain help has not
        if text:
            print(text)
        return 0
    except click_exc.BadParameter as exc:
        error_line(bad_parameter(exc, sys.argv[1:] if argv is None else argv))
        return exc.exit_code
    except click_exc.UsageError as exc:
        where = f" (see '{exc.ctx.command_path} --help')" if exc.ctx else ""
        error_line(exc.format_message().replace("Value error, ", "") + where)
        return exc.exit_code
    except click_exc.ClickException as exc:
        error_line(exc.format_message())
        return exc.exit_code
    except typer_exc.Abort:
        error_line("aborted")
        return 130
    except SystemExit as exc:  # typer exits this way on a closed stdout (EPIPE)
        return exc.code if isinstance(exc.code, int) else 1
    except Exception as exc:
        log = _write_debug_log()
        where = f"traceback in {log}" if log else "no debug log could be written"
        error_line(f"internal error: {type(exc).__name__}: {exc} ({where})")
        return 70
    return rv if isinstance(rv, int) else 0

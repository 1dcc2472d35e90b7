"""One root error; every expected failure is a subclass and becomes one line at the CLI."""


class DltestbedError(Exception):
    """An expected failure: the CLI prints its message as one line and exits with `exit_code`."""

    exit_code = 2


class Stopped(DltestbedError):
    """Ctrl-C or a stop signal ended a command that had no handling of its own for it."""

    exit_code = 130


class ConfigError(DltestbedError):
    """Bad input: an option, a plan, a path."""


class DataError(ConfigError):
    """A dataset folder that is missing, empty or malformed."""


class StoreError(DltestbedError):
    """The results store cannot be opened or written."""


class WorkloadError(DltestbedError):
    """A workload run failed (it is still stored, with status `failed`)."""

    exit_code = 1


class TargetError(DltestbedError):
    """A target could not run a command."""

    exit_code = 1


class HostKeyError(TargetError):
    """A host's SSH key changed since it was recorded, or was never recorded: checked before a bench runs."""

    exit_code = 2


class StreamError(DltestbedError):
    """The time-series server cannot be reached or refuses the writes (checked before a bench starts)."""


class SlurmError(DltestbedError):
    """Slurm refused or lost the bench's allocation (salloc's own line, or the job's state)."""


_PYDANTIC = {
    "Input should be a valid integer": "a whole number",
    "Input should be a valid number": "a number",
    "Input should be a valid boolean": "true or false",
    "Input should be greater than or equal to": "at least",
    "Input should be greater than": "more than",
    "Input should be less than or equal to": "at most",
    "Input should be less than": "less than",
}


def plain(message: str) -> str:
    """A pydantic or parser message in dltestbed's words: `Input should be greater than 0` → `more than 0`."""
    message = message.removeprefix("Value error, ")
    for theirs, ours in _PYDANTIC.items():
        if message.startswith(theirs):
            rest = message[len(theirs) :].split(",")[0]
            return (ours + rest).strip()
    return message

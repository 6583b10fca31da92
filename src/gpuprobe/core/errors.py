"""The errors gpuprobe raises on purpose: each carries a message for people and an exit code.

The command line prints ``gpuprobe: <message>`` on one line and exits with the code; a traceback
means a bug in gpuprobe, never bad input. From Python, :class:`UsageError` (a wrong argument)
and :class:`InputError` (bad data) are both also a :class:`ValueError`, so ``except ValueError``
catches them as it would a wrong argument or bad data anywhere; ``except GpuprobeError``
catches every error gpuprobe raises on purpose.
"""

from __future__ import annotations

__all__ = [
    "EXIT_CHECK_FAILED",
    "EXIT_OK",
    "EXIT_PARTIAL",
    "EXIT_USAGE",
    "GpuprobeError",
    "InputError",
    "UsageError",
    "bad_argument",
]

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_USAGE = 2
# the analysis is partial: some of its inputs (ranks of a job) could not be read and are named
EXIT_PARTIAL = 3


class GpuprobeError(Exception):
    """An error with a one-line message saying what was wrong and what to do."""

    exit_code: int = EXIT_CHECK_FAILED

    def __init__(
        self, message: str, exit_code: int | None = None, *, cli_message: str | None = None
    ) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code
        self._cli_message = cli_message

    @property
    def message(self) -> str:
        """The one-line message for people (a wrong argument named as Python's parameter)."""
        return str(self.args[0]) if self.args else self.__class__.__name__

    @property
    def cli_message(self) -> str:
        """The same for the command line (a wrong argument named as its ``--flag``)."""
        return self._cli_message or self.message


class UsageError(GpuprobeError, ValueError):
    """Bad usage of a command or function: a wrong option, an unknown name. Also a
    :class:`ValueError`, so ``except ValueError`` catches a wrong argument as it would anywhere."""

    exit_code = EXIT_USAGE


class InputError(GpuprobeError, ValueError):
    """Bad input data: a file that is not what it should be, a value out of range. Also a
    :class:`ValueError` (as ``json.JSONDecodeError`` and ``numpy``'s shape errors are), so
    ``except ValueError`` catches bad data given to a function as it would anywhere."""

    exit_code = EXIT_USAGE


def bad_argument(
    param: str, value: object, why: str, *, flag: str | None = None, shown: str | None = None
) -> UsageError:
    """A wrong argument, named as the caller wrote it: ``hz=100: give 0.1 to 20 samples per
    second`` from Python, ``--hz 100: ...`` on the command line (which prints
    :attr:`GpuprobeError.cli_message`). ``flag``: the option when it is not the parameter's
    name with dashes; ``shown``: the value as the command line writes it (``1,x`` for a list)."""
    option = flag or "--" + param.replace("_", "-")
    return UsageError(
        f"{param}={value!r}: {why}",
        cli_message=f"{option} {value if shown is None else shown}: {why}",
    )

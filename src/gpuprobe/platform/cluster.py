"""Connecting to an existing Dask scheduler: an answer, or one line, within a deadline. The one
door to a running cluster, for ``scale lstsq --scheduler`` and ``doctor --cluster``.

``distributed.Client(address)`` trusts the other end. Against a listener that accepts and never
answers it waits for the handshake without a deadline (``distributed.comm.core.connect`` reads it
with no timeout: more than 150 s, then a hang); against a web server it reads the server's
``HTTP/1.1 400`` as a message length and asks numpy for 3 EiB; against ``notaurl::::`` or
``http://…`` it fails after 20 s; and each failure leaves a half-made ``Client`` whose ``__del__``
prints a traceback while it times out again.

:func:`connect_client` asks first, with the whole exchange under one deadline in a thread of
its own: it connects with Dask's own transport (any scheme, the security settings of Dask's
config, as a ``Client`` would) and sends the ``identity`` request every Dask server answers.
Only an answer from a ``Scheduler`` makes a ``Client``; anything else is a
:class:`~gpuprobe.core.errors.UsageError` saying what answered.

Times in this module are seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import threading
from collections.abc import Callable, Iterator
from typing import Any

from gpuprobe.core.errors import GpuprobeError, InputError, UsageError
from gpuprobe.core.text import strip_control

__all__ = [
    "CONNECT_TIMEOUT_MAX_S",
    "CONNECT_TIMEOUT_S",
    "SchedulerLost",
    "check_connect_timeout",
    "close_client",
    "connect_client",
    "connect_cluster",
    "identify",
    "quiet_dask",
    "scheduler_file_address",
    "scheduler_gone",
]

# s for a --scheduler to answer as a Dask scheduler. The 10 s gpuprobe gave Client() before;
# Dask's own default (distributed.comm.timeouts.connect) is 30 s, the most the issue allows.
CONNECT_TIMEOUT_S = 10.0
# s, the longest --connect-timeout taken (an hour): a larger one is a typo, and thread joins
# and asyncio refuse timeouts past about 2**31 s with an OverflowError.
CONNECT_TIMEOUT_MAX_S = 3600.0
# s the caller waits past the deadline for the probe's thread to finish cancelling
_JOIN_GRACE_S = 1.0

_START = "start one with `dask scheduler` and `dask worker ADDRESS`, or leave --scheduler out"


def check_connect_timeout(seconds: float) -> float:
    """``seconds`` if it is a usable connect timeout, else a :class:`UsageError`."""
    if not (isinstance(seconds, int | float) and math.isfinite(seconds)) or not (
        0 < seconds <= CONNECT_TIMEOUT_MAX_S
    ):
        raise UsageError(
            f"--connect-timeout {seconds!r}: give seconds above 0, at most "
            f"{CONNECT_TIMEOUT_MAX_S:g}"
        )
    return float(seconds)


async def _identity(address: str, timeout: float) -> Any:
    from distributed.comm import connect
    from distributed.security import Security

    args = Security().get_connection_args("client")  # what Client() would use
    comm = await connect(address, timeout=timeout, **args)
    try:
        await comm.write({"op": "identity", "reply": True})
        return await comm.read()
    finally:
        comm.abort()


def _why(exc: BaseException) -> str:
    """What a failed probe says about the other end, in words."""
    text = strip_control(str(exc))
    if isinstance(exc, MemoryError):  # b"HTTP/1.1" read as a frame length: 3.5e18 bytes
        return (
            "something answered, but not in Dask's protocol (its reply read as a larger "
            "message than memory)"
        )
    if isinstance(exc, EOFError) or not isinstance(exc, ValueError | OSError | TypeError):
        # bytes of another protocol read as a Dask frame: a length of exabytes, a cut frame
        return f"something answered, but not in Dask's protocol ({type(exc).__name__})"
    if type(exc).__module__.split(".")[0] == "msgpack":  # a frame of bytes that are not msgpack
        return f"something answered, but not in Dask's protocol ({type(exc).__name__}: {text})"
    if isinstance(exc, ValueError):  # distributed's parser: no scheme it knows, no port
        return f"not a Dask address ({text})"
    return f"cannot connect to a Dask scheduler there ({text})"  # refused, TLS or UCX set-up


def identify(
    address: str, timeout: float, flag: str = "--scheduler", hint: str = _START
) -> dict[str, Any]:
    """What answers at ``address``: the reply to Dask's ``identity`` request (``type`` is
    ``"Scheduler"`` for a scheduler), or a :class:`UsageError` within ``timeout`` seconds whose
    line names the address as ``flag`` gave it and ends with ``hint``."""
    timeout = check_connect_timeout(timeout)
    if address.split("://", 1)[0].lower() in ("http", "https"):
        raise UsageError(
            f"{flag} {strip_control(address)}: a web address (a Dask dashboard?); give the "
            "scheduler's own address, tcp://HOST:PORT (port 8786 by default), as `dask "
            "scheduler` prints it"
        )
    out: dict[str, Any] = {}

    def probe() -> None:
        try:
            out["reply"] = asyncio.run(asyncio.wait_for(_identity(address, timeout), timeout))
        except BaseException as exc:  # reported by the caller, in words
            out["error"] = exc

    t = threading.Thread(target=probe, name="gpuprobe-scheduler-probe", daemon=True)
    t.start()
    t.join(timeout + _JOIN_GRACE_S)
    exc = out.get("error")
    where = f"{flag} {strip_control(address)}"
    if t.is_alive() or isinstance(exc, TimeoutError | asyncio.TimeoutError):
        raise UsageError(
            f"{where}: no answer as a Dask scheduler within {timeout:g} s "
            f"(--connect-timeout); is it one? {hint}"
        )
    if exc is not None:
        raise UsageError(f"{where}: {_why(exc)}; {hint}")
    reply = out.get("reply")
    kind = reply.get("type") if isinstance(reply, dict) else None
    if not isinstance(reply, dict) or kind != "Scheduler":
        what = (
            f"a Dask {strip_control(kind)[:40]}, not" if isinstance(kind, str) and kind else "not"
        )
        raise UsageError(
            f"{where}: {what} a Dask scheduler; give the scheduler's address, "
            "the one its workers connect to"
        )
    return reply


def connect_client(
    address: str, timeout: float = CONNECT_TIMEOUT_S, flag: str = "--scheduler", hint: str = _START
) -> Any:
    """A ``distributed.Client`` on the scheduler at ``address``, after :func:`identify` has
    heard it answer as one (a :class:`UsageError` otherwise, within ``timeout`` seconds)."""
    try:
        from distributed import Client
    except ImportError:
        from gpuprobe.platform.install import DASK_INSTALL

        raise UsageError(f"{flag} needs Dask's distributed: {DASK_INSTALL}") from None

    identify(address, timeout, flag, hint)
    try:
        return Client(address, timeout=timeout, set_as_default=False)
    except (OSError, TimeoutError) as exc:  # it answered a moment ago: gone, or overloaded
        raise UsageError(
            f"{flag} {strip_control(address)}: the scheduler answered, then the client "
            f"could not connect ({exc}); try again, or give a longer --connect-timeout"
        ) from None


def scheduler_file_address(path: str) -> str:
    """The address in a scheduler file (``dask scheduler --scheduler-file``, dask-jobqueue):
    read here, so that a file that is not there is one line at once (Dask's own client waits for
    it to appear)."""
    import json

    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as e:
        raise InputError(
            f"--scheduler-file {path}: {e.strerror or e}; give the file the scheduler wrote "
            "(dask scheduler --scheduler-file FILE)"
        ) from None
    except (ValueError, RecursionError) as e:
        raise InputError(f"--scheduler-file {path}: not a scheduler file ({e})") from None
    address = data.get("address") if isinstance(data, dict) else None
    if not isinstance(address, str) or not address:
        raise InputError(f"--scheduler-file {path}: no 'address' in it; is it a scheduler file?")
    return address


def connect_cluster(cluster: Any, timeout: float, hint: str = _START) -> tuple[Any, bool]:
    """A ``distributed.Client`` for ``cluster`` (a Client, a scheduler address, or
    ``{"scheduler_file": path}``: what ``--cluster`` and ``--scheduler-file`` give) and whether
    this call made it (and must close it). The address is asked what it is first
    (:func:`connect_client`): anything but a Dask scheduler answering within ``timeout`` s is
    one :class:`UsageError`."""
    if hasattr(cluster, "scheduler_info") and hasattr(cluster, "run"):  # a Client already
        return cluster, False
    flag = "--cluster"
    if isinstance(cluster, dict) and "scheduler_file" in cluster:
        flag = f"--scheduler-file {cluster['scheduler_file']}: the scheduler at"
        address = scheduler_file_address(str(cluster["scheduler_file"]))
    else:
        address = str(cluster)
    return connect_client(address, timeout, flag, hint), True


class SchedulerLost(GpuprobeError):
    """The scheduler stopped answering during a run: its workers' results are lost with it
    (exit code 1, one line naming the scheduler)."""


# s the scheduler has to answer again after a worker's answer was lost, before it is called gone
ALIVE_TIMEOUT_S = 3.0


def scheduler_gone(address: str, timeout: float = ALIVE_TIMEOUT_S) -> str | None:
    """Why the scheduler at ``address`` no longer answers as one (in words), or None when it
    does: asked after workers' answers were lost, so that a dead scheduler is named as such,
    not counted as every worker lost."""
    try:
        identify(address, timeout, "scheduler", "")
    except UsageError as exc:
        why = exc.message.split(": ", 1)[-1].rstrip("; ")
        return why
    return None


# Dask's own loggers: on a scheduler that goes away, or a client closed with work in flight, the
# client's event loop logs tracebacks (CommClosedError, CancelledError) to stderr; gpuprobe says
# what happened in its own line instead.
_DASK_LOGGERS = ("distributed", "tornado")


@contextlib.contextmanager
def quiet_dask(also: tuple[str, ...] = ()) -> Iterator[Callable[[], None]]:
    """Dask's loggers (and those named in ``also``) raised to CRITICAL while a run talks to a
    cluster, put back after; yields a function that keeps them quiet for good (a client that
    could not be closed goes on logging from its own thread, reconnecting to a scheduler that
    is gone; asyncio's "Task exception was never retrieved" for Dask's tasks cut short at
    exit)."""
    # each of Dask's loggers with a level of its own (distributed.client has one: set when
    # distributed is imported, from Dask's config), not only the parents
    with contextlib.suppress(ImportError):
        import distributed  # noqa: F401
    names = [n for n in logging.root.manager.loggerDict if n.split(".", 1)[0] in _DASK_LOGGERS]
    loggers = [logging.getLogger(n) for n in sorted({*_DASK_LOGGERS, *names, *also})]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)
    keep = [False]
    try:
        yield lambda: keep.__setitem__(0, True)
    finally:
        if not keep[0]:
            for lg, level in zip(loggers, levels, strict=True):
                lg.setLevel(level)


CLOSE_TIMEOUT_S = 5.0  # s a client has to close after a run
CLOSE_INTERRUPTED_S = 0.5  # s after Ctrl-C or SIGTERM: the process is about to exit anyway


def close_client(client: Any, timeout: float = CLOSE_TIMEOUT_S) -> bool:
    """Close ``client``, waiting at most ``timeout`` s (in a daemon thread: a scheduler that does
    not answer, or work in flight on a hung worker, does not hold the caller); whether it
    closed in time and cleanly. Never raises."""
    closed = [False]

    def close() -> None:
        with contextlib.suppress(Exception):
            client.close(timeout=timeout)
            closed[0] = client.status == "closed"

    t = threading.Thread(target=close, name="gpuprobe-client-close", daemon=True)
    t.start()
    t.join(timeout + _JOIN_GRACE_S)
    return closed[0] and not t.is_alive()

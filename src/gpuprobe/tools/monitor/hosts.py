"""Who the exporter answers (issue 40): an address to listen on that is one address, and
requests whose ``Host:`` header names this machine. A page in a browser on this machine whose
DNS name an attacker re-points at 127.0.0.1 (DNS rebinding) sends its own name as the Host;
refused, it reads nothing (the host name, GPU UUIDs, PIDs)."""

from __future__ import annotations

import contextlib
import socket

__all__ = ["BAD_REQUEST", "HOST_REFUSED", "HostCheck", "check_listen_host", "request_host"]


def check_listen_host(host: str) -> str:
    """``host`` if it names one address to listen on, else a :class:`UsageError`: an empty
    ``--host`` (an unset variable, ``--host "$HOST"``) would listen on every interface."""
    from gpuprobe.core.errors import UsageError

    if not isinstance(host, str) or not host.strip():
        raise UsageError(
            f"--host {host!r}: an empty address listens on every interface; give the address "
            "to listen on (127.0.0.1, the default; 0.0.0.0 for every interface on purpose)"
        )
    return host.strip()


_REFUSED_TEXT = (
    b"gpuprobe export: this request's Host header does not name this machine (a DNS-rebinding "
    b"page?); scrape it by its address or name, or start it with --allow-host NAME\n"
)
# the answer to a Host that is not this machine's: no metrics, and no echo of the name
HOST_REFUSED = (
    b"HTTP/1.0 403 Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\n"
    b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(_REFUSED_TEXT), _REFUSED_TEXT)
)
# two Host headers (RFC 9112 section 3.2: a server must answer 400)
BAD_REQUEST = b"HTTP/1.0 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


def request_host(request: bytes) -> str | bool | None:
    """The host a request names in its ``Host:`` header, lower-case, without the port or a
    trailing dot; None when it has none (HTTP/1.0); False when it has several (refused)."""
    end = request.find(b"\r\n\r\n")
    head = request[: end if end >= 0 else len(request)]
    found: list[str] = []
    for line in head.split(b"\n")[1:]:
        name, sep, value = line.partition(b":")
        if sep and name.strip().lower() == b"host":
            found.append(value.strip().decode("latin-1"))
    if not found:
        return None
    if len(found) > 1:
        return False
    text = found[0].lower()
    if text.startswith("["):  # [::1]:19400
        return text[1:].split("]", 1)[0]
    if text.count(":") == 1:
        text = text.split(":", 1)[0]
    return text.rstrip(".")


class HostCheck:
    """Which ``Host:`` headers the exporter answers: the address it listens on, ``localhost``,
    this machine's names (hostname, FQDN), every address of its interfaces when it listens on
    all of them, and the names given (``--allow-host``). Any other name is a page whose DNS
    name was pointed at this machine (DNS rebinding): a browser would let it read the host name
    and the GPU UUIDs. A request with no Host header (HTTP/1.0, no browser) is answered."""

    def __init__(self, host: str, bound: str, allow: tuple[str, ...] = ()) -> None:
        import ipaddress

        names = {"localhost", host.lower().strip("[]").rstrip("."), bound.lower()}
        names |= {n.lower().rstrip(".") for n in allow if n}
        hostname = socket.gethostname().lower()
        names |= {hostname, hostname.split(".", 1)[0]}
        try:
            wildcard = ipaddress.ip_address(bound).is_unspecified
        except ValueError:
            wildcard = False
        names |= {"127.0.0.1", "::1"}
        with contextlib.suppress(OSError):
            names.add(socket.getfqdn().lower().rstrip("."))
        if wildcard:
            names |= _machine_addresses()
        self.names = frozenset(n for n in names if n)

    def allows(self, name: str | bool | None) -> bool:
        """Whether a request whose Host is ``name`` (:func:`request_host`) is answered."""
        if name is None:
            return True
        if name is False:
            return False
        return str(name) in self.names


def _machine_addresses() -> set[str]:
    """Every IP address of this machine's interfaces (psutil), lower-case, without a zone."""
    try:
        import psutil

        addrs = psutil.net_if_addrs()
    except Exception:  # unreadable: only the names and the bound address are taken
        return set()
    return {
        a.address.split("%", 1)[0].lower()
        for entries in addrs.values()
        for a in entries
        if a.family in (socket.AF_INET, socket.AF_INET6)
    }

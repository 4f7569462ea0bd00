"""A private network (and mount) namespace for tests that aim a gateway at forbidden addresses.

A reference URL naming 10.0.0.1 or 169.254.169.254 must never be fetched, and a test of that
must not send a packet there even if the gateway were broken. Inside the sandbox the only
interface is a loopback that also carries the private, link-local and metadata addresses under
test, so whatever the gateway does stays on it, and a canary listening on each of those
addresses counts every connection that would have left the machine. The sandbox has its own
`/etc/hosts`, so a DNS name (`metadata.google.internal`, `internal.example`) really resolves
to such an address through the system resolver, as it would in production.

    with Sandbox.start(hosts={"internal.example": "10.0.0.1"}, addresses=[...]) as box:
        box.run(fn)            # fn runs on a thread inside the namespace (its sockets are there)
        box.launcher           # `nsenter ... --`: a process started under it lives there too

`dropped` addresses are routed to a link where nothing answers (a veth pair whose far end has
no address, the next hop a made-up MAC): every packet to them is silently lost, so a connect
hangs until the client's own timeout, as across a broken route or a dropping firewall.

Needs root (or CAP_SYS_ADMIN), `unshare`/`nsenter` (util-linux) and `ip` (iproute2):
without them the tests skip locally and fail on CI (`CI=true`).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import ctypes
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from ipaddress import ip_address
from pathlib import Path
from typing import TypeVar

import pytest

__all__ = ["Sandbox", "require_sandbox"]

T = TypeVar("T")

_CLONE_NEWNET = 0x40000000


def require_sandbox() -> None:
    """Skip (locally) or fail (CI) when network namespaces cannot be made here."""
    missing = [tool for tool in ("unshare", "nsenter", "ip") if shutil.which(tool) is None]
    reason = f"missing {', '.join(missing)}" if missing else ""
    if not reason:
        probe = subprocess.run(
            ["unshare", "--net", "--mount", "true"], capture_output=True, text=True, check=False
        )
        reason = probe.stderr.strip() if probe.returncode else ""
    if reason:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"network namespaces are required on CI: {reason}")
        pytest.skip(f"no network namespace: {reason}")


class Sandbox:
    def __init__(self, holder: subprocess.Popen[bytes], folder: Path) -> None:
        self._holder = holder
        self._folder = folder
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=8, thread_name_prefix="sandbox", initializer=self._enter
        )

    @classmethod
    @contextlib.contextmanager
    def start(
        cls,
        *,
        addresses: Sequence[str] = (),
        hosts: Mapping[str, str] | None = None,
        dropped: Sequence[str] = (),
    ) -> Iterator[Sandbox]:
        """A namespace whose loopback carries `addresses`, whose /etc/hosts has `hosts` and
        where packets to the `dropped` (IPv4) addresses vanish."""
        folder = Path(tempfile.mkdtemp(prefix="sandbox-"))
        lines = ["127.0.0.1 localhost", "::1 localhost ip6-localhost"]
        lines += [f"{address} {name}" for name, address in (hosts or {}).items()]
        (folder / "hosts").write_text("\n".join(lines) + "\n")
        steps = [f"mount --bind {folder / 'hosts'} /etc/hosts", "ip link set lo up"]
        for address in addresses:
            bits = 32 if ip_address(address).version == 4 else 128
            steps.append(f"ip addr add {address}/{bits} dev lo nodad")
        # Ready once the loopback shows every address usable (not `tentative`): an address is
        # bound by the tests right after, and one still being set up refuses the bind.
        wanted = ["127.0.0.1", "::1", *addresses]
        checks = " && ".join(f"ip addr show dev lo | grep -q ' {a}/'" for a in wanted)
        steps.append(
            f"{{ i=0; until {{ {checks}; }} && ! ip addr show dev lo | grep -q tentative;"
            " do i=$((i+1)); [ $i -lt 200 ] || exit 1; sleep 0.05; done; }"
        )
        if dropped:
            steps += ["ip link add drop0 type veth peer name drop1", "ip link set drop1 up"]
            steps += ["ip link set drop0 up", "ip addr add 198.18.255.254/32 dev drop0"]
        for address in dropped:
            steps.append(f"ip route add {address}/32 dev drop0 src 198.18.255.254")
            steps.append(
                f"ip neigh replace {address} lladdr 02:00:00:00:00:01 dev drop0 nud permanent"
            )
        # `cat` holds the namespaces open until our end of its stdin closes (also if we die).
        script = " && ".join([*steps, "echo ready", "exec cat >/dev/null"])
        holder = subprocess.Popen(
            ["unshare", "--net", "--mount", "--propagation", "private", "sh", "-c", script],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert holder.stdout is not None
        if holder.stdout.readline().strip() != b"ready":
            holder.kill()
            _, err = holder.communicate(timeout=5)
            shutil.rmtree(folder, ignore_errors=True)
            raise AssertionError(f"the sandbox did not start: {err.decode(errors='replace')}")
        box = cls(holder, folder)
        try:
            yield box
        finally:
            box._pool.shutdown(wait=True, cancel_futures=True)
            assert holder.stdin is not None
            holder.stdin.close()
            try:
                holder.wait(timeout=5)
            except subprocess.TimeoutExpired:
                holder.kill()
                holder.wait(timeout=5)
            for pipe in (holder.stdout, holder.stderr):
                if pipe is not None:
                    pipe.close()
            shutil.rmtree(folder, ignore_errors=True)

    @property
    def launcher(self) -> list[str]:
        """Prefix of a command that should run inside (both namespaces); it execs in place."""
        pid = self._holder.pid
        return ["nsenter", f"--net=/proc/{pid}/ns/net", f"--mount=/proc/{pid}/ns/mnt", "--"]

    def run(self, fn: Callable[..., T], *args: object) -> T:
        """`fn(*args)` on a thread inside the network namespace; its result or its exception."""
        return self._pool.submit(fn, *args).result()

    def _enter(self) -> None:
        fd = os.open(f"/proc/{self._holder.pid}/ns/net", os.O_RDONLY)
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.setns(fd, _CLONE_NEWNET) != 0:
                errno = ctypes.get_errno()
                raise OSError(errno, f"setns: {os.strerror(errno)}")
        finally:
            os.close(fd)

"""Session-wide fixtures shared by every test package.

`redis_binary`: the redis-server binary, for tests that run (and stop) a Redis of their own.
`redis_url`: a real Redis for the whole session. `REDIS_URL` when set; otherwise a private
`redis-server` on a free port (no persistence) started here and stopped at the end. Without
either, Redis tests skip locally and fail on CI (`CI=true`), where a missing Redis is a bug.
Tests isolate themselves with a key prefix of their own (see tests/store/conftest.py), or with
a database of that Redis that they flush.

Under pytest-xdist (on by default, pyproject.toml) each worker is its own session: its own
private redis-server, temporary folders and ports (tests/support/ports.py). A `REDIS_URL` would
be one server for every worker, whose databases the tests flush: with it, run `-n 0`.
The tests of a module that share a module fixture (a gateway, most often) run on one worker (the
module is their xdist group), so the fixture is made once; tests marked `SERIAL` or
`STORE_FAULTS` (tests/support/serial.py) share one group each instead.
"""

from __future__ import annotations

import gc
import os
import shutil
import ssl
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.redis_server import RedisServer
from tests.support.serial import EXCLUSIVE_MARK, LONG_GROUPS, count_exclusive, turn

__all__ = [
    "pytest_collection_finish",
    "pytest_collection_modifyitems",
    "pytest_configure",
    "pytest_runtest_protocol",
    "redis_binary",
    "redis_url",
]


def _one_tls_context_for_httpx() -> None:
    """httpx builds a TLS context for every client it makes (each `httpx.get`, each SDK client),
    parsing certifi's CA bundle: ~54 ms of CPU each, measured, about two per end-to-end test.
    Every connection of the tests is plain HTTP to a local process, so the default context is
    built once and shared (an SSLContext is meant to be shared); any other `verify` is kept."""
    import httpx
    from httpx._transports import default

    shared = httpx.create_ssl_context()
    build = default.create_ssl_context

    def create_ssl_context(
        verify: ssl.SSLContext | str | bool = True, cert: Any = None, trust_env: bool = True
    ) -> ssl.SSLContext:
        if verify is True and cert is None and trust_env:
            return shared
        return build(verify=verify, cert=cert, trust_env=trust_env)

    default.create_ssl_context = create_ssl_context


_one_tls_context_for_httpx()

# Importing hypothesis (the stateful store tests) looks up its plugins among the entry points of
# every installed distribution, then imports trio for the one it finds: ~0.37 s of CPU in each
# worker's collection, measured. No test runs trio.
os.environ.setdefault("HYPOTHESIS_NO_PLUGINS", "1")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{EXCLUSIVE_MARK}: runs alone on the machine (tests/support/serial.py)"
    )
    if not hasattr(config, "workerinput"):  # once: the xdist controller, or a run without it
        _prepare_on_two_cores(config)
        if getattr(config.option, "numprocesses", None):  # xdist's controller collects nothing
            gc.enable()


def _prepare_on_two_cores(config: pytest.Config) -> None:
    """Bytecode and rewritten test modules, written before any worker starts. Each file is
    work of its own, so a forked child takes every other one: ~2 s of CPU on a clean clone
    (on the faster hours of this two-core machine), before which no worker can start."""
    child = os.fork()
    half = 1 if child == 0 else 0
    try:
        _compile_the_project(half)
        if config.getoption("assertmode") == "rewrite":
            _rewrite_the_test_modules(config, half)
    except BaseException:
        if child == 0:
            traceback.print_exc()
            os._exit(1)
        raise
    if child == 0:
        os._exit(0)
    _, status = os.waitpid(child, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError("preparing the test run failed in its second process (above)")


def _halve(paths: list[Path], half: int) -> list[Path]:
    return sorted(paths)[half::2]


def _compile_the_project(half: int) -> None:
    """Bytecode for the project's modules, written before any test starts a process.

    Hundreds of subprocesses (gateways, workers, CLI calls) import the project. Where the
    environment sets PYTHONDONTWRITEBYTECODE (this machine does), none of them writes the
    bytecode it compiles, so each compiled about 150 modules from source again: ~0.12 s of CPU
    per process start. compileall writes it whatever that variable says; they all read it."""
    import compileall

    root = Path(__file__).resolve().parent.parent
    sources = [
        path
        for package in ("gateway", "providers", "tests")
        for path in (root / package).rglob("*.py")
    ]
    for path in _halve(sources, half):
        compileall.compile_file(path, quiet=1)


def _rewrite_the_test_modules(config: pytest.Config, half: int) -> None:
    """pytest's rewritten test modules, cached before the workers start.

    Each xdist worker imports every test module, and pytest rewrites the asserts of each as it
    does: ~6 s of CPU for the whole tree, measured in one collection alone. It keeps the result
    beside the module unless bytecode writing is off, which PYTHONDONTWRITEBYTECODE turns off
    (this machine sets it), but it reads a cached one either way. Written here once, with
    pytest's own functions, the workers read it. Those functions are pytest's internals: if an
    upgrade moves them, the workers rewrite for themselves again, as before (slower, not
    wrong)."""
    try:
        from _pytest.assertion import rewrite
    except ImportError:
        return
    state = config.stash[rewrite.assertstate_key]
    modules = [
        path
        for path in Path(__file__).resolve().parent.rglob("*.py")
        if path.name.startswith("test_") or path.name == "conftest.py"
    ]
    for path in _halve(modules, half):
        cache = rewrite.get_cache_dir(path)
        pyc = cache / (path.name[:-3] + rewrite.PYC_TAIL)
        if rewrite._read_pyc(path, pyc, state.trace) is not None:
            continue  # cached and still current
        source_stat, code = rewrite._rewrite_test(path, config)
        if rewrite.try_makedirs(cache):
            rewrite._write_pyc(state, code, source_stat, pyc)


gc.disable()  # while collecting (see below): imports make no garbage worth a collection's walk


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection imported (the SDKs' thousands of model classes, the gateway, every test
    module) lives until the session ends: frozen, the collector stops walking it. Each full
    collection had walked it all, ~0.2 s of CPU each, ~5 s per worker on the store, API and
    chat tests alone (measured with gc.callbacks), and could outlast a Redis call's 2 s bound
    on a busy machine. The exclusive tests are counted: the others wait for them (serial.py)."""
    gc.collect()
    gc.freeze()
    gc.enable()
    count_exclusive(session)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[object]:
    """Each test takes its turn: alone if it is exclusive (tests/support/serial.py)."""
    with turn(item):
        return (yield)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that shares a module's (or class's) fixture, a gateway most often, is grouped with
    its module, so the fixture is made once; the others go one by one (before xdist reads the
    marks)."""
    for item in items:
        if item.get_closest_marker("xdist_group") is None and _shares_fixtures(item):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))
    # The longest units first (`--no-loadscope-reorder` keeps this order): the exclusive tests
    # (of the serial group), the long groups, then the modules that share a process, the rest.
    items.sort(key=_start_order)


def _start_order(item: pytest.Item) -> int:
    if item.get_closest_marker(EXCLUSIVE_MARK) is not None:
        return 0
    group = item.get_closest_marker("xdist_group")
    if group is None:
        return 3
    return 1 if group.args[0] in LONG_GROUPS else 2


def _shares_fixtures(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return True
    return any(
        definitions[-1].scope in ("class", "module", "package")
        for definitions in info.name2fixturedefs.values()
        if definitions
    )


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"Redis is required on CI: {reason}")
    pytest.skip(f"no Redis: {reason}")


@pytest.fixture(scope="session")
def redis_binary() -> str:
    """The redis-server binary; skips locally and fails on CI when there is none."""
    binary = shutil.which("redis-server")
    if binary is None:
        _unavailable("there is no redis-server binary")
        raise AssertionError("unreachable")
    return binary


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of a Redis that answers, for the whole session."""
    url = os.environ.get("REDIS_URL")
    if url:
        if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
            pytest.fail("REDIS_URL is one Redis for every xdist worker: run with -n 0")
        yield url
        return
    binary = shutil.which("redis-server")
    if binary is None:
        _unavailable("REDIS_URL is not set and there is no redis-server binary")
        return
    server = RedisServer(binary, tmp_path_factory.mktemp("redis"))
    try:
        server.start()
    except (OSError, RuntimeError) as exc:
        _unavailable(f"could not start redis-server: {exc}")
        return
    try:
        yield server.url
    finally:
        server.stop()

"""A newcomer's first hour: every command of README.md and docs/deploy.md, as the docs write it,
run in a fresh folder, each checked to succeed and to print what the docs say it prints.

The commands are read from the docs' code blocks, so the test fails when the docs change
without the code: a command it does not know is a failure that asks for its check here. What
cannot run here is named in `NOT_RUN` with the reason (Docker; the whole test suite and the
linters, which CI runs itself; the benchmark). The install commands are not run again (they
would rebuild the virtualenv the tests run in): the folder's `.venv` is that virtualenv, and
their result, the `gateway` command in `.venv/bin`, is checked instead.

What a newcomer would change, changed the same way here: the port 8080 (another process may hold
it) becomes a free one, `--host 0.0.0.0` becomes loopback, and the placeholders of the docs
(`redis://redis:6379/0`, the S3 endpoint, `gw-...`, `task_...`, the signing secret) become this
run's private redis-server, S3 server (moto), keys and ids. PATH starts without the
virtualenv's `bin`, so the docs' own `export PATH=...` line is what makes `gateway` callable.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tests.support.gateway_process import ROOT
from tests.support.ports import free_port
from tests.support.redis_server import RedisServer
from tests.support.s3_server import ACCESS_KEY, REGION, SECRET_KEY, S3Server
from tests.support.waiting import wait_until

DOCS = ("README.md", "docs/deploy.md")
_CLAUDE_CODE = "an interactive Claude Code session (tests/e2e/test_claude_code.py runs it with -p)"
_CLUSTER_HOSTS = "six Redis hosts (the recipe); the cluster tests build one locally"
NOT_RUN = {
    "python3 -m venv .venv && .venv/bin/pip install -e '.[dev]' && .venv/bin/python -m pytest": (
        "the whole test suite, this test included: CI runs it"
    ),
    ".venv/bin/python -m pytest": "the whole test suite, this test included: CI runs it",
    ".venv/bin/ruff check . && .venv/bin/ruff format --check . && .venv/bin/mypy && "
    ".venv/bin/lint-imports": "the project's linters: CI runs them",
    "bench/run.sh": "the benchmark (minutes of load; docs/performance.md)",
    "docker build -t gateway .": "needs Docker (tests/deploy checks the Dockerfile)",
    "docker run -p 8080:8080 -v gateway-data:/data -v $PWD/my-routing.toml:/app/config/"
    "gateway.toml:ro -e OPENAI_API_KEY gateway": "needs Docker",
    "docker run -p 8080:8080 -e GATEWAY_STORE_URL=redis://redis:6379/0 -e GATEWAY_SIGNING_SECRET "
    "-v $PWD/my-routing.toml:/app/config/gateway.toml:ro gateway gateway serve --processes 4": (
        "needs Docker"
    ),
    "GATEWAY_STORE_URL=redis://redis:6379/0 gateway serve --processes 4": (
        "the Redis recipe above runs `gateway serve --processes 4` on Redis, with the same store"
    ),
    # docs/deploy.md's Redis Cluster recipe names six hosts; tests/e2e/test_cluster_availability.py
    # builds a local 3+3 cluster with the settings it gives and runs the gateway on it.
    "redis-cli --cluster create 10.0.0.1:6379 10.0.0.2:6379 10.0.0.3:6379 10.0.0.4:6379 "
    "10.0.0.5:6379 10.0.0.6:6379 --cluster-replicas 1": _CLUSTER_HOSTS,
    "redis-cli --cluster check 10.0.0.1:6379": _CLUSTER_HOSTS,
    "export GATEWAY_STORE_URL='redis+cluster://10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379"
    "?wait_replicas=1&wait_ms=250'": _CLUSTER_HOSTS,
    # README's Claude Code block: an interactive session; tests/e2e/test_claude_code.py runs
    # the pinned release with these variables under `-p` against the embedded default.
    "export ANTHROPIC_BASE_URL=http://127.0.0.1:8080": _CLAUDE_CODE,
    "export ANTHROPIC_API_KEY=$KEY": _CLAUDE_CODE,
    "export ANTHROPIC_DEFAULT_HAIKU_MODEL=sim-chat-1": _CLAUDE_CODE,
    "claude --model auto": _CLAUDE_CODE,
}
INSTALLS = {
    "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/gateway serve",
    "python3 -m venv .venv && .venv/bin/pip install .",
}
"""Install commands: their result is checked (`.venv/bin/gateway`), what follows is run."""


@dataclass(frozen=True)
class Command:
    doc: str
    text: str
    """The command, continuation lines joined, without its comment."""
    comment: str
    """What the docs say beside it (`# prints the balance`) or below it (`# 202 {...}`)."""


def documented_commands(doc: str) -> list[list[Command]]:
    """The `sh` code blocks of `doc`, each a list of its commands."""
    blocks = []
    text = (ROOT / doc).read_text()
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        commands: list[Command] = []
        pending = ""
        for line in block.splitlines():
            if line.startswith("#") and commands and not pending:  # what the one above prints
                last = commands[-1]
                said = f"{last.comment} {line[1:].strip()}".strip()
                commands[-1] = Command(doc, last.text, said)
                continue
            if line.endswith("\\"):
                pending += line[:-1].strip() + " "
                continue
            line = pending + line.strip()
            pending = ""
            parts = re.split(r"\s{2,}# ?", line, maxsplit=1)
            command, comment = parts[0].strip(), (parts[1].strip() if len(parts) > 1 else "")
            if command:
                commands.append(Command(doc, command, comment))
        blocks.append(commands)
    return blocks


def python_blocks(doc: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", (ROOT / doc).read_text(), re.S)


@dataclass
class Newcomer:
    """A shell session in a fresh folder: its environment, what it started, what it learned."""

    workdir: Path
    env: dict[str, str]
    replacements: list[tuple[str, str]] = field(default_factory=list)
    background: list[subprocess.Popen[bytes]] = field(default_factory=list)
    facts: dict[str, str] = field(default_factory=dict)

    @classmethod
    def start(cls, workdir: Path) -> Newcomer:
        workdir.mkdir(parents=True)
        (workdir / ".venv").symlink_to(Path(sys.prefix))
        shutil.copytree(ROOT / "config", workdir / "config")
        venv_bin = str(Path(sys.prefix) / "bin")
        path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p != venv_bin]
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("GATEWAY_", "PROMETHEUS_", "VIRTUAL_ENV"))
        }
        env |= {"PATH": os.pathsep.join(path), "PWD": str(workdir), "PYTHONUNBUFFERED": "1"}
        env["GATEWAY_PORT"] = str(free_port())  # for a bare `gateway serve` (8080 by default)
        return cls(workdir, env)

    def rewrite(self, text: str) -> str:
        for old, new in self.replacements:
            text = text.replace(old, new)
        return text

    def run(self, command: str, *, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            ["bash", "-c", self.rewrite(command)],
            cwd=self.workdir,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert result.returncode == 0, f"`{command}` exited {result.returncode}: {result.stderr}"
        return result

    def export(self, command: str) -> None:
        """`export NAME=VALUE` or `NAME=$(...)`: the value as the shell makes it, kept for
        the commands after it."""
        name, _, value = self.rewrite(command).removeprefix("export ").partition("=")
        if value.startswith("$("):
            value = f'"{value}"'
        self.env[name] = self.run(f"printf %s {value}").stdout

    def serve(self, command: str, ready: Callable[[str], bool]) -> str:
        """Start a long-running command; its output once `ready` says it is up."""
        log = self.workdir / f"process-{len(self.background)}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                ["bash", "-c", "exec " + self.rewrite(command)],
                cwd=self.workdir,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.background.append(process)

        def up() -> bool:
            if process.poll() is not None:
                raise AssertionError(f"`{command}` exited:\n{log.read_text()}")
            return ready(log.read_text())

        wait_until(up, timeout=60, what=f"`{command}` to be up")
        return log.read_text()

    def stop(self) -> None:
        for process in reversed(self.background):
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


@pytest.fixture
def newcomer(tmp_path: Path) -> Iterator[Callable[[str], Newcomer]]:
    sessions: list[Newcomer] = []

    def make(name: str) -> Newcomer:
        session = Newcomer.start(tmp_path / name)
        sessions.append(session)
        return session

    yield make
    for session in sessions:
        session.stop()


@pytest.fixture
def redis_server(redis_binary: str, tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(redis_binary, tmp_path / "redis", durable=True)
    server.workdir.mkdir()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def s3_server(tmp_path: Path) -> Iterator[S3Server]:
    server = S3Server(tmp_path / "s3")
    try:
        server.start()
    except Exception as exc:  # moto missing or not starting
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"the S3 server is required on CI: {exc}")
        pytest.skip(f"no S3 server: {exc}")
    yield server
    server.stop()


def every_command() -> list[Command]:
    return [c for doc in DOCS for block in documented_commands(doc) for c in block]


# --- checks of what each command prints -------------------------------------------------

KEY = re.compile(r"^gw-[A-Za-z0-9_-]{20,}\.k[0-9a-z]{1,7}$")


def _base_url_of(output: str) -> str:
    match = re.search(r"Gateway base URL: (\S+)", output)
    assert match, output
    return match.group(1)


def _banner_printed(output: str) -> bool:
    """The banner's last line is there: a first key's or, without one, where keys come from
    (a process printing its first lines is not done)."""
    return "API key (tenant default)" in output or "Keys and credits:" in output


def _get(url: str, key: str) -> httpx.Response:
    return httpx.get(url, headers={"Authorization": f"Bearer {key}"}, timeout=30)


def _serve_embedded(session: Newcomer, command: Command) -> None:
    output = session.serve(command.text, lambda log: "API key (tenant default)" in log)
    base = _base_url_of(output)
    assert base == f"http://127.0.0.1:{session.env['GATEWAY_PORT']}/v1"
    key = re.search(r"API key \(tenant default\): (\S+)", output)
    assert key and KEY.match(key.group(1)), output
    wallet = _get(f"{base}/wallet", key.group(1)).json()
    assert wallet["balance_credits"] == "1000.0000", wallet  # the starting grant
    session.facts |= {"base": base, "key": key.group(1)}
    session.replacements += [
        ("http://127.0.0.1:8080", base.removesuffix("/v1")),
        ('"gw-..."', json.dumps(key.group(1))),
        ("$KEY", key.group(1)),
        ("=gw-...", "=" + key.group(1)),
    ]
    session.env["KEY"] = key.group(1)


def _installed(session: Newcomer, command: Command) -> None:
    gateway = session.workdir / ".venv" / "bin" / "gateway"
    assert gateway.exists(), f"`{command.text}` installs {gateway}"
    assert session.run(".venv/bin/gateway --help").stdout.startswith("usage: gateway")
    if command.text.endswith("&& .venv/bin/gateway serve"):
        _serve_embedded(session, Command(command.doc, ".venv/bin/gateway serve", ""))


def test_the_first_hour_on_the_embedded_store(newcomer: Callable[[str], Newcomer]) -> None:
    """README's quick start, its first requests (curl, the openai SDK, the task client and
    `gateway tasks`), and docs/deploy.md's one-process recipe."""
    readme = documented_commands("README.md")
    start, curl, _claude, _cli, tasks, _developing = readme
    session = newcomer("readme")
    _installed(session, start[0])

    # The Python examples, with the key serve printed.
    # (the callback receiver is a handler to paste into an app: nothing to run alone)
    sdk_example, _receiver, agents_example, task_client_example = python_blocks("README.md")
    script = session.workdir / "hello.py"
    script.write_text(session.rewrite(sdk_example))
    said = session.run(f".venv/bin/python {script}").stdout.splitlines()
    model, _, rest = said[0].partition(" ")
    assert model == "sim-chat-1" and re.search(r" \d+\.\d{4}$", rest), said
    assert said[1].strip(), "the streamed answer printed nothing"
    agents = session.workdir / "agents_example.py"
    agents.write_text(session.rewrite(agents_example))
    assert session.run(f".venv/bin/python {agents}").stdout.strip(), "the agent said nothing"

    create, poll, download = curl
    assert "202" in create.comment and "queued" in create.comment
    created = json.loads(session.run(create.text).stdout)
    assert created["status"] == "queued" and created["task_id"].startswith("task_")
    session.replacements.insert(0, ("task_...", created["task_id"]))
    assert "succeeded" in poll.comment
    done = wait_until(
        lambda: json.loads(session.run(poll.text).stdout),
        lambda task: task["status"] == "succeeded",
        timeout=60,
        what="the task to succeed (the docs' second curl, repeated)",
    )
    url = done["output"]["images"][0]["url"]
    assert url.startswith("/v1/artifacts/art_")
    session.replacements.insert(0, ("/v1/artifacts/art_.../content?expires=...&signature=...", url))
    session.run(download.text)
    assert (session.workdir / "image.png").read_bytes().startswith(b"\x89PNG")

    script = session.workdir / "tasks.py"
    script.write_text(session.rewrite(task_client_example))
    printed = session.run(f".venv/bin/python {script}").stdout.splitlines()
    assert printed[-1].startswith("[PosixPath('out/task_") and printed[-1].count(".png") == 2

    _gateway_tasks(session, tasks)

    deploy_embedded = documented_commands("docs/deploy.md")[0]
    session = newcomer("deploy-embedded")
    for command in deploy_embedded:
        if command.text in INSTALLS:
            _installed(session, command)
        elif command.text.startswith("export "):
            session.export(command.text)
        else:
            assert command.text == "gateway serve", command
            _serve_embedded(session, command)


def _gateway_tasks(session: Newcomer, tasks: list[Command]) -> None:
    # The PATH line of README's `gateway` block, which a newcomer ran before this one.
    session.env["PATH"] = f"{session.workdir}/.venv/bin:{session.env['PATH']}"
    session.env["GATEWAY_BASE_URL"] = session.facts["base"]
    by_text = {c.text: c for c in tasks}
    session.export(tasks[0].text)
    assert session.env["GATEWAY_API_KEY"] == session.facts["key"]
    saved = session.run(tasks[1].text).stdout.split()
    assert len(saved) == 2 and all(
        (session.workdir / p).read_bytes()[:4] == b"\x89PNG" for p in saved
    )
    session.export(tasks[2].text)
    assert session.env["TASK"].startswith("task_")
    wav = session.run('gateway tasks wait "$TASK" --out out').stdout.split()
    assert "wav" in by_text['gateway tasks wait "$TASK" --out out'].comment
    assert wav and all(p.endswith(".wav") and (session.workdir / p).exists() for p in wav)
    rows = [r.split("\t") for r in session.run("gateway tasks list --limit 5").stdout.splitlines()]
    assert 1 <= len(rows) <= 5 and all(len(r) == 4 for r in rows), rows
    got = json.loads(session.run('gateway tasks get "$TASK"').stdout)
    assert got["task_id"] == session.env["TASK"] and got["status"] == "succeeded"
    assert set(got["output"]) == {"type", "model", "clips"}, got["output"]  # no `images: []`
    again = session.run('gateway tasks download "$TASK" --out out').stdout.split()
    assert again == wav
    canceled = json.loads(session.run('gateway tasks cancel "$TASK"').stdout)
    assert canceled["status"] == "succeeded"  # "a finished task comes back unchanged"
    assert len(by_text) == 8, "a command was added to the `gateway tasks` block: check it here"


def test_the_first_hour_on_redis(
    newcomer: Callable[[str], Newcomer], redis_server: RedisServer, s3_server: S3Server
) -> None:
    """docs/deploy.md's Redis recipe (the tenant declared, its first key and credits made with
    the CLI), then every command of README's `gateway` block on that Redis."""
    session = newcomer("on-redis")
    bucket = s3_server.create_bucket("bucket")
    session.env |= {
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_DEFAULT_REGION": REGION,
    }
    session.replacements += [
        ("redis://redis:6379/0", redis_server.url),
        ("GATEWAY_SIGNING_SECRET=...", f"GATEWAY_SIGNING_SECRET={secrets.token_hex(16)}"),
        ("endpoint=https://s3.example.com", f"endpoint={s3_server.endpoint}"),
        ("--host 0.0.0.0", "--host 127.0.0.1"),
    ]
    port = free_port()
    session.replacements.append(("--port 8080", f"--port {port}"))
    recipe = documented_commands("docs/deploy.md")[2]
    for command in recipe:
        text = command.text
        if text.startswith("export "):
            session.export(text)
        elif text == "gateway config check":
            out = session.run(text).stdout
            assert "ok (" in out and "2 tenants" in out and "auto for tenant acme" in out, out
        elif text == "gateway keys create --tenant acme":
            out = session.run(text).stdout.strip()
            assert KEY.match(out), out
            session.facts["acme"] = out
        elif text.startswith("gateway credits grant --tenant acme"):
            assert session.run(text).stdout.strip() == command.comment.split()[-1] == "1000.0000"
        elif text == "gateway serve --processes 4":
            output = session.serve(text, _banner_printed)
            assert "API key" not in output and "gateway keys create" in output, output
            assert "Processes: 4 serving the port" in output, output
            base = _base_url_of(output)
            _wait_healthy(base)
            wallet = _get(f"{base}/wallet", session.facts["acme"]).json()
            assert wallet["balance_credits"] == "1000.0000", wallet
            session.facts["base"] = base
        elif text.startswith("gateway worker"):
            _worker(session, text)
        else:
            assert text.startswith(("cp ", "printf ")), f"unknown command of the recipe: {text}"
            session.run(text)
    assert bucket == "bucket"
    _check_redis_settings(redis_server)

    cli = documented_commands("README.md")[3]
    _readme_cli(session, cli, port)


def _wait_healthy(base: str) -> None:
    """Until /v1/health answers 200. The port is open from the banner on, and a request waits
    there until one of the processes takes it (as a newcomer's curl would): on a loaded machine
    that outlasted httpx's 5 s default while four interpreters started."""
    wait_until(
        lambda: httpx.get(f"{base}/health", timeout=30).status_code == 200, what="/v1/health"
    )


def _worker(session: Newcomer, text: str) -> None:
    """The worker is up, and logs the same JSON lines as serve."""
    output = session.serve(text, lambda log: '"config_loaded"' in log)
    lines = [line for line in output.splitlines() if line.strip()]
    assert lines[0].startswith("Worker ") and " 8 at a time" in lines[0], lines
    for line in lines[1:]:
        event = json.loads(line)  # every log line is JSON, as serve's
        assert {"event", "level", "timestamp"} <= set(event), line


def _check_redis_settings(server: RedisServer) -> None:
    """The settings docs/deploy.md asks of Redis are the ones the tests run Redis with."""
    text = (ROOT / "docs" / "deploy.md").read_text()
    block = re.search(r"```\n(appendonly .*?)```", text, re.S)
    assert block, "docs/deploy.md no longer shows the Redis settings"
    wanted = dict(line.split("#")[0].split() for line in block.group(1).strip().splitlines())
    import redis

    with redis.Redis.from_url(server.url) as client:
        for name, value in wanted.items():
            assert client.config_get(name) == {name: value}


def _readme_cli(session: Newcomer, cli: list[Command], port: int) -> None:
    known: dict[str, Callable[[Command], None]] = {}

    def check(text: str) -> Callable[[Callable[[Command], None]], Callable[[Command], None]]:
        def register(function: Callable[[Command], None]) -> Callable[[Command], None]:
            known[text] = function
            return function

        return register

    @check('export PATH="$PWD/.venv/bin:$PATH"')
    def _(command: Command) -> None:
        session.env["PATH"] = session.env["PATH"].replace(f"{session.workdir}/.venv/bin:", "")
        assert shutil.which("gateway", path=session.env["PATH"]) is None
        session.export(command.text)
        assert (
            session.run("command -v gateway").stdout.strip()
            == f"{session.workdir}/.venv/bin/gateway"
        )

    @check("gateway serve --host 0.0.0.0 --port 8080")
    def _(command: Command) -> None:
        output = session.serve(command.text, lambda log: "Gateway base URL" in log)
        assert _base_url_of(output) == f"http://127.0.0.1:{port}/v1"

    @check("gateway worker --concurrency 8")
    def _(command: Command) -> None:
        _worker(session, command.text)

    @check("gateway keys create --tenant default")
    def _(command: Command) -> None:
        key = session.run(command.text).stdout.splitlines()
        assert len(key) == 1 and KEY.match(key[0]), key  # "prints only the new key"
        session.facts["default"] = key[0]

    @check("gateway keys list --tenant default")
    def _(command: Command) -> None:
        rows = [r.split("\t") for r in session.run(command.text).stdout.splitlines()]
        assert len(rows) == 1 and len(rows[0]) == 13, rows  # id, created, revoked, tenant, prefix,
        # then name, models, budget, period, spent, expires_at, rpm, tpm
        key_id, _created, revoked, tenant, prefix = rows[0][:5]
        assert key_id.startswith("key_") and revoked == "-" and tenant == "default"
        assert session.facts["default"].startswith(prefix)
        session.replacements += [("gw-AbCdEfG", prefix), ("key_0123abcd...", key_id)]
        session.facts["key_id"] = key_id

    @check("gateway keys list --prefix gw-AbCdEfG")
    def _(command: Command) -> None:
        rows = session.run(command.text).stdout.splitlines()
        assert [r.split("\t")[0] for r in rows] == [session.facts["key_id"]]

    @check("gateway keys revoke key_0123abcd...")
    def _(command: Command) -> None:
        assert session.run(command.text).stdout.strip() == "revoked"
        wait_until(
            lambda: (
                _get(f"{session.facts['base']}/models", session.facts["default"]).status_code == 401
            ),
            what="the revoked key to be refused",
        )

    balances = {"250": "250.0000", "-12.5": "237.5000"}

    @check('gateway credits grant --tenant default --amount 250 --reason "invoice 42"')
    def _(command: Command) -> None:
        assert "balance" in command.comment
        assert session.run(command.text).stdout.strip() == balances["250"]

    @check('gateway credits adjust --tenant default --amount -12.5 --reason "dispute 7"')
    def _(command: Command) -> None:
        assert session.run(command.text).stdout.strip() == balances["-12.5"]

    @check("gateway credits balance --tenant default")
    def _(command: Command) -> None:
        assert session.run(command.text).stdout.strip() == balances["-12.5"]

    @check("gateway tenants list")
    def _(command: Command) -> None:
        rows = {
            r.split("\t")[0]: r.split("\t")[1:]
            for r in session.run(command.text).stdout.splitlines()
        }
        assert rows == {"acme": ["1000.0000", "1"], "default": ["237.5000", "0"]}, rows

    @check("gateway usage --from 2026-11-01 --to 2026-11-30")
    def _(command: Command) -> None:
        rows = [r.split("\t") for r in session.run(command.text).stdout.splitlines()]
        assert all(len(r) == 8 for r in rows), rows

    @check("gateway admin token")
    def _(command: Command) -> None:
        done = session.run(command.text)
        assert len(done.stdout.split()) == 1
        assert re.search(r"^GATEWAY_ADMIN_TOKEN_HASH=sha256:[0-9a-f]{64}$", done.stderr, re.M)

    @check("gateway config check")
    def _(command: Command) -> None:
        assert "ok (" in session.run(command.text).stdout

    assert [c.text for c in cli] == list(known), "README's `gateway` block changed: check it here"
    for command in cli:
        known[command.text](command)


def test_every_documented_command_is_run_or_said_why_not() -> None:
    """A command added to the docs needs its check in this file (or a reason in NOT_RUN)."""
    readme = documented_commands("README.md")
    deploy = documented_commands("docs/deploy.md")
    assert len(readme) == 6 and len(deploy) == 6, "a code block was added or removed"
    start, curl, claude, cli, tasks, developing = readme
    run = {start[0].text} | {c.text for c in curl + cli + tasks + deploy[0] + deploy[2]}
    not_run = {start[1].text} | {c.text for c in claude + developing + deploy[1] + deploy[3]}
    not_run |= {c.text for c in deploy[4] + deploy[5]} - run  # the cluster recipe's hosts
    assert not run & not_run
    assert not_run == set(NOT_RUN), not_run ^ set(NOT_RUN)
    for command in every_command():
        assert command.text in run | not_run, (
            f"{command.doc}: `{command.text}` is not run by this test: add its check"
        )


def test_the_docs_commands_are_parsed_whole() -> None:
    """Continuation lines are joined, comments kept apart, output lines kept with their
    command (what the checks above rely on)."""
    _, curl, *_ = documented_commands("README.md")
    assert curl[0].text.startswith("curl -s http://127.0.0.1:8080/v1/images/generations -H")
    assert curl[0].text.endswith('"n": 2}\'')
    assert curl[0].comment.startswith("202 ")
    cli = documented_commands("README.md")[3]
    assert (cli[3].text, cli[3].comment) == (
        "gateway keys create --tenant default",
        "prints only the new key, once",
    )

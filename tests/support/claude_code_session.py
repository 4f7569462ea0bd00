"""The Claude Code session the tests run on every upstream, and the recording of its traffic.

The session: `claude -p "Read note.txt and tell me the secret word."` in a scratch working
directory holding `note.txt`; the model calls Read on it, Claude Code runs the tool and sends
its result back, the model answers in text and the loop ends (two API calls, two turns).
`anthropic_script` is that model as the fake Anthropic upstream plays it.

`python -m tests.support.claude_code_session` records the requests the pinned Claude Code
(`tests/agents`) sends in that session, once per model of RECORDED_MODELS, as
`tests/fakes/recorded/claude_code_requests.json`: Claude Code is pointed straight at the fake
Anthropic upstream, which keeps each request's bytes as received. What is machine-specific is
scrubbed (`scrub`): the scratch paths, the device and session ids, the kernel release.
"""

from __future__ import annotations

import datetime
import json
import platform
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.fakes.anthropic_upstream import (
    FakeAnthropic,
    StreamReply,
    message,
    signature_of,
    text,
    thinking,
    tool_use,
)
from tests.support.claude_code import (
    ClaudeRun,
    ClaudeScratch,
    claude_code,
    pinned_version,
    run_claude,
)

__all__ = [
    "ANSWER",
    "NOTE",
    "PROMPT",
    "SCRUBBED_ROOT",
    "anthropic_script",
    "note_path",
    "prepare",
    "record",
    "scrub",
]

NOTE = "the secret word is marmalade\n"
PROMPT = "Read note.txt and tell me the secret word."
ANSWER = "The secret word is marmalade."
SCRUBBED_ROOT = "/scratch"
SCRUBBED_SESSION = "00000000-0000-4000-8000-000000000000"
FIXTURE = Path(__file__).resolve().parents[1] / "fakes" / "recorded" / "claude_code_requests.json"
# Request headers kept in the fixture (the key and the transport's own are left out).
KEPT_HEADERS = ("anthropic-beta", "anthropic-version", "content-type", "user-agent", "x-app")


def prepare(root: Path) -> ClaudeScratch:
    """A run's scratch folders under `root`, with `note.txt` in its working directory."""
    scratch = ClaudeScratch.under(root)
    (scratch.work / "note.txt").write_text(NOTE)
    return scratch


def note_path(scratch: ClaudeScratch) -> str:
    return str(scratch.work / "note.txt")


def anthropic_script(scratch: ClaudeScratch) -> list[StreamReply]:
    """The session's two answers as Anthropic streams them: signed thinking and a call of Read
    on the note (Claude Code asks for thinking, so its tool turn must start with it), then the
    answer."""
    thought = "The note is in the working directory; read it."
    read = tool_use("toolu_01", "Read", {"file_path": note_path(scratch)})
    first = message(
        thinking(thought, signature_of(thought)), read, stop_reason="tool_use", input_tokens=900
    )
    return [
        StreamReply(message=first),
        StreamReply(message=message(text(ANSWER), input_tokens=950)),
    ]


def scrub(raw: str, *, root: Path, session_id: str) -> str:
    """`raw` (a request body or header) without what names this machine or this run."""
    out = raw.replace(str(root), SCRUBBED_ROOT)
    # The project's folder name under ~/.claude/projects: the path with "-" for what is not
    # a letter or a digit.
    out = out.replace(re.sub(r"[^A-Za-z0-9]", "-", str(root)), SCRUBBED_ROOT.replace("/", "-"))
    out = out.replace(session_id, SCRUBBED_SESSION)
    out = re.sub(r'(device_id\\?":\\?")[0-9a-f]{64}', r"\g<1>" + "0" * 64, out)
    return out.replace(f"Linux {platform.release()}", "Linux 6.1.0")


# The models of the recorded sessions: a name Claude Code knows (it asks for thinking with a
# budget) and one it does not, as a gateway's own model names are (it sends its environment as a
# mid-conversation system message and asks for adaptive thinking and an effort).
RECORDED_MODELS = ("claude-sonnet-4-5", "claude-chat")


def record(binary: Path, root: Path) -> dict[str, Any]:
    """Run the session against a fake Anthropic upstream, once per model of RECORDED_MODELS,
    and return the fixture."""
    sessions = [_session(binary, root / model, model) for model in RECORDED_MODELS]
    version = pinned_version()
    return {
        "source": {
            "repository": f"npm:@anthropic-ai/claude-code@{version}",
            "path": "tests/support/claude_code_session.py (`python -m` it)",
            "recorded": datetime.date.today().isoformat(),
            "how": (
                f"`claude -p {PROMPT!r} --max-turns 4 --model MODEL --allowedTools Read`, "
                f"Claude Code {version} with ANTHROPIC_BASE_URL at the fake Anthropic upstream "
                "(tests/fakes/anthropic_upstream.py), which kept each request body's bytes as "
                "received; scrubbed: scratch paths (/scratch), device and session ids, the "
                "kernel release"
            ),
        },
        "sessions": sessions,
    }


def _session(binary: Path, root: Path, model: str) -> dict[str, Any]:
    scratch = prepare(root)
    fake = FakeAnthropic(check_thinking=True)
    fake.enqueue(*anthropic_script(scratch))
    base_url, stop = fake.start_in_thread()
    try:
        run = run_claude(
            binary,
            scratch,
            base_url=base_url.removesuffix("/v1"),
            key="sk-ant-recording",
            prompt=PROMPT,
            model=model,
            small_model=model,
            max_turns=4,
            allowed_tools=["Read"],
        )
    finally:
        stop()
    _check(run)
    session = str(run.result["session_id"])
    requests = []
    for request in fake.requests:
        headers = {name: request.headers[name] for name in KEPT_HEADERS if name in request.headers}
        requests.append(
            {
                "method": request.method,
                "path": request.path + (f"?{request.query}" if request.query else ""),
                "headers": {k: scrub(v, root=root, session_id=session) for k, v in headers.items()},
                "body": scrub(request.body.decode(), root=root, session_id=session),
            }
        )
    return {"model": model, "requests": requests}


def _check(run: ClaudeRun) -> None:
    if run.returncode != 0 or run.result.get("result") != ANSWER:
        raise SystemExit(f"the session did not end as scripted:\n{run.describe()}")


def main() -> None:
    binary = claude_code()
    with tempfile.TemporaryDirectory() as folder:
        fixture = record(binary, Path(folder))
    FIXTURE.write_text(json.dumps(fixture, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    count = sum(len(session["requests"]) for session in fixture["sessions"])
    print(f"{count} requests written to {FIXTURE}", file=sys.stderr)


if __name__ == "__main__":
    main()

"""Deterministic answers: the same messages always give the same text, length and tool call.

Randomness comes from BLAKE2b over the JSON of the messages (and chained BLAKE2b blocks when
more bytes are needed): one byte picks a word from a 256-word vocabulary, another decides
punctuation. No `random.Random` per request, so a 60-token answer costs microseconds.

Token counting (an estimate; documented so tests can rely on it):
    prompt_tokens     = 3 + per message (4 + ceil(chars / 4) of each text, 85 per non-text
                        part, ceil(chars / 4) of tool_calls JSON) + ceil(chars / 4) of tools JSON
    completion_tokens = number of pieces emitted: one word (with its leading space and
                        punctuation) per content token, or one 4-character slice of the
                        tool-call arguments per token
"""

from __future__ import annotations

from dataclasses import dataclass
from hashlib import blake2b
from typing import Any

import msgspec

__all__ = ["Answer", "logprob_items", "plan_answer", "prompt_tokens", "seed_of"]

_encode = msgspec.json.encode

_WORDS = (
    "the of and to in is that for it as with was on be by at this from are or an have not they "
    "which one you had were but all we can there their been has more if will would who so about "
    "out up what when time into only some could them other than then now its over also new like "
    "just any these after first two how our work well way even because many those may most very "
    "long each great where through year much before here good same right still own system world "
    "part small case point fact place number group water light sound word model answer river "
    "stone cloud signal garden window market bridge forest engine paper silver orange yellow "
    "purple green blue quiet bright gentle rapid simple clear early late open close under above "
    "between around across toward within without again always never often sometimes together "
    "another value state order story image music voice table field circle square line shape "
    "color plant tree flower seed leaf root branch ocean island coast mountain valley desert "
    "winter summer spring autumn morning evening night day city village road path travel "
    "journey message letter pattern rhythm melody harmony question reason result method theory "
    "measure balance energy motion change growth memory future history moment detail surface "
    "center corner edge level layer lantern harbor meadow canyon glacier thunder breeze candle "
    "mirror ladder pocket basket feather marble copper velvet crystal shadow echo orbit comet "
    "planet galaxy puzzle riddle canvas sketch poem chapter verse chorus anchor compass ribbon"
)
_VOCAB = tuple(_WORDS.split())
assert len(_VOCAB) == 256
_SPACED = tuple(" " + word for word in _VOCAB)
_SPACED_CAPITAL = tuple(" " + word.capitalize() for word in _VOCAB)


@dataclass(slots=True)
class Answer:
    """What to say: `pieces` are the completion tokens (content words or argument slices)."""

    pieces: list[str]
    finish_reason: str
    prompt_tokens: int
    tool_name: str | None = None  # set when the answer is a tool call
    tool_call_id: str = ""


def seed_of(messages: object) -> bytes:
    return blake2b(_encode(messages), digest_size=32).digest()


def plan_answer(
    body: dict[str, Any], seed: bytes, *, tool_call: bool, tokens: int | None, limit: int
) -> Answer:
    """The answer to `body`: text of 8..60 tokens (or `tokens`), or a tool call; cut at `limit`."""
    prompt = prompt_tokens(body.get("messages"), body.get("tools"))
    tool = _chosen_tool(body, seed) if tool_call or _tool_required(body) else None
    if tool is not None or tool_call:
        name, parameters = tool if tool is not None else ("lookup", {})
        arguments = _tool_arguments(parameters, seed)
        pieces = [arguments[i : i + 4] for i in range(0, len(arguments), 4)]
        finish = "tool_calls"
        if len(pieces) > limit:
            pieces, finish = pieces[:limit], "length"
        call_id = "call_sim_" + seed[:12].hex()
        return Answer(pieces, finish, prompt, tool_name=name, tool_call_id=call_id)
    length = tokens if tokens is not None else 8 + seed[0] % 53
    if length > limit:
        return Answer(_words(seed, limit, end=False), "length", prompt)
    return Answer(_words(seed, length, end=True), "stop", prompt)


def prompt_tokens(messages: object, tools: object) -> int:
    total = 3
    if type(messages) is list:
        for message in messages:
            total += 4
            if type(message) is not dict:
                continue
            content = message.get("content")
            if type(content) is str:
                total += (len(content) + 3) // 4
            elif type(content) is list:
                for part in content:
                    text = part.get("text") if type(part) is dict else None
                    total += (len(text) + 3) // 4 if type(text) is str else 85
            calls = message.get("tool_calls")
            if calls:
                total += (len(_encode(calls)) + 3) // 4
    if tools:
        total += (len(_encode(tools)) + 3) // 4
    return total


def logprob_items(pieces: list[str], seed: bytes, top: int) -> list[dict[str, Any]]:
    """Plausible `logprobs.content` items: chosen token first, alternatives less likely."""
    noise = _bytes(seed + b"logprobs", len(pieces))
    items: list[dict[str, Any]] = []
    for i, piece in enumerate(pieces):
        logprob = -round(noise[i] / 96 + 0.0001, 4)
        alternatives = [
            _logprob(piece, logprob),
            *(
                _logprob(_SPACED[(noise[i] + 37 * k) % 256], round(logprob - 0.75 * k, 4))
                for k in range(1, top)
            ),
        ]
        items.append({**_logprob(piece, logprob), "top_logprobs": alternatives if top else []})
    return items


def _logprob(token: str, logprob: float) -> dict[str, Any]:
    return {"token": token, "logprob": logprob, "bytes": list(token.encode())}


def _words(seed: bytes, count: int, *, end: bool) -> list[str]:
    rnd = _bytes(seed, 2 * count)
    pieces: list[str] = []
    capital = True
    for i in range(count):
        piece = _SPACED_CAPITAL[rnd[i]] if capital else _SPACED[rnd[i]]
        mark = rnd[count + i]
        capital = mark < 20
        if capital:
            piece += "."
        elif mark < 40:
            piece += ","
        pieces.append(piece)
    if pieces:
        pieces[0] = pieces[0][1:]  # no space before the first word
        if end and not pieces[-1].endswith("."):
            pieces[-1] = pieces[-1].rstrip(",") + "."
    return pieces


def _bytes(seed: bytes, n: int) -> bytes:
    block = blake2b(seed, digest_size=64).digest()
    if n <= 64:
        return block
    out = [block]
    for _ in range((n - 1) // 64):
        block = blake2b(block, digest_size=64).digest()
        out.append(block)
    return b"".join(out)


def _tool_required(body: dict[str, Any]) -> bool:
    choice = body.get("tool_choice")
    return bool(body.get("tools")) and (choice == "required" or type(choice) is dict)


def _chosen_tool(body: dict[str, Any], seed: bytes) -> tuple[str, dict[str, Any]] | None:
    """The function named by tool_choice, else one of `tools` picked by the seed."""
    functions = [
        tool["function"]
        for tool in body.get("tools") or ()
        if type(tool) is dict and type(tool.get("function")) is dict
    ]
    if not functions:
        return None
    choice = body.get("tool_choice")
    wanted = choice.get("function", {}).get("name") if type(choice) is dict else None
    chosen = next((f for f in functions if f.get("name") == wanted), None)
    if chosen is None:
        chosen = functions[seed[1] % len(functions)]
    parameters = chosen.get("parameters")
    return str(chosen.get("name", "tool")), parameters if type(parameters) is dict else {}


def _tool_arguments(parameters: dict[str, Any], seed: bytes) -> str:
    """A JSON object string that fits the JSON Schema's top-level properties."""
    properties = parameters.get("properties")
    if type(properties) is not dict or not properties:
        properties = {"query": {"type": "string"}}
    rnd = _bytes(seed + b"arguments", 2 * len(properties))
    arguments = {
        key: _value(schema if type(schema) is dict else {}, rnd[2 * i], rnd[2 * i + 1])
        for i, (key, schema) in enumerate(properties.items())
    }
    return _encode(arguments).decode()


def _value(schema: dict[str, Any], a: int, b: int) -> object:
    enum = schema.get("enum")
    if type(enum) is list and enum:
        return enum[a % len(enum)]
    kind = schema.get("type")
    if kind == "integer":
        return a
    if kind == "number":
        return round(a + b / 256, 2)
    if kind == "boolean":
        return a % 2 == 0
    if kind == "array":
        items = schema.get("items")
        return [_value(items if type(items) is dict else {}, a, b)]
    if kind == "object":
        return {}
    return f"{_VOCAB[a]} {_VOCAB[b]}"

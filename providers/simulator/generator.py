"""Deterministic answers: the same messages always give the same text, length and tool call.

Randomness comes from BLAKE2b over the JSON of the messages (and chained BLAKE2b blocks when
more bytes are needed): one byte picks a word from a 256-word vocabulary, another decides
punctuation. No `random.Random` per request, so a 60-token answer costs microseconds. Choice
`i` of `n` draws from the seed with `i` appended (choice 0 from the seed itself).

What an answer is, as a model honouring the request would give it:
- a tool call when a directive forces one (of the function it names, with the arguments it
  gives, else as below), when `tool_choice` names a function (that one) or is `required`, or
  when tools are given with `auto` (or no `tool_choice`) and the last message is the user's;
  after a tool result (`auto`) the answer is text, so an agent's loop ends. `required` calls a
  tool not yet called since the user's last message when there is one. `none` never calls.
  Arguments follow the function's `parameters` (`schema_values`); a function without
  parameters gets `{}`;
- else JSON when `response_format` asks for it: `json_object` gives an object, `json_schema` a
  value its schema accepts;
- else text.

Token counting (an estimate; documented so tests can rely on it):
    prompt_tokens     = 3 + per message (4 + ceil(chars / 4) of each text, 85 per non-text
                        part, ceil(chars / 4) of tool_calls JSON) + ceil(chars / 4) of tools JSON
    completion_tokens = number of pieces emitted: one word (with its leading space and
                        punctuation) per text token, or one 4-character slice of the
                        tool-call arguments or of the JSON content per token; summed over
                        the `n` choices
"""

from __future__ import annotations

from dataclasses import dataclass
from hashlib import blake2b
from typing import Any

import msgspec

from providers.base import InputRules
from providers.simulator.schema_values import schema_value

__all__ = [
    "SIMULATOR_INPUTS",
    "Answer",
    "ForcedCall",
    "logprob_items",
    "plan_answers",
    "prompt_tokens",
    "seed_of",
]

_PART_TOKENS = 85
SIMULATOR_INPUTS = InputRules(
    image_tokens=lambda width, height: _PART_TOKENS,
    image_max_tokens=_PART_TOKENS,
    pdf_page_tokens=_PART_TOKENS,
    media_part_tokens=_PART_TOKENS,
)
"""The simulator counts 85 tokens for every part that is not text (`prompt_tokens`)."""

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
_JSON_FORMATS = ("json_object", "json_schema")
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


@dataclass(frozen=True, slots=True)
class ForcedCall:
    """A tool call a directive asks for: of `name` (None: one of the tools) with `arguments`
    (a JSON object's text; None: made from the function's parameters)."""

    name: str | None = None
    arguments: str | None = None


def plan_answers(
    body: dict[str, Any], seed: bytes, *, forced: ForcedCall | None, tokens: int | None, limit: int
) -> list[Answer]:
    """The `n` answers to `body` (module docstring), each cut at `limit` tokens; `forced`: the
    tool call a directive asks for."""
    prompt = prompt_tokens(body.get("messages"), body.get("tools"))
    n = body.get("n")
    count = n if type(n) is int and n > 1 else 1
    return [
        _answer(body, _choice_seed(seed, index), prompt, forced, tokens, limit)
        for index in range(count)
    ]


def _choice_seed(seed: bytes, index: int) -> bytes:
    return seed if index == 0 else blake2b(seed + index.to_bytes(4, "big"), digest_size=32).digest()


def _answer(
    body: dict[str, Any],
    seed: bytes,
    prompt: int,
    forced: ForcedCall | None,
    tokens: int | None,
    limit: int,
) -> Answer:
    tool = _tool_to_call(body, seed, forced=forced)
    if tool is not None:
        name, parameters = tool
        given = forced.arguments if forced is not None else None
        return _sliced(
            given if given is not None else _tool_arguments(parameters, seed),
            "tool_calls",
            limit,
            prompt,
            tool_name=name,
            tool_call_id="call_sim_" + seed[:12].hex(),
        )
    response_format = body.get("response_format")
    if type(response_format) is dict and response_format.get("type") in _JSON_FORMATS:
        return _sliced(_json_content(response_format, seed), "stop", limit, prompt)
    length = tokens if tokens is not None else 8 + seed[0] % 53
    if length > limit:
        return Answer(_words(seed, limit, end=False), "length", prompt)
    return Answer(_words(seed, length, end=True), "stop", prompt)


def _sliced(
    text: str,
    finish: str,
    limit: int,
    prompt: int,
    *,
    tool_name: str | None = None,
    tool_call_id: str = "",
) -> Answer:
    """`text` as 4-character tokens, cut at `limit` (then finish_reason "length")."""
    pieces = [text[i : i + 4] for i in range(0, len(text), 4)]
    if len(pieces) > limit:
        pieces, finish = pieces[:limit], "length"
    return Answer(pieces, finish, prompt, tool_name=tool_name, tool_call_id=tool_call_id)


def _json_content(response_format: dict[str, Any], seed: bytes) -> str:
    """JSON text for `json_object` (an object) or `json_schema` (a value of its schema)."""
    spec = response_format.get("json_schema")
    schema = spec.get("schema") if type(spec) is dict else None
    if response_format.get("type") == "json_schema" and type(schema) is dict:
        value = schema_value(schema, seed, _VOCAB)
    else:
        value = {"answer": "".join(_words(seed, 6 + seed[0] % 10, end=True))}
    return _encode(value).decode()


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
                    total += (len(text) + 3) // 4 if type(text) is str else _PART_TOKENS
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


def _functions(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        tool["function"]
        for tool in body.get("tools") or ()
        if type(tool) is dict and type(tool.get("function")) is dict
    ]


def _tool_to_call(
    body: dict[str, Any], seed: bytes, *, forced: ForcedCall | None
) -> tuple[str, dict[str, Any]] | None:
    """The function to call and its parameters, or None for an answer without a call."""
    choice = body.get("tool_choice")
    if choice == "none":
        return None
    functions = _functions(body)
    if forced is not None and forced.name is not None:
        named = next((f for f in functions if f.get("name") == forced.name), None)
        return _named(named) if named is not None else (forced.name, {})
    directive = forced is not None
    if not functions:
        return ("lookup", {}) if directive else None
    if type(choice) is dict:
        wanted = choice.get("function", {}).get("name")
        named = next((f for f in functions if f.get("name") == wanted), None)
        if named is not None:
            return _named(named)
    messages = body.get("messages")
    if choice != "required" and not directive and _last_role(messages) != "user":
        return None  # `auto` after a tool result (or an assistant prefill): text
    called = _called_since_user(messages)
    fresh = [f for f in functions if f.get("name") not in called] or functions
    return _named(fresh[seed[1] % len(fresh)])


def _last_role(messages: object) -> object:
    """The role of the last message but for system ones (instructions for the turn, as Claude
    Code appends them after the user's message)."""
    if type(messages) is not list:
        return None
    for message in reversed(messages):
        role = message.get("role") if type(message) is dict else None
        if role not in ("system", "developer"):
            return role
    return None


def _named(function: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    parameters = function.get("parameters")
    return str(function.get("name", "tool")), parameters if type(parameters) is dict else {}


def _called_since_user(messages: object) -> set[str]:
    """The functions the assistant called after the last user message."""
    names: set[str] = set()
    if type(messages) is not list:
        return names
    for message in reversed(messages):
        if type(message) is not dict:
            continue
        if message.get("role") == "user":
            break
        for call in message.get("tool_calls") or ():
            function = call.get("function") if type(call) is dict else None
            if type(function) is dict:
                names.add(str(function.get("name")))
    return names


def _tool_arguments(parameters: dict[str, Any], seed: bytes) -> str:
    """A JSON object string its `parameters` schema accepts (`{}` when it declares none)."""
    if not parameters:
        return "{}"
    value = schema_value({"type": "object", **parameters}, seed + b"arguments", _VOCAB)
    return _encode(value if type(value) is dict else {}).decode()

"""Extended thinking, both ways: `reasoning_effort` -> `thinking`, and the signed thinking
blocks an assistant message carries back for the next turn.

    reasoning_effort   minimal/low/medium/high/xhigh -> thinking.budget_tokens (capped below
                       max_tokens; Anthropic's minimum is 1024); none or absent -> no thinking
    refused beside it  what Anthropic forbids with thinking, as a 400 naming the field the
                       client sent: a forced `tool_choice` (required or a named function),
                       `temperature` other than 1, `top_p` below 0.95
    blocks back        an assistant message's `thinking_blocks` ({type: thinking, thinking,
                       signature} / {type: redacted_thinking, data}, as this adapter answers
                       them, LiteLLM's shape), else OpenRouter's `reasoning_details`
                       (reasoning.text with a signature / reasoning.encrypted), become the
                       turn's first blocks; a block without its signature is left out
    dropped blocks     Anthropic wants the assistant turn a request continues (a tool loop
                       answered by tool results, or a final assistant message) to start with
                       a thinking block. When the client did not keep it, that request goes
                       without thinking (Anthropic allows a step without it); with thinking
                       off, no thinking block is sent at all
"""

from __future__ import annotations

from typing import Any

from providers.errors import UpstreamRejectedRequest

__all__ = [
    "THINKING_BUDGETS",
    "continues_unthought_turn",
    "strip_thinking",
    "thinking_blocks",
    "thinking_config",
]

# reasoning_effort -> thinking.budget_tokens (capped below max_tokens; Anthropic's minimum 1024)
THINKING_BUDGETS = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384, "xhigh": 32768}
_MIN_THINKING = 1024
_MIN_TOP_P = 0.95
_THINKING_TYPES = frozenset({"thinking", "redacted_thinking"})
_WHY = "Anthropic extended thinking (reasoning_effort) "


def _reject(field: str, why: str) -> UpstreamRejectedRequest:
    return UpstreamRejectedRequest(f"{field}: {why}")


def thinking_config(body: dict[str, Any], max_tokens: int) -> dict[str, Any] | None:
    """`thinking` for the request, None without reasoning; UpstreamRejectedRequest naming the
    field when the request asks for something thinking cannot go with."""
    effort = body.get("reasoning_effort")
    if effort is None or effort == "none":
        return None
    if effort not in THINKING_BUDGETS:
        raise _reject("reasoning_effort", f"must be one of: none, {', '.join(THINKING_BUDGETS)}")
    budget = min(THINKING_BUDGETS[effort], max_tokens - 1)
    if budget < _MIN_THINKING:
        raise _reject(
            "reasoning_effort",
            f"Anthropic extended thinking needs max_completion_tokens above {_MIN_THINKING}",
        )
    _refuse_beside_thinking(body)
    return {"type": "enabled", "budget_tokens": budget}


def _refuse_beside_thinking(body: dict[str, Any]) -> None:
    choice = body.get("tool_choice")
    if choice == "required" or isinstance(choice, dict):
        raise _reject(
            "tool_choice",
            _WHY + "cannot force a tool call; use 'auto' or 'none', or reasoning_effort 'none'",
        )
    temperature = body.get("temperature")
    if temperature is not None and float(temperature) != 1.0:
        raise _reject("temperature", _WHY + "only runs at temperature 1; omit it or set it to 1")
    top_p = body.get("top_p")
    if top_p is not None and float(top_p) < _MIN_TOP_P:
        raise _reject("top_p", _WHY + f"takes top_p from {_MIN_TOP_P} to 1 only")


def thinking_blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The signed thinking blocks an assistant message carries back, as Anthropic content
    blocks, in their order; those without a signature (or data) are left out."""
    kept = message.get("thinking_blocks")
    if isinstance(kept, list):
        return [block for item in kept if (block := _from_kept(item)) is not None]
    details = message.get("reasoning_details")
    if isinstance(details, list):
        return [block for item in details if (block := _from_details(item)) is not None]
    return []


def _from_kept(item: object) -> dict[str, Any] | None:
    if not isinstance(item, dict):
        return None
    kind = item.get("type")
    if kind == "thinking":
        return _signed(item.get("thinking"), item.get("signature"))
    if kind == "redacted_thinking":
        return _redacted(item.get("data"))
    return None


def _from_details(item: object) -> dict[str, Any] | None:
    if not isinstance(item, dict):
        return None
    kind = item.get("type")
    if kind == "reasoning.text":
        return _signed(item.get("text"), item.get("signature"))
    if kind == "reasoning.encrypted":
        return _redacted(item.get("data"))
    return None


def _signed(text: object, signature: object) -> dict[str, Any] | None:
    if not isinstance(signature, str) or not signature:
        return None
    thinking = text if isinstance(text, str) else ""
    return {"type": "thinking", "thinking": thinking, "signature": signature}


def _redacted(data: object) -> dict[str, Any] | None:
    if not isinstance(data, str) or not data:
        return None
    return {"type": "redacted_thinking", "data": data}


def continues_unthought_turn(turns: list[dict[str, Any]]) -> bool:
    """Whether the request continues an assistant turn that does not start with a thinking
    block. The turn is what follows the last user turn that says something (not only tool
    results): in a tool loop, its first assistant message holds the thinking, and the later
    ones (Claude does not think again between tool results) start with their tool calls."""
    start = 0
    for index in range(len(turns) - 1, -1, -1):
        turn = turns[index]
        if turn["role"] == "user" and any(
            block.get("type") != "tool_result" for block in turn["content"]
        ):
            start = index + 1
            break
    for turn in turns[start:]:
        if turn["role"] == "assistant":
            content = turn["content"]
            return not content or content[0].get("type") not in _THINKING_TYPES
    return False  # a new turn: nothing of it is continued


def strip_thinking(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The turns without thinking blocks (a request sent without thinking); a turn left
    empty is dropped."""
    out: list[dict[str, Any]] = []
    for turn in turns:
        content = [block for block in turn["content"] if block.get("type") not in _THINKING_TYPES]
        if content:
            out.append({"role": turn["role"], "content": content})
    return out

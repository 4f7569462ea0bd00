"""How an embeddings call's refusal for credits is worded: the 402 in its own words (the
routing's errors and log lines are `gateway.routing.report`'s, as chat's are)."""

from __future__ import annotations

from gateway.errors import ErrorDetail, InsufficientCredits

__all__ = ["too_poor"]


def too_poor(refused: InsufficientCredits) -> InsufficientCredits:
    """The 402 in an embeddings call's words: what its hold is made of, and how to need less
    (the gatekeeper's speaks of completion tokens, which embeddings do not have)."""
    amounts = {d.field: d.message for d in refused.details or [] if d.field.endswith("_credits")}
    needed, available = amounts.get("hold_credits", "?"), amounts.get("available_credits", "?")
    error = InsufficientCredits(
        f"This call needs a hold of {needed} credits and the wallet has {available} available. "
        "The hold prices the input's token bound (a text's UTF-8 bytes, a token array's "
        "length) at the model's input price: send fewer or shorter inputs, or add credits.",
        details=[
            ErrorDetail(field="hold_credits", message=needed),
            ErrorDetail(field="available_credits", message=available),
            ErrorDetail(field="input", message="send fewer or shorter inputs to hold less"),
        ],
    )
    error.rate = refused.rate
    return error

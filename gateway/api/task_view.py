"""The task envelope: a stored task as the API shows it (create, lookup, cancel, list).

Content URLs are signed when the envelope is rendered, so every read hands out links that are
valid for the next hour; the task itself stores artifact ids only.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from gateway.artifacts.service import ArtifactService
from gateway.billing.money import format_credits, format_usd
from gateway.schemas.times import iso
from gateway.store.base import TaskRecord

__all__ = ["callback_view", "task_view"]

_UNITS = {"text_to_image": "image", "image_to_image": "image"}


def _iso(timestamp: float | None) -> str | None:
    return None if timestamp is None else iso(timestamp)


def task_view(task: TaskRecord, artifacts: ArtifactService, rate: Decimal) -> dict[str, Any]:
    charged, refunded = task.price_units, task.refunded_units
    net = charged - refunded
    return {
        "object": "task",
        "task_id": task.task_id,
        "status": task.status,
        "capability": task.capability,
        "model": task.model,
        "resolved_model": task.resolved_model,
        "metadata": task.metadata,
        "input": task.input,
        "progress": {
            "percent": task.progress.percent,
            "stage": task.progress.stage,
            "message": task.progress.message,
        },
        "output": _output(task.output, artifacts),
        "warnings": task.warnings,
        "error": task.error,
        "usage": {
            **task.usage,
            "lines": _lines(task, rate),
            "credits": format_credits(net),
            "credits_usd_reference": format_usd(net, rate),
        },
        "billing": {
            "charged_credits": format_credits(charged),
            "refunded_credits": format_credits(refunded),
            "charged_credits_usd_reference": format_usd(charged, rate),
            "refunded_credits_usd_reference": format_usd(refunded, rate),
            "currency": "USD",
        },
        "callback": callback_view(task),
        "created_at": _iso(task.created_at),
        "started_at": _iso(task.started_at),
        "completed_at": _iso(task.completed_at),
        "cancel_requested_at": _iso(task.cancel_requested_at),
        "links": {
            "self": f"/v1/tasks/{task.task_id}",
            "cancel": f"/v1/tasks/{task.task_id}/cancel",
        },
    }


def callback_view(task: TaskRecord) -> dict[str, Any]:
    """The task's callback and its delivery state (all null without one)."""
    cb = task.callback
    if cb is None:
        return {
            "url": None,
            "status": None,
            "attempt_count": 0,
            "delivered_at": None,
            "last_error": None,
            "next_attempt_at": None,
        }
    return {
        "url": cb.url,
        "status": cb.status,
        "attempt_count": cb.attempt_count,
        "delivered_at": _iso(cb.delivered_at),
        "last_error": cb.last_error,
        "next_attempt_at": _iso(cb.next_attempt_at),
    }


def _lines(task: TaskRecord, rate: Decimal) -> list[dict[str, str]]:
    """What was billed: the debit at creation, and the refund when there was one."""
    unit = _UNITS.get(task.capability, "task")
    quantity = int(task.input.get("n", 1)) if unit == "image" else 1
    quality = task.input.get("quality")
    meter = f"{task.capability}.{quality}" if quality else task.capability
    lines = [_line(meter, quantity, unit, task.price_units, rate)]
    if task.refunded_units:
        unit_price = task.price_units // quantity if quantity else task.price_units
        refunded = task.refunded_units // unit_price if unit_price else 0
        lines.append(_line(f"{meter}.refund", -refunded, unit, -task.refunded_units, rate))
    return lines


def _line(meter: str, quantity: int, unit: str, units: int, rate: Decimal) -> dict[str, str]:
    return {
        "meter": meter,
        "quantity": str(quantity),
        "unit": unit,
        "billed_amount_credits": format_credits(units),
        "billed_amount_credits_usd_reference": format_usd(units, rate),
    }


def _output(output: dict[str, Any], artifacts: ArtifactService) -> dict[str, Any]:
    if not output:
        return {}
    view = dict(output)
    if "images" in view:
        view["images"] = [
            {"url": artifacts.content_url(item["artifact_id"]), **item} for item in view["images"]
        ]
    if "clips" in view:
        view["clips"] = [
            {"audio_url": artifacts.content_url(item["artifact_id"]), **item}
            for item in view["clips"]
        ]
    return view

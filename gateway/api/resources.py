"""The services and handles a request's controller needs, as one value."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gateway.admission.finisher import CallFinisher
from gateway.admission.gatekeeper import Gatekeeper
from gateway.artifacts.service import ArtifactService
from gateway.auth import Authenticator
from gateway.chat.service import ChatService
from gateway.config.loader import GatewayConfig
from gateway.embeddings.service import EmbeddingsService
from gateway.routing.resolver import Router
from gateway.store.base import Store
from gateway.store.health import StoreHealth
from gateway.tasks.service import TaskService
from gateway.tasks.worker import Worker

__all__ = ["Resources"]


@dataclass(frozen=True, slots=True)
class Resources:
    """What the controllers reach through DI: one per version of the routing file, built by the
    composition root (`gateway.app.resources.Runtime`)."""

    admin_token_hash: str
    """`sha256:<hex>` of the admin token ("" when the admin API is off)."""
    config: GatewayConfig
    store: Store
    providers: dict[str, Any]
    """By name; each implements the `providers.base` protocols of the capabilities it serves."""
    router: Router
    auth: Authenticator
    gatekeeper: Gatekeeper
    finisher: CallFinisher
    health: StoreHealth
    chat: ChatService
    artifacts: ArtifactService
    tasks: TaskService
    worker: Worker
    embeddings: EmbeddingsService

"""The routing file: its types (tenants, model entries, prices) and loading them.

Routing (which model answers) and billing (what it costs) both read these; neither imports
the other.
"""

from gateway.config.loader import ConfigError, GatewayConfig, ProviderConfig, Tenant, load_config
from gateway.config.schema import CAPABILITIES, IMAGE_QUALITIES, ModelEntry, Pricing, image_price

__all__ = [
    "CAPABILITIES",
    "IMAGE_QUALITIES",
    "ConfigError",
    "GatewayConfig",
    "ModelEntry",
    "Pricing",
    "ProviderConfig",
    "Tenant",
    "image_price",
    "load_config",
]

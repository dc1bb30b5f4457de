"""The Karpenter gateway (shell: the Karpenter issue fills it in)."""

from __future__ import annotations

from typing import Any


class KarpenterGateway:
    """A ClusterGateway over the Kubernetes API; not implemented yet."""

    def __init__(self, clock: Any, **options: Any) -> None:
        self.clock = clock
        self.options = options

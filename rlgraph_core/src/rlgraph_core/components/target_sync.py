"""Target-network synchronisation: hard copy or soft (Polyak) averaging."""

from __future__ import annotations

from rlgraph_core.errors import BuildError
from rlgraph_core.graph import Component, api


class TargetSync(Component):
    """Moves a target network's variables towards a source network's.

    ``tau = 1`` is a hard copy; ``0 < tau < 1`` is Polyak averaging
    ``target <- (1 - tau) * target + tau * source``.
    """

    def __init__(self, source: Component, target: Component, tau: float = 1.0, name: str = "target_sync"):
        super().__init__(name)
        if not 0.0 < tau <= 1.0:
            raise BuildError(f"TargetSync tau must be in (0, 1], got {tau}.")
        self.source = source
        self.target = target
        self.tau = tau

    def _pairs(self):
        """(targets, sources) variable lists, matched by name; checked and cached on first use
        (variables never change after the build, and sync runs on every update with Polyak)."""
        if getattr(self, "_cached_pairs", None) is None:
            src = self.source.variables()
            dst = self.target.variables()
            if not src or not dst:
                # Traced before the build reached both networks: nothing to sync yet, and
                # nothing cached, so the pairs are found once both exist.
                return None
            if list(src) != list(dst):
                raise BuildError(
                    f"Target network '{self.target.scope}' has variables {list(dst)} but source "
                    f"'{self.source.scope}' has {list(src)}; they must be built from the same spec."
                )
            self._cached_pairs = ([dst[k] for k in dst], [src[k] for k in dst])
        return self._cached_pairs

    @api
    def sync(self):
        """Apply one synchronisation step (in place)."""
        pairs = self._pairs()
        if pairs is not None:
            self.ops.polyak(*pairs, self.tau)
        return None

    def sync_if(self, due):
        """Traced form of :meth:`sync` for a fused update loop: sync where ``due`` (a 0-d float32
        tensor, 1 or 0) is 1, leave the target exactly as it is where it is 0 (no Python branch
        on a tensor)."""
        pairs = self._pairs()
        if pairs is not None:
            self.ops.polyak(*pairs, due * self.tau)
        return None

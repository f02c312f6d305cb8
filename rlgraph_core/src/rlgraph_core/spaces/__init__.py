"""rlgraph spaces: typed descriptions of the data flowing through rlgraph graphs.

Leaf spaces: :class:`FloatBox`, :class:`IntBox`, :class:`BoolBox`,
:class:`Discrete`, :class:`MultiDiscrete`, :class:`MultiBinary`.
Containers: :class:`Dict`, :class:`Tuple`.
Helpers: :func:`from_gym`, :func:`to_gym`, :func:`space_from_value`.

Only numpy is imported here; gymnasium is imported lazily by the converters.
"""

from .base import Space, SpaceError
from .box import BoolBox, BoundedSpace, FloatBox, IntBox
from .containers import ContainerSpace, Dict, Tuple
from .discrete import Discrete, MultiBinary, MultiDiscrete
from .gym_convert import from_gym, to_gym
from .inference import space_from_value
from .leaf import LeafSpace

__all__ = [
    "SpaceError",
    "Space",
    "LeafSpace",
    "BoundedSpace",
    "ContainerSpace",
    "FloatBox",
    "IntBox",
    "BoolBox",
    "Discrete",
    "MultiDiscrete",
    "MultiBinary",
    "Dict",
    "Tuple",
    "from_gym",
    "to_gym",
    "space_from_value",
]

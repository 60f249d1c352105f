"""What runs inside a trial: the session (``report``, ``get_checkpoint``, ``get_context``), the
class API ``Trainable``, and the wrappers ``with_parameters`` and ``with_resources``."""

from .resources import PlacementGroupFactory, with_resources
from .session import TuneContext, get_checkpoint, get_context, report
from .trainable import Trainable
from .util import with_parameters

__all__ = ["PlacementGroupFactory", "Trainable", "TuneContext", "get_checkpoint",
           "get_context", "report", "with_parameters", "with_resources"]

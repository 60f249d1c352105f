"""``import ray`` means ``import nbdist as ray``: Ray's unit tests run unchanged on nbdist.

``install()`` puts ``sys.modules["ray"]`` and a meta path finder in place, before the test
modules import anything. For ``ray`` and every ``ray.X.Y`` the finder gives:

- the helpers this folder provides, for the test helpers Ray keeps out of its wheel or behind
  its internals: ``ray._private.test_utils``, ``ray._common.test_utils`` and
  ``ray._private.client_mode_hook`` (``nbdist_test_utils``), ``ray.tests.client_test_utils``
  (``client_test_utils``);
- ``nbdist.X.Y`` when nbdist has that module: a view of it. Reading a name reads nbdist's
  module; a name nbdist lacks reads as a :class:`Missing` placeholder, which fails (with
  ``NotInNbdist``) where the test uses it, so a test file that imports one name nbdist lacks
  still runs its other tests. The view is named after nbdist's module, so a function that
  uses ``ray`` pickles as a reference to ``nbdist`` and a worker resolves it there;
- otherwise (``ray._private.worker``, ``ray._raylet``...): a module of placeholders.

Nothing of nbdist is changed: the views hold their names in their own ``__dict__`` only.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from typing import Any

HELPERS = {
    "ray._private.test_utils": "nbdist_test_utils",
    "ray._common.test_utils": "nbdist_test_utils",
    "ray._private.client_mode_hook": "nbdist_test_utils",
    "ray.tests.client_test_utils": "client_test_utils",
}


class NotInNbdist(Exception):
    """A test used a name of Ray's that nbdist does not have."""


class Missing:
    """Stands for a name nbdist lacks; any real use of it raises :class:`NotInNbdist`."""

    def __init__(self, name: str) -> None:
        self._name = name

    def _fail(self, *args: Any, **kwargs: Any) -> Any:
        raise NotInNbdist(f"nbdist has no {self._name}")

    __call__ = _fail
    __eq__ = _fail
    __bool__ = _fail
    __iter__ = _fail
    __len__ = _fail
    __enter__ = _fail
    __instancecheck__ = _fail
    __subclasscheck__ = _fail
    __mro_entries__ = _fail

    def __hash__(self) -> int:
        return id(self)

    def __getattr__(self, attr: str) -> Missing:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return Missing(f"{self._name}.{attr}")

    def __getitem__(self, item: Any) -> Missing:  # ObjectRef[int] in an annotation
        return self

    def __repr__(self) -> str:
        return f"<not in nbdist: {self._name}>"


def _nbdist_name(ray_name: str) -> str:
    return "nbdist" + ray_name[len("ray"):]


def _has_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _child(ray_name: str, attr: str) -> Any:
    """A submodule ``ray_name.attr`` read as an attribute, if there is one."""
    full = f"{ray_name}.{attr}"
    if full in sys.modules:
        return sys.modules[full]
    if full in HELPERS or _has_module(_nbdist_name(full)):
        return importlib.import_module(full)
    return Missing(full)


class View(types.ModuleType):
    """``ray.X`` as a view of ``nbdist.X``."""

    def __init__(self, ray_name: str, target: types.ModuleType) -> None:
        super().__init__(target.__name__, target.__doc__)
        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "_ray_name", ray_name)
        object.__setattr__(self, "__path__", [])

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__"):
            return getattr(self._target, attr)  # __version__, __all__, __file__
        try:
            return getattr(self._target, attr)
        except AttributeError:
            return _child(self._ray_name, attr)

    def __reduce__(self) -> Any:  # a function that uses `ray` pickles it as nbdist's module
        return importlib.import_module, (self.__name__,)

    def __setattr__(self, attr: str, value: Any) -> None:
        if attr.startswith("__") and attr.endswith("__"):
            object.__setattr__(self, attr, value)
        else:  # monkeypatch.setattr(ray.x, ...) patches nbdist's module, as it would Ray's
            setattr(self._target, attr, value)

    def __delattr__(self, attr: str) -> None:
        delattr(self._target, attr)


class MissingModule(types.ModuleType):
    """A module of Ray's that nbdist does not have: every name in it is :class:`Missing`."""

    def __init__(self, ray_name: str) -> None:
        super().__init__(ray_name)
        self.__path__: list[str] = []

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return _child(self.__name__, attr)

    def __reduce__(self) -> Any:
        return importlib.import_module, (self.__name__,)


def _module_for(ray_name: str) -> types.ModuleType:
    if ray_name in HELPERS:
        return importlib.import_module(HELPERS[ray_name])
    target = _nbdist_name(ray_name)
    if _has_module(target):
        return View(ray_name, importlib.import_module(target))
    return MissingModule(ray_name)


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname == "ray" or fullname.startswith("ray."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _module_for(spec.name)
        if spec.name in HELPERS:  # a real module shared by two names: keep its own spec
            sys.modules[spec.name] = module
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


_FINDER = _Finder()


def install() -> None:
    """Map ``ray`` and ``ray.*`` to nbdist (idempotent)."""
    if _FINDER in sys.meta_path:
        return
    for name in [n for n in sys.modules if n == "ray" or n.startswith("ray.")]:
        del sys.modules[name]
    sys.meta_path.insert(0, _FINDER)
    importlib.import_module("ray")


def install_ray_extras() -> None:
    """On Ray itself: only the helpers Ray's wheel leaves out (``ray.tests.*``)."""
    import ray  # noqa: F401

    tests = sys.modules.setdefault("ray.tests", types.ModuleType("ray.tests"))
    tests.__path__ = []
    module = importlib.import_module(HELPERS["ray.tests.client_test_utils"])
    sys.modules["ray.tests.client_test_utils"] = module
    tests.client_test_utils = module  # type: ignore[attr-defined]
    # Test files of other Ray versions import SignalActor, Semaphore, wait_for_condition ...
    # from ray._private.test_utils; Ray 2.60 keeps them in ray._common.test_utils.
    private = importlib.import_module("ray._private.test_utils")
    common = importlib.import_module("ray._common.test_utils")
    for name in dir(common):
        if not name.startswith("_") and not hasattr(private, name):
            setattr(private, name, getattr(common, name))

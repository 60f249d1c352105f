"""Ray's ``ray.types``, importable as ``nbdist.types``: the names used in type hints of code
written for Ray. (A file named ``types.py`` here would shadow the standard library's ``types``
in a process started with this folder as its working directory, so ``nbdist/__init__.py``
registers this module under that name.)

``ObjectRef[int]`` annotates a ref whose value is an int; nbdist's `ObjectRef` is generic for
that purpose only (the parameter is not checked at run time)."""

from nbdist.objects.refs import ObjectRef

__all__ = ["ObjectRef"]

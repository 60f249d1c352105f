"""Search-space domains: what a ``param_space`` value may be besides a constant.

A ``Domain`` is a set of values (``Float``, ``Integer``, ``Categorical``) or a function of the
partly resolved config (``Function``), paired with a ``Sampler`` that draws from it (uniform,
log-uniform, normal, a grid, optionally quantized). The public constructors are Ray Tune's:
``uniform``, ``quniform``, ``loguniform``, ``qloguniform``, ``randn``, ``qrandn``, ``randint``,
``qrandint``, ``lograndint``, ``qlograndint``, ``choice``, ``sample_from`` and ``grid_search``,
with Ray's bounds: ``randint``/``lograndint`` exclude ``upper``, the quantized integer forms
include it, float forms include both ends.

Searchers translate these domains into their own packages' spaces (optuna distributions,
bayesian-optimization bounds); the basic variant generator calls ``sample`` directly.

Randomness: ``random_state`` may be None (numpy's global state, so ``np.random.seed`` makes a
search reproducible, as in Ray), an int seed, a ``numpy.random.Generator`` or a legacy
``numpy.random.RandomState``.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from copy import copy
from typing import Any

import numpy as np

RandomState = int | np.random.Generator | np.random.RandomState | None


class _Rng:
    """One face over numpy's two generator APIs (``Generator`` and legacy ``RandomState``)."""

    def __init__(self, random_state: RandomState = None) -> None:
        if random_state is None:
            self._rng: Any = np.random
        elif isinstance(random_state, np.random.Generator | np.random.RandomState):
            self._rng = random_state
        else:
            self._rng = np.random.default_rng(random_state)

    def uniform(self, low: float, high: float, size: int) -> np.ndarray:
        return np.asarray(self._rng.uniform(low, high, size=size))

    def normal(self, loc: float, scale: float, size: int) -> np.ndarray:
        return np.asarray(self._rng.normal(loc, scale, size=size))

    def integers(self, low: int, high: int, size: int) -> np.ndarray:
        if isinstance(self._rng, np.random.Generator):
            return self._rng.integers(low, high, size=size)
        return np.asarray(self._rng.randint(low, high, size=size))


class Sampler:
    """Draws ``size`` values from a domain."""

    def sample(self, domain: Domain, config: Any = None, size: int = 1,
               random_state: RandomState = None) -> list[Any]:
        raise NotImplementedError

    def __str__(self) -> str:
        return type(self).__name__


class Uniform(Sampler):
    def __str__(self) -> str:
        return "Uniform"


class LogUniform(Sampler):
    def __init__(self, base: float = 10) -> None:
        if base <= 0:
            raise ValueError(f"the base of a log-uniform domain must be positive, got {base}")
        self.base = base

    def __str__(self) -> str:
        return f"LogUniform(base={self.base})"


class Normal(Sampler):
    def __init__(self, mean: float = 0.0, sd: float = 1.0) -> None:
        if sd <= 0:
            raise ValueError(f"the standard deviation of a normal domain must be positive, got {sd}")
        self.mean = mean
        self.sd = sd

    def __str__(self) -> str:
        return f"Normal(mean={self.mean}, sd={self.sd})"


class Grid(Sampler):
    """Marks a categorical domain as a grid axis: crossed, never sampled."""

    def sample(self, domain: Domain, config: Any = None, size: int = 1,
               random_state: RandomState = None) -> list[Any]:
        raise RuntimeError("grid axes are crossed by the variant generator, not sampled")


class Quantized(Sampler):
    """Rounds another sampler's values to multiples of ``q``, within the domain's bounds."""

    def __init__(self, sampler: Sampler, q: float) -> None:
        if q <= 0:
            raise ValueError(f"the quantization step q must be positive, got {q}")
        self.sampler = sampler
        self.q = q

    def sample(self, domain: Domain, config: Any = None, size: int = 1,
               random_state: RandomState = None) -> list[Any]:
        if self.q == 1:
            return self.sampler.sample(domain, config, size, random_state)
        inner = copy(domain)
        # Shrinking the bounds to multiples of q keeps every rounded value inside the domain.
        inner.lower = np.ceil(domain.lower / self.q) * self.q  # type: ignore[attr-defined]
        inner.upper = np.floor(domain.upper / self.q) * self.q  # type: ignore[attr-defined]
        values = np.asarray(self.sampler.sample(inner, config, size, random_state), dtype=float)
        return list(np.round(values / self.q) * self.q)

    def __str__(self) -> str:
        return f"{self.sampler}.quantized(q={self.q})"


class Domain:
    """A set of values and the sampler drawing from it."""

    sampler: Sampler | None = None
    default_sampler_cls: type[Sampler] = Uniform

    def __deepcopy__(self, memo: dict[int, Any]) -> Domain:
        # Domains are values, never changed once built (set_sampler works on fresh copies):
        # sharing them keeps the copies of a spec per variant cheap.
        return self

    def set_sampler(self, sampler: Sampler, allow_override: bool = False) -> None:
        if self.sampler is not None and not allow_override:
            raise ValueError(
                f"{self} already has the sampler {self.sampler}; a domain takes one sampler")
        self.sampler = sampler

    def get_sampler(self) -> Sampler:
        if self.sampler is None:
            self.sampler = self.default_sampler_cls()
        return self.sampler

    def sample(self, config: Any = None, size: int = 1, random_state: RandomState = None) -> Any:
        items = self.get_sampler().sample(self, config=config, size=size,
                                          random_state=random_state)
        if size == 1:
            return self.cast(items[0])
        return [self.cast(item) for item in items]

    def cast(self, value: Any) -> Any:
        return value

    def is_grid(self) -> bool:
        return isinstance(self.sampler, Grid)

    def is_function(self) -> bool:
        return False

    def is_valid(self, value: Any) -> bool:
        raise NotImplementedError

    @property
    def domain_str(self) -> str:
        return "(unknown)"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.domain_str} sampler={self.get_sampler()}>"


class Float(Domain):
    """Real numbers in ``[lower, upper]`` (either bound may be None for a normal sampler)."""

    def __init__(self, lower: float | None, upper: float | None) -> None:
        self.default_sampler_cls = _FloatUniform
        self.lower = -math.inf if lower is None else lower
        self.upper = math.inf if upper is None else upper

    def uniform(self) -> Float:
        if not (math.isfinite(self.lower) and math.isfinite(self.upper)):
            raise ValueError("a uniform float domain needs finite lower and upper bounds")
        new = copy(self)
        new.set_sampler(_FloatUniform())
        return new

    def loguniform(self, base: float = 10) -> Float:
        if not self.lower > 0:
            raise ValueError(
                f"a log-uniform domain needs a positive lower bound, got {self.lower}; "
                "use uniform() for ranges that reach zero or below")
        if not math.isfinite(self.upper):
            raise ValueError("a log-uniform float domain needs a finite upper bound")
        new = copy(self)
        new.set_sampler(_FloatLogUniform(base))
        return new

    def normal(self, mean: float = 0.0, sd: float = 1.0) -> Float:
        new = copy(self)
        new.set_sampler(_FloatNormal(mean, sd))
        return new

    def quantized(self, q: float) -> Float:
        if math.isfinite(self.lower) and not math.isclose(self.lower / q, round(self.lower / q)):
            raise ValueError(f"the lower bound {self.lower} is not a multiple of q={q}")
        if math.isfinite(self.upper) and not math.isclose(self.upper / q, round(self.upper / q)):
            raise ValueError(f"the upper bound {self.upper} is not a multiple of q={q}")
        new = copy(self)
        new.set_sampler(Quantized(new.get_sampler(), q), allow_override=True)
        return new

    def cast(self, value: Any) -> float:
        return float(value)

    def is_valid(self, value: Any) -> bool:
        return bool(self.lower <= value <= self.upper)

    @property
    def domain_str(self) -> str:
        return f"({self.lower}, {self.upper})"


class Integer(Domain):
    """Integers in ``[lower, upper)``; the quantized form includes ``upper``."""

    def __init__(self, lower: int, upper: int) -> None:
        self.default_sampler_cls = _IntegerUniform
        self.lower = lower
        self.upper = upper

    def uniform(self) -> Integer:
        new = copy(self)
        new.set_sampler(_IntegerUniform())
        return new

    def loguniform(self, base: float = 10) -> Integer:
        if not self.lower > 0:
            raise ValueError(f"a log-uniform domain needs a positive lower bound, got {self.lower}")
        new = copy(self)
        new.set_sampler(_IntegerLogUniform(base))
        return new

    def quantized(self, q: int) -> Integer:
        new = copy(self)
        new.set_sampler(Quantized(new.get_sampler(), q), allow_override=True)
        return new

    def cast(self, value: Any) -> int:
        return int(value)

    def is_valid(self, value: Any) -> bool:
        return bool(self.lower <= value <= self.upper)

    @property
    def domain_str(self) -> str:
        return f"({self.lower}, {self.upper})"


class Categorical(Domain):
    """One of a list of values, of any types."""

    def __init__(self, categories: Sequence[Any]) -> None:
        self.default_sampler_cls = _CategoricalUniform
        self.categories = list(categories)
        if not self.categories:
            raise ValueError("a categorical domain needs at least one category")

    def uniform(self) -> Categorical:
        new = copy(self)
        new.set_sampler(_CategoricalUniform())
        return new

    def grid(self) -> Categorical:
        new = copy(self)
        new.set_sampler(Grid())
        return new

    def is_valid(self, value: Any) -> bool:
        return value in self.categories

    def __len__(self) -> int:
        return len(self.categories)

    def __getitem__(self, index: int) -> Any:
        return self.categories[index]

    @property
    def domain_str(self) -> str:
        return str(self.categories)


class Function(Domain):
    """A value computed by a user function, given the spec (``spec.config``) or nothing."""

    def __init__(self, func: Callable[..., Any]) -> None:
        self.func = func
        self.pass_config = _takes_one_argument(func)

    def is_function(self) -> bool:
        return True

    def is_valid(self, value: Any) -> bool:
        return True

    @property
    def domain_str(self) -> str:
        return f"{self.func}()"

    def get_sampler(self) -> Sampler:
        if self.sampler is None:
            self.sampler = _CallSampler()
        return self.sampler


def _takes_one_argument(func: Callable[..., Any]) -> bool:
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):
        # Builtins without a signature (random.random, ...) are called as they are.
        return False
    try:
        signature.bind(None)
        return True
    except TypeError:
        pass
    try:
        signature.bind()
        return False
    except TypeError as exc:
        raise ValueError(
            f"sample_from expects a function of no argument or of one (the spec, with "
            f"spec.config), got {func!r} with signature {signature}") from exc


class _FloatUniform(Uniform):
    def sample(self, domain: Domain, config: Any = None, size: int = 1,
               random_state: RandomState = None) -> list[Any]:
        assert isinstance(domain, Float)
        return list(_Rng(random_state).uniform(domain.lower, domain.upper, size))


class _FloatLogUniform(LogUniform):
    def sample(self, domain: Domain, config: Any = None, size: int = 1,
               random_state: RandomState = None) -> list[Any]:
        assert isinstance(domain, Float)
        log_base = math.log(self.base)
        low, high = math.log(domain.lower) / log_base, math.log(domain.upper) / log_base
        return list(np.power(self.base, _Rng(random_state).uniform(low, high, size)))


class _FloatNormal(Normal):
    def sample(self, domain: Domain, config: Any = None, size: int = 1,
               random_state: RandomState = None) -> list[Any]:
        assert isinstance(domain, Float)
        values = _Rng(random_state).normal(self.mean, self.sd, size)
        return list(np.clip(values, domain.lower, domain.upper))


class _IntegerUniform(Uniform):
    def sample(self, domain: Domain, config: Any = None, size: int = 1,
               random_state: RandomState = None) -> list[Any]:
        assert isinstance(domain, Integer)
        return list(_Rng(random_state).integers(int(domain.lower), int(domain.upper), size))


class _IntegerLogUniform(LogUniform):
    def sample(self, domain: Domain, config: Any = None, size: int = 1,
               random_state: RandomState = None) -> list[Any]:
        assert isinstance(domain, Integer)
        log_base = math.log(self.base)
        low, high = math.log(domain.lower) / log_base, math.log(domain.upper) / log_base
        values = np.floor(np.power(self.base, _Rng(random_state).uniform(low, high, size)))
        return list(values.astype(int))


class _CategoricalUniform(Uniform):
    def sample(self, domain: Domain, config: Any = None, size: int = 1,
               random_state: RandomState = None) -> list[Any]:
        assert isinstance(domain, Categorical)
        # Indices rather than numpy's choice over the values: categories keep their own types
        # (dicts, None, mixed), which an array of them would coerce.
        indices = _Rng(random_state).integers(0, len(domain.categories), size)
        return [domain.categories[int(i)] for i in indices]


class _CallSampler(Sampler):
    def sample(self, domain: Domain, config: Any = None, size: int = 1,
               random_state: RandomState = None) -> list[Any]:
        assert isinstance(domain, Function)
        if domain.pass_config:
            return [domain.func(config) for _ in range(size)]
        return [domain.func() for _ in range(size)]


def uniform(lower: float, upper: float) -> Float:
    """A float drawn uniformly from ``[lower, upper]``."""
    return Float(lower, upper).uniform()


def quniform(lower: float, upper: float, q: float) -> Float:
    """A float drawn uniformly from ``[lower, upper]``, rounded to a multiple of ``q``."""
    return Float(lower, upper).uniform().quantized(q)


def loguniform(lower: float, upper: float, base: float = 10) -> Float:
    """A float whose logarithm is uniform over ``[log(lower), log(upper)]``."""
    return Float(lower, upper).loguniform(base)


def qloguniform(lower: float, upper: float, q: float, base: float = 10) -> Float:
    """A log-uniform float rounded to a multiple of ``q``."""
    return Float(lower, upper).loguniform(base).quantized(q)


def randn(mean: float = 0.0, sd: float = 1.0) -> Float:
    """A float drawn from a normal distribution."""
    return Float(None, None).normal(mean, sd)


def qrandn(mean: float, sd: float, q: float) -> Float:
    """A normal float rounded to a multiple of ``q``."""
    return Float(None, None).normal(mean, sd).quantized(q)


def randint(lower: int, upper: int) -> Integer:
    """An integer drawn uniformly from ``[lower, upper)`` (``upper`` excluded, as numpy)."""
    return Integer(lower, upper).uniform()


def lograndint(lower: int, upper: int, base: float = 10) -> Integer:
    """An integer drawn log-uniformly from ``[lower, upper)``."""
    return Integer(lower, upper).loguniform(base)


def qrandint(lower: int, upper: int, q: int = 1) -> Integer:
    """An integer from ``[lower, upper]`` (``upper`` included), a multiple of ``q``."""
    return Integer(lower, upper + 1).uniform().quantized(q)


def qlograndint(lower: int, upper: int, q: int, base: float = 10) -> Integer:
    """A log-uniform integer from ``[lower, upper]`` (``upper`` included), a multiple of ``q``."""
    return Integer(lower, upper + 1).loguniform(base).quantized(q)


def choice(categories: Sequence[Any]) -> Categorical:
    """One of ``categories``, each equally likely."""
    return Categorical(categories).uniform()


def sample_from(func: Callable[..., Any]) -> Function:
    """A value computed per trial by ``func(spec)`` (reading ``spec.config``) or ``func()``."""
    return Function(func)


def grid_search(values: Sequence[Any]) -> dict[str, Any]:
    """A grid axis: every value is tried, crossed with the other axes, per sample."""
    return {"grid_search": list(values)}

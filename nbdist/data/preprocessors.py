"""``nbdist.data.preprocessors``: the preprocessors Ray Train examples use (Ray's names).

``fit`` computes its statistics with the dataset's own aggregations (``mean``/``std``,
``min``/``max``, ``unique``); ``transform`` is a lazy ``map_batches`` over pandas batches, so
it streams like any other operator; ``transform_batch`` applies it to one batch in hand.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nbdist.exceptions import NbdistError

from .dataset import Dataset


class Preprocessor:
    stats_: dict[str, Any] | None = None
    _needs_fit = True

    def fit(self, ds: Dataset) -> Preprocessor:
        self.stats_ = self._fit(ds)
        return self

    def fit_transform(self, ds: Dataset) -> Dataset:
        return self.fit(ds).transform(ds)

    def transform(self, ds: Dataset) -> Dataset:
        self._check_fitted()
        return ds.map_batches(self._transform_pandas, batch_format="pandas")

    def transform_batch(self, batch: Any) -> Any:
        self._check_fitted()
        return self._transform_pandas(batch)

    def _check_fitted(self) -> None:
        if self._needs_fit and self.stats_ is None:
            raise NbdistError(f"{type(self).__name__} is not fitted; call fit(dataset) first.")

    def _fit(self, ds: Dataset) -> dict[str, Any]:
        return {}

    def _transform_pandas(self, df: Any) -> Any:
        raise NotImplementedError


class StandardScaler(Preprocessor):
    def __init__(self, columns: list[str]) -> None:
        self.columns = columns

    def _fit(self, ds: Dataset) -> dict[str, Any]:
        return {"mean": ds.mean(self.columns), "std": ds.std(self.columns)}

    def _transform_pandas(self, df: Any) -> Any:
        assert self.stats_ is not None
        for c in self.columns:
            std = self.stats_["std"][f"std({c})"] or 1.0
            df[c] = (df[c] - self.stats_["mean"][f"mean({c})"]) / std
        return df


class MinMaxScaler(Preprocessor):
    def __init__(self, columns: list[str]) -> None:
        self.columns = columns

    def _fit(self, ds: Dataset) -> dict[str, Any]:
        return {"min": ds.min(self.columns), "max": ds.max(self.columns)}

    def _transform_pandas(self, df: Any) -> Any:
        assert self.stats_ is not None
        for c in self.columns:
            lo, hi = self.stats_["min"][f"min({c})"], self.stats_["max"][f"max({c})"]
            df[c] = (df[c] - lo) / ((hi - lo) or 1.0)
        return df


class LabelEncoder(Preprocessor):
    def __init__(self, label_column: str) -> None:
        self.label_column = label_column

    def _fit(self, ds: Dataset) -> dict[str, Any]:
        values = sorted(ds.unique(self.label_column))
        return {f"unique_values({self.label_column})": {v: i for i, v in enumerate(values)}}

    def _transform_pandas(self, df: Any) -> Any:
        assert self.stats_ is not None
        df[self.label_column] = df[self.label_column].map(
            self.stats_[f"unique_values({self.label_column})"])
        return df


class OneHotEncoder(Preprocessor):
    """Each column as a one-hot vector column (Ray 2.60's layout) over its fitted values."""

    def __init__(self, columns: list[str]) -> None:
        self.columns = columns

    def _fit(self, ds: Dataset) -> dict[str, Any]:
        return {f"unique_values({c})": {v: i for i, v in enumerate(sorted(ds.unique(c)))}
                for c in self.columns}

    def _transform_pandas(self, df: Any) -> Any:
        assert self.stats_ is not None
        for c in self.columns:
            index = self.stats_[f"unique_values({c})"]
            hot = np.zeros((len(df), len(index)), dtype=np.int64)
            for row, value in enumerate(df[c]):
                if value in index:
                    hot[row, index[value]] = 1
            df[c] = list(hot)
        return df


class Concatenator(Preprocessor):
    """Columns into one vector column ``output_column_name`` (the inputs dropped)."""
    _needs_fit = False

    def __init__(self, columns: list[str] | None = None, output_column_name: str = "concat_out",
                 dtype: Any = None, raise_if_missing: bool = False,
                 exclude: list[str] | None = None) -> None:
        self.columns, self.output, self.dtype = columns, output_column_name, dtype
        self.exclude = exclude or []

    def _transform_pandas(self, df: Any) -> Any:
        cols = [c for c in (self.columns or list(df.columns)) if c not in self.exclude]
        values = np.column_stack([np.stack(df[c].to_numpy()) if df[c].dtype == object
                                  else df[c].to_numpy() for c in cols])
        if self.dtype is not None:
            values = values.astype(self.dtype)
        out = df.drop(columns=cols)
        out[self.output] = list(values)
        return out


class Chain(Preprocessor):
    """Preprocessors fitted and applied in order (each fitted on the previous one's output)."""

    def __init__(self, *preprocessors: Preprocessor) -> None:
        self.preprocessors = preprocessors

    def fit(self, ds: Dataset) -> Preprocessor:
        for p in self.preprocessors:
            ds = p.fit_transform(ds) if p._needs_fit else p.transform(ds)
        self.stats_ = {}
        return self

    def transform(self, ds: Dataset) -> Dataset:
        for p in self.preprocessors:
            ds = p.transform(ds)
        return ds

    def transform_batch(self, batch: Any) -> Any:
        for p in self.preprocessors:
            batch = p.transform_batch(batch)
        return batch


__all__ = ["Chain", "Concatenator", "LabelEncoder", "MinMaxScaler", "OneHotEncoder",
           "Preprocessor", "StandardScaler"]

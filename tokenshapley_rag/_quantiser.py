"""The coarse quantiser of the approximate candidate search: k-means centroids of one
encoder's keys, trained once per model and layer (``benchmarks/train_quantiser.py``) and
shipped with the package, and the deterministic nearest-centroid rule that assigns each
context token to a list and picks each answer token's probed lists.

The centroids are fixed bits (stored as float16). Nearest centroids are found like the
datastore's entries: a float32 matrix product pre-selects within a proven bound
(:func:`~tokenshapley_rag._datastore._preselect_margin`) and the survivors are ordered by
their float64 distance (:func:`~tokenshapley_rag._kernels.exact_d2`) and index, so a key's
list and a query's probes are the same on every machine, thread count and load.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import numpy as np

from tokenshapley_rag._kernels import select_rows_serial
from tokenshapley_rag._datastore import _preselect_margin as preselect_margin

__all__ = ["Quantiser", "load_quantiser", "quantiser_path"]

_FOLDER = Path(__file__).resolve().parent / "data" / "quantisers"


def quantiser_path(encoder_key: str) -> Path:
    """Where the quantiser of the encoder with cache key ``encoder_key`` is shipped."""
    return _FOLDER / (re.sub(r"[^A-Za-z0-9._-]", "_", encoder_key) + ".npz")


class Quantiser:
    """``n_lists`` centroids of width ``hidden``; :meth:`nearest` gives each row's nearest
    centroids in (float64 distance, index) order.

    >>> qz = Quantiser(np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]]))
    >>> qz.nearest(np.array([[9.0, 1.0], [1.0, 1.0]]), 2).tolist()
    [[1, 0], [0, 1]]
    """

    def __init__(self, centroids: np.ndarray) -> None:
        self.centroids = np.ascontiguousarray(centroids, dtype=np.float32)
        self.n_lists, self.hidden = self.centroids.shape
        # Names these centroids in the sentence cache's lists (lists of others are reassigned).
        self.digest = hashlib.sha256(self.centroids.tobytes()).hexdigest()[:16]
        self._norms = np.einsum("nd,nd->n", self.centroids, self.centroids)
        self._rel, absolute = preselect_margin(self.hidden)
        self._margin = self._rel * self._norms.astype(np.float64) + absolute
        self._self = np.arange(self.n_lists, dtype=np.int64)
        self._no_mask = np.zeros((0, 0), dtype=bool)

    def nearest(self, x: np.ndarray, n: int) -> np.ndarray:
        """``(len(x), min(n, n_lists))`` int64: the nearest centroids of each row of ``x``,
        nearest first (ties: lower index)."""
        x = np.ascontiguousarray(x, dtype=np.float32)
        n = min(n, self.n_lists)
        d_out = np.empty((x.shape[0], n))
        i_out = np.empty((x.shape[0], n), dtype=np.int64)
        if not x.shape[0] or not n:
            return i_out
        # |c|^2 - 2 x.c in float32: only pre-selects (the bound covers any summation order).
        partial = self._norms[None, :] - 2.0 * (x @ self.centroids.T)
        x_norms = np.einsum("td,td->t", x, x)
        no_mask = np.zeros((x.shape[0], 0), dtype=bool)
        select_rows_serial(partial, x_norms, x, self.centroids, self._margin, self._rel, self._self, no_mask, False,
                           d_out, i_out)
        return i_out

    def assign(self, keys: np.ndarray) -> np.ndarray:
        """``(len(keys),)`` int32: each key's list (its nearest centroid)."""
        if not len(keys):
            return np.zeros(0, dtype=np.int32)
        return self.nearest(keys, 1)[:, 0].astype(np.int32)


def load_quantiser(encoder_key: str) -> Quantiser | None:
    """The shipped quantiser of this encoder (model, layer and dtype), or None (the search
    then stays exact at every size)."""
    path = quantiser_path(encoder_key)
    if not path.exists():
        return None
    with np.load(path, allow_pickle=False) as data:
        return Quantiser(data["centroids"].astype(np.float32))

"""The exact candidate search on the encoder's device (a GPU): the datastore's keys are
there (the builder copies each source's once), and each block of answer tokens costs one
matrix product and a few reductions there, instead of a pass over every (token, entry) cell
on the CPU.

It keeps the host search's guarantee (``Datastore``'s docstring, ``_kernels``' note on why
the pre-selection is exact): the float32 product only bounds each entry's distance within
the proven margin (``_preselect_margin``), and the entries it cannot rule out are measured
in float64 on the host, in one fixed order (``exact_d2``), so the players, their distances
and the Shapley values are the same bits as the host search's, on any device. The host
scan lowers its cuts as it goes; here every entry is bounded at once, so each cut is
simply the ``c``-th smallest upper bound of its row (the value the host scan ends with),
and only the entries under the final cuts travel back, with their keys (the host never
needs the datastore's float32 keys on this path).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from tokenshapley_rag._kernels import measure_kept_rows

__all__ = ["DeviceIndex", "device_candidates"]

# Query rows x entries per block on the device: the block's float32 product and its float64
# bounds take about 40 bytes a cell, so ~320 MiB at most.
_DEVICE_BLOCK_CELLS = 1 << 23


@dataclass(frozen=True)
class DeviceIndex:
    """What the search reads of a datastore, on ``device``: the keys (float32), their
    cached squared norms (float32), each entry's margin term (float64), its
    representative (the entry whose column it reads) and its two match classes."""

    keys: torch.Tensor
    norms: torch.Tensor
    key_margin: torch.Tensor
    representative: torch.Tensor
    token_class: torch.Tensor
    piece_class: torch.Tensor

    @classmethod
    def of(
        cls, device: torch.device, *, keys: np.ndarray | torch.Tensor, representative: np.ndarray,
        token_class: np.ndarray, piece_class: np.ndarray, margin: tuple[float, float], norms: np.ndarray | None = None,
    ) -> DeviceIndex:
        """Copy the arrays to ``device`` (once per datastore). ``keys``: the float32 keys, or
        the float16 rows they are widened from (half the bytes to copy; widening is exact),
        or those rows already on ``device``;
        either way each entry then takes its representative's row, as the host's keys do
        (``Datastore``). ``norms``: the keys' squared norms, computed there when None (any
        rounding: the margin covers it). ``margin``: ``_preselect_margin``'s ``(rel, abs)``;
        each entry's margin term is ``rel |k|^2 + abs`` with its representative's norm."""

        def put(a: np.ndarray | torch.Tensor) -> torch.Tensor:
            if isinstance(a, torch.Tensor):  # already there (the builder's rows of each source)
                return a.to(device)
            return torch.from_numpy(np.ascontiguousarray(a)).to(device)

        representative_on_device = put(representative)
        keys_on_device = put(keys).float().index_select(0, representative_on_device)
        if norms is None:
            norms_on_device = _squared_norms(keys_on_device)
        else:
            norms_on_device = put(norms)
        rel, absolute = margin
        key_margin = norms_on_device.double().index_select(0, representative_on_device) * rel + absolute
        token = put(token_class)
        piece = token if piece_class is token_class else put(piece_class)
        return cls(keys_on_device, norms_on_device, key_margin, representative_on_device, token, piece)

    @property
    def device(self) -> torch.device:
        return self.keys.device


def _squared_norms(keys: torch.Tensor, rows_per_chunk: int = 1 << 14) -> torch.Tensor:
    """Each row's squared norm, summed in float64 and rounded once to float32: a float32
    product here could run in TF32 or bfloat16 (torch's matmul precision), which the
    search's margin does not cover; float64 arithmetic never does. In chunks of rows, to
    bound the float64 copy's memory."""
    out = torch.empty(keys.shape[0], dtype=torch.float32, device=keys.device)
    for a in range(0, keys.shape[0], rows_per_chunk):
        chunk = keys[a : a + rows_per_chunk].double()
        out[a : a + rows_per_chunk] = chunk.mul_(chunk).sum(dim=1)
    return out


def device_candidates(
    index: DeviceIndex, rel: float, q: np.ndarray, q_norms: np.ndarray, classes: np.ndarray,
    use_piece: np.ndarray, n_match: int, d_out: np.ndarray, i_out: np.ndarray,
) -> None:
    """Write each query's players into ``d_out, i_out`` (shape ``(T, m)``), as
    ``Datastore.game_candidates`` defines them: its ``n_match`` nearest entries of its class
    (piece class where ``use_piece``), then its nearest others up to ``m``, by float64
    distance then index. ``rel`` is the relative part of the margin (``_preselect_margin``);
    ``q`` is float32, ``q_norms`` its squared norms as the host search computes them."""
    t_rows, m = d_out.shape
    n_entries = index.keys.shape[0]
    if not t_rows or not m:
        return
    rows_per_block = max(1, _DEVICE_BLOCK_CELLS // max(n_entries, 1))
    device = index.device
    inf = torch.tensor(float("inf"), dtype=torch.float64, device=device)
    with torch.inference_mode():
        for a in range(0, t_rows, rows_per_block):
            b = min(a + rows_per_block, t_rows)
            qb = torch.from_numpy(np.ascontiguousarray(q[a:b])).to(device)
            qn = torch.from_numpy(q_norms[a:b].astype(np.float64)).to(device)
            # |k|^2 - 2 q.k in float32 (as the host search), each entry reading its
            # representative's column; then, in float64, d = clip(that + |q|^2, 0) and the
            # bounds d -/+ e with e = rel |q|^2 + key_margin, the host scan's arithmetic.
            partial = torch.addmm(index.norms[None, :], qb, index.keys.T, alpha=-2.0)
            d = partial.index_select(1, index.representative).double()
            del partial
            d.add_(qn[:, None]).clamp_(min=0.0)
            e = index.key_margin[None, :] + (rel * qn)[:, None]
            lo = d - e
            hi = d.add_(e)
            del d, e
            near_cut = torch.topk(hi, m, dim=1, largest=False, sorted=True).values[:, -1]
            cls_rows = torch.from_numpy(np.ascontiguousarray(classes[a:b])).to(device)[:, None]
            same = index.token_class[None, :] == cls_rows
            piece_rows = np.flatnonzero(use_piece[a:b])
            if piece_rows.size:
                rows_t = torch.from_numpy(piece_rows).to(device)
                same[rows_t] = index.piece_class[None, :] == cls_rows[rows_t]
            if n_match > 0:
                # Fewer than n_match entries of the class: no cut (inf), all of them play.
                match_cut = torch.topk(torch.where(same, hi, inf), n_match, dim=1, largest=False).values[:, -1]
                keep_match = same & ~(lo > match_cut[:, None])
            else:
                match_cut = torch.full((b - a,), float("-inf"), dtype=torch.float64, device=device)
                keep_match = torch.zeros_like(same)
            del hi
            # "not lo > cut", as the host scan: a NaN bound keeps its entry.
            keep = ~(lo > near_cut[:, None]) | keep_match
            rows, kept = keep.nonzero(as_tuple=True)  # row-major: grouped by row, entries ascending
            kept_lo, kept_same = lo[rows, kept], same[rows, kept]
            kept_keys = index.keys.index_select(0, kept)  # measured exactly on the host, as its own keys
            counts = torch.bincount(rows, minlength=b - a)
            row_starts = np.zeros(b - a + 1, dtype=np.int64)
            np.cumsum(counts.cpu().numpy(), out=row_starts[1:])
            measure_kept_rows(
                q[a:b], kept_keys.cpu().numpy(), row_starts, kept.cpu().numpy(), kept_lo.cpu().numpy(),
                kept_same.cpu().numpy(), near_cut.cpu().numpy(), match_cut.cpu().numpy(), n_match, d_out[a:b],
                i_out[a:b],
            )

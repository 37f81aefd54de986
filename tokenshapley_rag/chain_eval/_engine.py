"""Where questions run: in this process, or in a pool of Ray actors that each hold one model.

Both engines call the same :func:`~tokenshapley_rag.chain_eval.evaluate_question` on the same
records and hand every finished row to the same sink (the rows file), so their rows are
identical apart from the timing fields.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tokenshapley_rag._defaults import DEFAULT_LAYER
from tokenshapley_rag.chain_eval._chains import build_chain
from tokenshapley_rag.chain_eval._records import QuestionRecord
from tokenshapley_rag.chain_eval._rows import QuestionRow, evaluate_question

__all__ = ["AttributorConfig", "run_local", "run_ray"]


@dataclass(frozen=True, slots=True)
class AttributorConfig:
    """Picklable recipe for a :class:`~tokenshapley_rag.TokenShapley`: what a Ray actor
    needs to load its own copy of the model (a loaded model is not shipped).

    Parameters
    ----------
    model : str or None, default=None
        As ``TokenShapley(model=...)``: None for the embedded SmolLM2-135M-Instruct, an
        alias, a local path or a cached hub name (it must resolve on every node).
    layer, k, m : int
        As in ``TokenShapley``.
    cache_dir : str or None, default=None
        Model and datastore cache. Actors on one machine share the sentence-key cache on
        disk (writes are atomic); on a cluster, a shared filesystem path shares it across
        nodes, otherwise each node keeps its own.
    device : str, default="cpu"
    options : dict, default={}
        Any other ``TokenShapley`` keyword (``gamma``, ``match``, ``candidates``,
        ``context_weight``, ``support_threshold``, ...).

    Examples
    --------
    >>> AttributorConfig(layer=8, options={"support_threshold": 0.1}).to_dict()["options"]
    {'support_threshold': 0.1}
    """

    model: str | None = None
    layer: int = DEFAULT_LAYER
    k: int = 1
    m: int = 10
    cache_dir: str | None = None
    device: str = "cpu"
    options: Mapping[str, Any] = field(default_factory=dict)

    def build(self) -> Any:
        """Load the model: ``TokenShapley(model, layer=, k=, m=, cache_dir=, device=, **options)``."""
        from tokenshapley_rag._attribution import TokenShapley

        return TokenShapley(
            self.model, layer=self.layer, k=self.k, m=self.m, cache_dir=self.cache_dir, device=self.device,
            **dict(self.options),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model, "layer": self.layer, "k": self.k, "m": self.m, "cache_dir": self.cache_dir,
            "device": self.device, "options": dict(self.options),
        }


def run_local(
    records: Sequence[QuestionRecord],
    chain: Any,
    attributor: Any,
    sink: Callable[[QuestionRow], None],
    *,
    input_key: str | None = None,
    progress: bool = False,
) -> list[QuestionRow]:
    """Evaluate ``records`` one after another in this process; ``sink`` gets each row as it finishes."""
    items: Iterable[QuestionRecord] = records
    if progress:
        from tqdm.auto import tqdm

        items = tqdm(records, desc="questions", unit="q")
    rows = []
    for rec in items:
        row = evaluate_question(rec, chain, attributor, input_key=input_key)
        sink(row)
        rows.append(row)
    return rows


class _RayWorker:
    """One Ray Data actor: loads its TokenShapley and builds its own chain once, then
    evaluates batches of JSON-encoded records (JSON keeps the nested rows out of Arrow's
    type inference, which would choke on mixed None/str/float fields)."""

    def __init__(self, config: AttributorConfig, chain_factory: Any, input_key: str | None) -> None:
        self._attributor = config.build()
        self._chain = build_chain(chain_factory) if chain_factory is not None else None
        self._input_key = input_key

    def __call__(self, batch: Mapping[str, Any]) -> dict[str, list[Any]]:
        rows = []
        for payload in batch["record"]:
            rec = QuestionRecord.from_dict(json.loads(str(payload)))
            row = evaluate_question(rec, self._chain, self._attributor, input_key=self._input_key)
            rows.append(json.dumps(row.to_dict(derived=False), ensure_ascii=False))
        return {"index": list(batch["index"]), "row": rows}


def run_ray(
    records: Sequence[QuestionRecord],
    chain_factory: str | Callable[[], Any] | None,
    config: AttributorConfig,
    sink: Callable[[QuestionRow], None],
    *,
    input_key: str | None = None,
    concurrency: int = 2,
    num_cpus_per_actor: float = 1.0,
    ray_address: str | None = None,
    ray_init_kwargs: Mapping[str, Any] | None = None,
    progress: bool = False,
) -> list[QuestionRow]:
    """Evaluate ``records`` with ``ray.data`` ``map_batches`` over an actor pool.

    Each of the ``concurrency`` actors loads one model from ``config`` and, when
    ``chain_factory`` is given, builds its own chain (chains are rarely picklable). One
    question is one batch, so rows stream back, and reach ``sink``, as they finish. Ray is
    started with ``ray.init(address=ray_address, **ray_init_kwargs)`` unless it is already
    running (then the running instance is used and left running).
    """
    import ray
    import ray.data

    started = False
    if not ray.is_initialized():
        ray.init(address=ray_address, **dict(ray_init_kwargs or {}))
        started = True
    ctx = ray.data.DataContext.get_current()
    old_bars = ctx.enable_progress_bars
    ctx.enable_progress_bars = progress
    try:
        items = [{"index": r.index, "record": json.dumps(r.to_dict(), ensure_ascii=False)} for r in records]
        if not items:
            return []
        ds = ray.data.from_items(items, override_num_blocks=len(items))
        ds = ds.map_batches(
            _RayWorker,
            fn_constructor_kwargs={"config": config, "chain_factory": chain_factory, "input_key": input_key},
            batch_size=1,
            compute=ray.data.ActorPoolStrategy(size=concurrency),
            num_cpus=num_cpus_per_actor,
        )
        rows = []
        for out in ds.iter_rows():
            row = QuestionRow.from_dict(json.loads(out["row"]))
            sink(row)
            rows.append(row)
        return rows
    finally:
        ctx.enable_progress_bars = old_bars
        if started:
            ray.shutdown()

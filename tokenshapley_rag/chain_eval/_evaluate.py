"""``evaluate_chain``: run a retrieval chain over a question set and attribute every answer."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from tokenshapley_rag.chain_eval._chains import build_chain, chain_kind, resolve_factory
from tokenshapley_rag.chain_eval._engine import AttributorConfig, run_local, run_ray
from tokenshapley_rag.chain_eval._records import load_questions
from tokenshapley_rag.chain_eval._report import ChainReport, summarize, summarize_timing
from tokenshapley_rag.chain_eval._rows import QuestionRow, RowsFile
from tokenshapley_rag.errors import InvalidInputError, InvalidInputTypeError

__all__ = ["evaluate_chain"]

_ENGINES = ("local", "ray")


def evaluate_chain(
    questions: str | os.PathLike[str] | Iterable[Any],
    chain: Any = None,
    *,
    attributor: Any = None,
    chain_factory: str | Callable[[], Any] | None = None,
    engine: str = "local",
    output: str | os.PathLike[str] | None = None,
    resume: bool = True,
    retry_errors: bool = False,
    input_key: str | None = None,
    limit: int | None = None,
    concurrency: int = 2,
    num_cpus_per_actor: float = 1.0,
    ray_address: str | None = None,
    ray_init_kwargs: Mapping[str, Any] | None = None,
    progress: bool = False,
) -> ChainReport:
    """Run a retrieval chain on every question, attribute each answer, and report.

    For each question the chain answers (or the record's pre-computed answer is taken),
    :class:`~tokenshapley_rag.TokenShapley` attributes every keyword of the answer to the
    retrieved sources, and the report measures how many keywords the sources support,
    which keywords are unsupported, how often the source at each retrieval rank is cited
    (retrieved but never cited = retrieval noise), how concentrated citations are, and the
    time per question.

    Parameters
    ----------
    questions : path or iterable
        JSONL file or iterable of mappings: ``question``, optional ``id``, ``reference``,
        and for pre-computed records ``sources`` (list of str or ``{id, text, metadata}``,
        best first) and ``answer``. See :func:`load_questions`.
    chain : object, default=None
        A LlamaIndex query engine (``.query(str)`` -> ``Response``) or a LangChain runnable
        (``.invoke(dict)`` -> ``{"answer", "context"}``), duck-typed (see
        :func:`run_chain`). With a chain, records' pre-computed ``sources``/``answer`` are
        ignored. ``engine="local"`` only.
    attributor : TokenShapley, AttributorConfig or None, default=None
        The model that attributes. ``engine="local"`` takes a loaded ``TokenShapley`` (or a
        config, loaded here); ``engine="ray"`` needs an :class:`AttributorConfig` (each actor
        loads its own copy). None means ``AttributorConfig()``, the default model.
    chain_factory : "module:function" or zero-argument callable, default=None
        Builds the chain; with Ray it is called once inside each actor. The callable is
        pickled (cloudpickle); a ``module:function`` spec must be importable on every node.
    engine : {"local", "ray"}, default="local"
    output : path or None, default=None
        Rows file (JSONL): each finished question's row is appended and flushed, so a
        killed run loses at most the questions in flight.
    resume : bool, default=True
        Reuse the rows already in ``output`` (matched by question id; a truncated last
        line is dropped and redone). False starts ``output`` over.
    retry_errors : bool, default=False
        On resume, run the questions of earlier error rows again (their rows are replaced).
    input_key : str or None, default=None
        LangChain input key; None sends ``{"input": q, "question": q}``.
    limit : int or None, default=None
        Evaluate only the first ``limit`` questions.
    concurrency : int, default=2
        Ray: number of actors (one model each).
    num_cpus_per_actor : float, default=1.0
        Ray: CPUs reserved per actor (Ray sets the actor's torch/OMP threads to this).
    ray_address : str or None, default=None
        Ray: ``ray.init(address=...)``, e.g. ``"auto"`` or ``"ray://head:10001"``; None
        starts a local Ray. Ignored when Ray is already initialized in this process.
    ray_init_kwargs : mapping or None, default=None
        Ray: more ``ray.init`` arguments (``num_cpus``, ``runtime_env``, ...).
    progress : bool, default=False
        Progress bar (tqdm locally, Ray Data's bars with Ray).

    Returns
    -------
    ChainReport
        Rows in question order, the summary, timing and the run's config.
        ``report.write(out_dir)`` writes JSON, markdown, HTML and PNG plots.

    Raises
    ------
    QuestionFileError
        A malformed question line (the message names the line), or a corrupt line in the
        middle of ``output``.
    InvalidInputError
        A question without chain and without pre-computed answer and sources, an unknown
        engine, both ``chain`` and ``chain_factory``, or ``output`` written for another
        question set.
    InvalidInputTypeError
        A chain of an unknown kind, or ``engine="ray"`` with a loaded model or chain object.

    Examples
    --------
    >>> from tokenshapley_rag import TokenShapley
    >>> report = evaluate_chain(
    ...     [{"id": "q1", "question": "When was Big Ben completed?",
    ...       "sources": ["Big Ben is in London. The tower was completed in 1859.",
    ...                   "The Eiffel Tower is in Paris."],
    ...       "answer": "Big Ben was completed in 1923."}],
    ...     attributor=TokenShapley())  # doctest: +SKIP
    >>> report.rows[0].unsupported, report.summary.noise_share  # doctest: +SKIP
    (('1923',), 0.5)
    >>> report.write("chain-report")  # doctest: +SKIP
    """
    t0 = time.perf_counter()
    if engine not in _ENGINES:
        raise InvalidInputError(f"engine must be one of {_ENGINES}, got {engine!r}")
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise InvalidInputError(f"concurrency must be an integer >= 1, got {concurrency!r}")
    if chain is not None and chain_factory is not None:
        raise InvalidInputError("give either chain or chain_factory, not both")
    records = load_questions(questions, limit=limit)
    if chain is not None:
        kind = chain_kind(chain)
        if engine == "ray":
            raise InvalidInputTypeError(
                "engine='ray' rebuilds the chain inside each actor: pass chain_factory= (a zero-argument "
                "callable or 'module:function') instead of a chain object"
            )
    elif chain_factory is not None:
        resolve_factory(chain_factory)  # fail here, not in every actor, on a bad spec
        kind = f"factory {chain_factory}" if isinstance(chain_factory, str) else f"factory {getattr(chain_factory, '__qualname__', '?')}"
    else:
        kind = "precomputed"
        for rec in records:
            if not rec.precomputed:
                where = f"line {rec.line}" if rec.line is not None else f"record {rec.index}"
                raise InvalidInputError(
                    f"{where} (id {rec.id!r}) has no 'sources' and 'answer', and no chain or chain_factory was given"
                )
    if engine == "ray":
        if attributor is None:
            attributor = AttributorConfig()
        if not isinstance(attributor, AttributorConfig):
            raise InvalidInputTypeError(
                "engine='ray' loads one model per actor from an AttributorConfig; got "
                f"{type(attributor).__name__} (a loaded model is not shipped to the actors)"
            )
    elif attributor is not None and not isinstance(attributor, AttributorConfig) and not callable(
        getattr(attributor, "attribute", None)
    ):
        raise InvalidInputTypeError(
            f"attributor must be a TokenShapley, an AttributorConfig or None, got {type(attributor).__name__}"
        )

    rows_file = RowsFile(output) if output is not None else None
    done: dict[str, QuestionRow] = {}
    if rows_file is not None:
        if resume:
            done = rows_file.load(records, retry_errors=retry_errors)
        else:
            rows_file.reset()
    todo = [r for r in records if r.id not in done]
    sink = rows_file.append if rows_file is not None else (lambda row: None)

    if isinstance(attributor, AttributorConfig):
        attributor_config: dict[str, Any] = attributor.to_dict()
    elif attributor is not None:
        attributor_config = dict(getattr(attributor, "config", {}) or {})
    else:
        attributor_config = AttributorConfig().to_dict()
    try:
        if not todo:
            new: list[QuestionRow] = []
        elif engine == "local":
            if attributor is None:
                attributor = AttributorConfig()
            if isinstance(attributor, AttributorConfig):
                attributor = attributor.build()
            attributor_config = dict(getattr(attributor, "config", {}) or attributor_config)
            the_chain = chain if chain is not None else (build_chain(chain_factory) if chain_factory is not None else None)
            new = run_local(todo, the_chain, attributor, sink, input_key=input_key, progress=progress)
        else:
            new = run_ray(
                todo, chain_factory, attributor, sink, input_key=input_key, concurrency=concurrency,
                num_cpus_per_actor=num_cpus_per_actor, ray_address=ray_address, ray_init_kwargs=ray_init_kwargs,
                progress=progress,
            )
    finally:
        if rows_file is not None:
            rows_file.close()

    rows = tuple(sorted([*done.values(), *new], key=lambda r: r.index))
    config = {
        "engine": engine,
        "chain": kind,
        "attributor": attributor_config,
        "n_questions": len(records),
        "n_run": len(new),
        "n_resumed": len(done),
        "output": str(output) if output is not None else None,
        "input_key": input_key,
    }
    if engine == "ray":
        config.update(concurrency=concurrency, num_cpus_per_actor=num_cpus_per_actor, ray_address=ray_address)
    return ChainReport(
        rows=rows,
        summary=summarize(rows),
        timing=summarize_timing(rows, n_resumed=len(done), wall_seconds=time.perf_counter() - t0),
        config=config,
    )

"""Check our ContextCite against the ``context-cite`` package on a few examples.

    TOKENSHAPLEY_DATA=../shared/data .venv/bin/python benchmarks/check_contextcite.py [--n 3] [--beta 16] [--dataset nq]

For each example the package's ``ContextCiter`` is built on the same model (the embedded
SmolLM2-135M-Instruct), the same context string, query and (cached) response; our
:class:`~tokenshapley_rag.benchmark._model_baselines.ContextCiteAttributor` is then run on the *same*
units (the package's sentence partition) and the *same* prompt (the package's template), so
any difference comes from the ablation masks, the logit-probability target or the Lasso
solver. Printed per example: whether the masks are identical, the largest absolute weight
difference, the Spearman correlation of the weights and whether the top-1 / top-3 sentences
agree. Results are recorded in docs/evaluation.md.

The package needs two offline fixes, applied here only (never in library code): it calls
``nltk.download("punkt")`` at import (replaced by a no-op, and ``nltk.sent_tokenize`` by an
untrained ``PunktSentenceTokenizer``), and newer pandas removed ``Styler.applymap``
(aliased to ``Styler.map``). It also imports ``pandas`` and ``datasets``. When the package
cannot be imported the script says what is missing and exits with status 3.
"""

from __future__ import annotations

import argparse
import sys


def _import_context_cite():
    import nltk

    nltk.download = lambda *a, **k: True  # offline: never fetch punkt
    from nltk.tokenize.punkt import PunktSentenceTokenizer

    untrained = PunktSentenceTokenizer()
    nltk.sent_tokenize = lambda text, language="english": untrained.tokenize(text)
    try:
        from pandas.io.formats.style import Styler

        if not hasattr(Styler, "applymap"):
            Styler.applymap = Styler.map  # type: ignore[attr-defined]
    except ImportError:
        pass
    import context_cite.utils as ccu  # noqa: F401  (after the patches)
    from context_cite import ContextCiter

    ccu.nltk.sent_tokenize = nltk.sent_tokenize
    return ContextCiter


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=3)
    ap.add_argument("--beta", type=int, default=16)
    ap.add_argument("--dataset", choices=["nq", "quotesum"], default="quotesum")
    args = ap.parse_args(argv)
    try:
        ContextCiter = _import_context_cite()
    except ImportError as err:
        print(
            f"context-cite cannot be imported ({err}); install it with "
            "`pip install context-cite==0.0.4 pandas datasets` to run this check.",
            file=sys.stderr,
        )
        return 3

    import numpy as np
    from scipy.stats import spearmanr

    from tokenshapley_rag.benchmark._model_baselines import ContextCiteAttributor, contextcite_masks
    from tokenshapley_rag._models import load_causal_lm
    from tokenshapley_rag._types import Source
    from tokenshapley_rag.benchmark import load_dataset
    from tokenshapley_rag.benchmark._lm import PromptTokens, ResponseLM
    from tokenshapley_rag.benchmark._sentences import SentenceUnit

    loaded = load_causal_lm()

    class PackagePromptLM(ResponseLM):
        """Our ResponseLM with the package's prompt: "Context: {context}\\n\\nQuery: {query}"."""

        def prompt(self, query, sources):
            tok = self.loaded.tokenizer
            content = f"Context: {sources[0].text}\n\nQuery: {query}"
            text = tok.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True, tokenize=False)
            enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
            return PromptTokens(text, np.asarray(enc["input_ids"]), np.asarray(enc["offset_mapping"]),
                                (text.find(sources[0].text),))

    lm = PackagePromptLM(loaded)
    ours = ContextCiteAttributor(lm, beta=args.beta)
    rows = []
    for ex in load_dataset(args.dataset, limit=args.n):
        context = "\n\n".join(s.text for s in ex.sources)
        query = ex.question
        response = ex.answer
        cc = ContextCiter(loaded.model, loaded.tokenizer, context, query, num_ablations=args.beta)
        prompt_ids, prompt = cc._get_prompt_ids(return_prompt=True)
        cc._cache["output"] = prompt + response  # the response is given, not generated
        theirs = np.asarray(cc.get_attributions(verbose=False), dtype=np.float64)
        parts = cc.partitioner.parts
        units, cursor = [], 0
        for p in parts:
            at = context.find(p, cursor)
            units.append(SentenceUnit("ctx", 0, at, at + len(p), p))
            cursor = at + len(p)
        src = (Source("ctx", context),)
        mine = ours.score_sentences(query, src, response, units).scores
        same_masks = bool(np.array_equal(cc._masks, contextcite_masks(args.beta, len(parts))))
        rho = float(spearmanr(mine, theirs).statistic) if np.std(mine) > 0 and np.std(theirs) > 0 else float("nan")
        top1 = int(np.argmax(mine)) == int(np.argmax(theirs))
        top3 = set(np.argsort(-mine)[:3]) == set(np.argsort(-theirs)[:3])
        rows.append((ex.id, len(parts), same_masks, float(np.max(np.abs(mine - theirs))), rho, top1, top3))
        print(f"{ex.id}: units={len(parts)} masks_equal={same_masks} max|dw|={rows[-1][3]:.2e} "
              f"spearman={rho:.4f} top1={top1} top3={top3}", flush=True)
    print(f"agreement on {len(rows)} examples: masks {sum(r[2] for r in rows)}/{len(rows)}, "
          f"top-1 {sum(r[5] for r in rows)}/{len(rows)}, top-3 {sum(r[6] for r in rows)}/{len(rows)}, "
          f"max |weight difference| {max(r[3] for r in rows):.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The support flag on hand-written answers over sources that disagree on purpose.

For every case of ``benchmarks/support_probe_cases.py``: the correct answer must have no
keyword flagged (a *false flag* otherwise); each changed answer must have its changed keyword
flagged, ``unsupported`` or ``contradicted`` (a *miss* when every citation overlapping it is
``supported``); each rewrite of the correct answer must stay supported. Prints every failure and
a JSON line of counts. These are the cases the rule's last fixes were found on: a dev set, not
a held-out one (docs/reports/support.md).

    python benchmarks/support_probe.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from support_probe_cases import CASES  # noqa: E402

from tokenshapley_rag import TokenShapley  # noqa: E402


def _changed_span(response: str, keyword: str | tuple[str, int]) -> tuple[int, int]:
    text, nth = keyword if isinstance(keyword, tuple) else (keyword, 0)
    start = -1
    for _ in range(nth + 1):
        start = response.find(text, start + 1)
    if start < 0:
        raise ValueError(f"{text!r} is not in {response!r}")
    return start, start + len(text)


def main() -> int:
    ts = TokenShapley()
    counts = dict(correct=0, false_flag=0, changed=0, miss=0, rewrites=0, rewrite_flagged=0)
    for name, query, sources, correct, changed in CASES:
        runs = [(correct, None, "correct")] + [(text, kw, "changed" if kw else "rewrite") for text, kw in changed]
        for response, keyword, kind in runs:
            res = ts.attribute(query=query, sources=sources, response=response)
            if kind != "changed":
                counts["correct" if kind == "correct" else "rewrites"] += 1
                flagged = [(c.text, c.status) for c in res.citations if c.status != "supported"]
                if flagged:
                    counts["false_flag" if kind == "correct" else "rewrite_flagged"] += 1
                    print(f"{name}: {kind} answer flagged {flagged}: {response!r}")
                continue
            counts["changed"] += 1
            start, end = _changed_span(response, keyword)
            over = [c for c in res.citations if c.start < end and c.end > start]
            if all(c.status == "supported" for c in over):
                counts["miss"] += 1
                cited = [(c.text, c.best.source_id if c.best else None) for c in over]
                print(f"{name}: changed keyword supported {cited}: {response!r}")
    print(json.dumps(counts))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Citation latency of the chat app while the default local model generates (issue 11).

Serves ``tokenshapley_rag.chat`` with the default ``TokenShapley()`` and its
``LocalModelGenerator`` (SmolLM2-135M-Instruct, greedy) on a localhost uvicorn server,
asks questions over ``tests/data/chat_docs`` one at a time, and timestamps every
server-sent event as the client receives it. Per answer sentence:

* ``gen``: the sentence's own generation time at the client: from the arrival of the
  previous sentence's last token (for the first sentence, of the first token) to the
  arrival of this sentence's last token;
* ``delay``: from the arrival of the sentence's last token to the arrival of its
  ``citations`` event, split into ``wait`` (until the next non-space text arrives: a
  sentence is complete only once text follows it, or the answer ends) and ``cite`` (the
  rest: attribution + transport);
* goal: citations arrive before the next sentence is half generated, i.e. ``delay <=
  gen(next) / 2``. The last sentence has no next one; its citations come with ``finish``
  at the end of the stream and are reported on their own.

Run: ``python benchmarks/streaming_bench.py [--repeat 1] [--max-new-tokens 120] [--out docs/reports/streaming.md]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import torch
import uvicorn

from tokenshapley_rag import TokenShapley
from tokenshapley_rag.chat import ChatConfig, LocalModelGenerator, create_app, load_documents

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = [
    "When was the Eiffel Tower completed and how tall is it?",
    "Tell me about Big Ben and the Elizabeth Tower.",
    "Who designed the Statue of Liberty and when was it dedicated?",
    "Who made the first ascent of Mount Everest, and how high is it?",
    "How long is the Nile and where do its tributaries meet?",
    "What happened during the Apollo 11 mission?",
    "How long is the Great Wall of China and when did it become a World Heritage Site?",
    "When did the Titanic sink and how many people died?",
]


@dataclass
class Sentence:
    question: int
    index: int
    text: str
    t_last: float  # arrival of the delta holding the sentence's last character
    t_next: float | None  # arrival of the first later non-space text (None: the answer ended)
    t_cite: float  # arrival of its citations event
    gen: float
    is_last: bool
    n_citations: int
    n_supported: int
    next_gen: float | None = None

    @property
    def delay(self) -> float:
        return self.t_cite - self.t_last

    @property
    def wait(self) -> float | None:
        """Until the next text arrived; None for the last sentence (its end is the end of
        generation, which the client cannot see before the citations)."""
        return None if self.t_next is None else self.t_next - self.t_last

    @property
    def met(self) -> bool | None:
        return None if self.next_gen is None else self.delay <= self.next_gen / 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ask(client: httpx.Client, question: str) -> list[tuple[float, str, dict]]:
    """[(arrival time, event, data)] of one chat, timed as each event is parsed."""
    out = []
    with client.stream("POST", "/chat", json={"question": question}) as r:
        r.raise_for_status()
        event, data = "message", []
        for line in r.iter_lines():
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
            elif not line and data:
                out.append((time.perf_counter(), event, json.loads("\n".join(data))))
                event, data = "message", []
    return out


def sentences_of(qi: int, events: list[tuple[float, str, dict]]) -> tuple[list[Sentence], str]:
    deltas = [(t, d["offset"], d["text"]) for t, e, d in events if e == "delta"]
    answer = "".join(x for _, _, x in deltas)

    def arrival(pos: int) -> float:  # arrival of the delta holding character `pos`
        return next(t for t, off, x in deltas if off <= pos < off + len(x))

    def next_text(pos: int) -> float | None:  # first non-space character at or after `pos`
        for t, off, x in deltas:
            if off + len(x) <= pos:
                continue
            if x[max(0, pos - off) :].strip():
                return t
        return None

    cites = [(t, d) for t, e, d in events if e == "citations"]
    out: list[Sentence] = []
    prev = deltas[0][0] if deltas else 0.0
    for i, (t, d) in enumerate(cites):
        t_last = arrival(d["end"] - 1)
        out.append(
            Sentence(
                question=qi,
                index=d["index"],
                text=d["text"],
                t_last=t_last,
                t_next=next_text(d["end"]),
                t_cite=t,
                gen=t_last - prev,
                is_last=i == len(cites) - 1,
                n_citations=len(d["citations"]),
                n_supported=sum(c["supported"] for c in d["citations"]),
            )
        )
        prev = t_last
    for a, b in zip(out, out[1:]):
        a.next_gen = b.gen
    return out, answer


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", default=str(ROOT / "tests" / "data" / "chat_docs"))
    ap.add_argument("--repeat", type=int, default=1, help="ask every question this many times")
    ap.add_argument("--max-new-tokens", type=int, default=120)
    ap.add_argument("--concurrency", type=int, default=1, help="chats running at once (each question once per chat)")
    ap.add_argument("--out", default=None, help="write the report (markdown) here, e.g. docs/reports/streaming.md")
    args = ap.parse_args()

    t0 = time.perf_counter()
    ts = TokenShapley()
    load_s = time.perf_counter() - t0
    chunks = load_documents(args.docs)
    app = create_app(ts, chunks, generator=LocalModelGenerator(ts.loaded, max_new_tokens=args.max_new_tokens), config=ChatConfig())
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    app.state.ready.wait(120)  # sentence keys of every chunk encoded before timing starts

    rows: list[Sentence] = []
    answers: list[tuple[str, str, float]] = []
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=300) as client:
        ask(client, "Warm-up: how tall is the Eiffel Tower?")  # numba compilation, first forward passes
        jobs = [(qi, q) for _ in range(args.repeat) for qi, q in enumerate(QUESTIONS)]
        if args.concurrency > 1:
            # Each worker asks its share of the questions in turn: `concurrency` chats at once.
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(args.concurrency) as pool:
                results = list(pool.map(lambda job: (job[0], job[1], ask(client, job[1])), jobs))
        else:
            results = [(qi, q, ask(client, q)) for qi, q in jobs]
        for qi, q, events in results:
            done = events[-1][2]
            if done.get("error") or not done.get("citations_available"):
                print(f"  question {qi}: {done.get('error') or 'citations unavailable'}", file=sys.stderr)
            sents, answer = sentences_of(qi, events)
            rows.extend(sents)
            start = next(t for t, e, _ in events if e == "delta") if any(e == "delta" for _, e, _ in events) else events[0][0]
            answers.append((q, answer, events[-1][0] - start))
            print(f"  q{qi}: {len(sents)} sentences, {len(answer)} chars", file=sys.stderr, flush=True)
    server.should_exit = True
    thread.join(10)

    def f(x: float | None) -> str:
        return "—" if x is None else f"{x * 1000:.0f}"

    table = [
        "| q | sentence | chars | gen (ms) | wait for next text (ms) | cite (ms) | delay (ms) | next gen / 2 (ms) | goal |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in rows:
        goal = "last" if s.met is None else ("met" if s.met else "**missed**")
        table.append(
            f"| {s.question} | {s.index} | {len(s.text)} | {f(s.gen)} | {f(s.wait)} | {f(s.delay - (s.wait or 0.0))} | {f(s.delay)} | "
            f"{f(s.next_gen / 2 if s.next_gen is not None else None)} | {goal} |"
        )
    mid = [s for s in rows if s.met is not None]
    last = [s for s in rows if s.met is None]
    summary = [
        f"* sentences: {len(rows)} in {len(answers)} answers; {len(mid)} have a next sentence.",
    ]
    if mid:
        summary += [
            f"* not-last sentences: delay median {f(statistics.median([s.delay for s in mid]))} ms, "
            f"p90 {f(pct([s.delay for s in mid], 0.9))} ms, max {f(max(s.delay for s in mid))} ms "
            f"(of which waiting for the next text: median {f(statistics.median([s.wait or 0.0 for s in mid]))} ms); "
            f"own generation time median {f(statistics.median([s.gen for s in mid]))} ms.",
            f"* goal (citations before the next sentence is half generated): met for "
            f"{sum(bool(s.met) for s in mid)} of {len(mid)}.",
        ]
    if last:
        summary.append(
            f"* last sentences (cited by finish() when the stream ends): delay median "
            f"{f(statistics.median([s.delay for s in last]))} ms, max {f(max(s.delay for s in last))} ms."
        )
    machine = (
        f"{platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__} ({torch.get_num_threads()} threads), "
        f"load average at the end {os.getloadavg()[0]:.1f}"
    )
    report = "\n".join(
        [
            f"Machine: {machine}. Encoder + generator: {ts.loaded.name} (loaded in {load_s:.1f} s), "
            f"greedy, max_new_tokens={args.max_new_tokens}, top_k=3 chunks; {len(QUESTIONS)} questions x {args.repeat}, "
            f"{args.concurrency} chat(s) at a time.",
            "",
            *summary,
            "",
            *table,
            "",
            "Answers:",
            "",
            *[f"{i}. *{q}* → {a!r} ({dur:.1f} s)" for i, (q, a, dur) in enumerate(answers[: len(QUESTIONS)])],
        ]
    )
    print(report)
    if args.out:
        Path(args.out).write_text(report + "\n", encoding="utf-8")
        print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

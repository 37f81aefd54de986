"""Shared fixtures: one default TokenShapley per session, offline hub, isolated caches."""

import os
import re
import threading
import time
import zlib
from pathlib import Path

import pytest
from hypothesis import settings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# Property tests draw the same examples on every run (a failure in CI is then reproducible
# locally, and a green suite stays green); no example database is written into the repo.
settings.register_profile("deterministic", derandomize=True, database=None)
settings.load_profile("deterministic")

# Converting the packaged GGUF takes ~20-30 s, so converted models persist between runs in
# the repo's git-ignored .cache/ (CI's fresh clone converts once per run). Datastores
# (sentence keys) always go to a fresh temporary folder so cache tests start cold.
MODELS_DIR = Path(__file__).resolve().parents[1] / ".cache" / "models"


def make_cache_dir(tmp_path: Path) -> Path:
    """A cache root whose models/ points at the shared converted models."""
    MODELS_DIR.mkdir(parents=True, exist_ok=True)
    root = tmp_path / "ts-cache"
    root.mkdir(parents=True, exist_ok=True)
    link = root / "models"
    if not link.exists():
        link.symlink_to(MODELS_DIR, target_is_directory=True)
    return root


# Evaluation sets. Tests that only need some valid examples read the small fixtures committed
# in tests/data/sets/<name>/dev.jsonl (a few verbatim lines of each real dev file; which ones
# and why in its README.md). Tests that check figures or ids of the real files take the
# ``shared_data`` fixture: the full sets' folder, or a skip that says so when it is absent. The
# package itself has no default folder (``--data`` or TOKENSHAPLEY_DATA); the tests, which live
# in the repository, also look at ../shared/data next to it, where CI keeps the sets.
FIXTURE_SETS = Path(__file__).resolve().parent / "data" / "sets"
REPO_SHARED_DATA = Path(os.path.normpath(Path(__file__).resolve().parents[1] / ".." / "shared" / "data"))


def find_shared_data() -> tuple[Path | None, str]:
    """The full sets' folder (TOKENSHAPLEY_DATA, else ../shared/data next to the repository) if
    every set's dev.jsonl is there, else (None, why not)."""
    from tokenshapley_rag.benchmark import DATA_ENV_VAR, DATASETS

    d = Path(os.path.abspath(os.path.expanduser(os.environ[DATA_ENV_VAR]))) if os.environ.get(DATA_ENV_VAR) else REPO_SHARED_DATA
    missing = [n for n in DATASETS if not (d / n / "dev.jsonl").is_file()]
    if not missing:
        return d, ""
    what = f"{d} does not exist" if not d.is_dir() else f"{d} lacks {', '.join(missing)}"
    return None, (
        f"needs the full evaluation sets: {what} (set TOKENSHAPLEY_DATA to the folder, "
        "or put it at ../shared/data next to the repository)"
    )


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The full evaluation sets' folder; skips the test when it is absent."""
    d, why = find_shared_data()
    if d is None:
        pytest.skip(why)
    return d


@pytest.fixture(scope="session")
def fixture_data() -> Path:
    """The committed fixture sets (a few real examples per set, same schema)."""
    return FIXTURE_SETS


@pytest.fixture(scope="session", params=["fixtures", "shared"])
def sets_dir(request) -> Path:
    """Property checks run on the fixtures everywhere, and on the full sets when present."""
    if request.param == "fixtures":
        return FIXTURE_SETS
    return request.getfixturevalue("shared_data")


@pytest.fixture
def default_sets(monkeypatch) -> Path:
    """Point ``load_dataset``'s default folder (TOKENSHAPLEY_DATA) at the full sets when present,
    else at the fixtures (for doctests that load with the default folder; the fixtures start
    with the same lines as the real files where those doctests read)."""
    d, _ = find_shared_data()
    if d is None:
        d = FIXTURE_SETS
    monkeypatch.setenv("TOKENSHAPLEY_DATA", str(d))
    return d


@pytest.fixture
def cache_root(tmp_path):
    """A fresh cache folder (empty datastore) that reuses the converted models."""
    return make_cache_dir(tmp_path)


@pytest.fixture(scope="session")
def ts(tmp_path_factory):
    """The default TokenShapley, loaded once per test session."""
    from tokenshapley_rag import TokenShapley

    return TokenShapley(cache_dir=make_cache_dir(tmp_path_factory.mktemp("session")))


@pytest.fixture(scope="session")
def attribute_once(ts):
    """``ts.attribute`` of ``(sources, question, answer)``, each attributed once per session:
    parametrized rows that look at one answer's keywords in turn share its result."""
    memo = {}

    def run(sources, question, answer):
        key = (id(sources), question, answer)
        if key not in memo:
            memo[key] = ts.attribute(query=question, sources=sources, response=answer)
        return memo[key]

    return run


COMPETING_FACTS = Path(__file__).resolve().parent / "data" / "competing_facts"


@pytest.fixture(scope="session")
def competing_facts_corpus() -> tuple[list[str], list[int], list[tuple[str, str]]]:
    """The competing-facts pages' sentences (``tests/data/competing_facts``), the page of
    each (a document, numbered from 0 in file-name order), and their keywords, each also
    retyped as a name, a number and a date so that every branch of the match rule is met
    (sorted, once each): real sentences for checking a shortcut against the plain rule."""
    from tokenshapley_rag._segment import find_keywords, split_sentences

    sentences, documents, keywords = [], [], []
    for d, page in enumerate(sorted(COMPETING_FACTS.glob("*.txt"))):
        text = page.read_text(encoding="utf-8")
        for a, b in split_sentences(text):
            sentences.append(text[a:b])
            documents.append(d)
            keywords += [(k.text, k.kind) for k in find_keywords(text[a:b])]
    keywords += [(t, kind) for t, _ in list(keywords) for kind in ("name", "number", "date")]
    return sentences, documents, sorted(set(keywords))


@pytest.fixture(scope="session")
def keyword_status_of(attribute_once):
    """Attribute ``answer`` over ``sources`` (once per session), check one keyword's status
    and where it points: a supported keyword cites ``source`` first and has no conflict, a
    contradicted one conflicts with ``source`` and cites nothing, an unsupported one neither."""

    def check(sources, question, answer, keyword, status, source):
        res = attribute_once(sources, question, answer)
        c = next(c for c in res.citations if c.text == keyword)
        assert c.status == status
        if status == "unsupported":
            assert c.best is None and c.conflict is None
        elif status == "supported":
            assert c.best is not None and c.best.source_id == source and c.conflict is None
        else:
            assert c.conflict is not None and c.conflict.source_id == source and c.best is None

    return check


class FakeLM:
    """A deterministic stand-in for ``tokenshapley_rag.benchmark._lm.ResponseLM`` (no model).

    Tokens are ``\\w+`` words and single punctuation marks. ``score_response`` gives each
    response token log-probability -0.1 if the (lowercased) token occurs among the
    sources' tokens and -3.0 otherwise; ``hidden_states`` are one-hot vectors of the
    lowercased token (4096 dims, hashed); ``generate`` returns the first sentence of the
    first source (or ``empty_for`` -> ""). Counts calls in ``generated`` / ``scored``.
    """

    name = "fake-lm"
    fingerprint = "f" * 64
    num_layers = 4
    max_length = 10**6

    def __init__(self, empty_for=()):
        from collections import Counter

        self.loaded = self
        self.generated = Counter()
        self.scored = 0
        self.empty_for = set(empty_for)

    @staticmethod
    def tokens(text):
        import re

        import numpy as np

        found = [(m.start(), m.end()) for m in re.finditer(r"\w+|[^\w\s]", text)]
        return np.asarray(found, dtype=np.int64).reshape(-1, 2)

    def generate(self, query, sources, *, max_new_tokens=64):
        from tokenshapley_rag._segment import split_sentences

        self.generated[(query, sources[0].id, sources[0].text[:20])] += 1
        if any(s.id in self.empty_for for s in sources) or query in self.empty_for:
            return ""
        a, b = split_sentences(sources[0].text)[0]
        return sources[0].text[a:b]

    def prompt(self, query, sources):
        import numpy as np

        from tokenshapley_rag.benchmark._lm import PromptTokens

        text = f"Q: {query}\n"
        starts = []
        for s in sources:
            text += f"Passage {s.id}: "
            starts.append(len(text))
            text += s.text + "\n"
        offs = self.tokens(text)
        return PromptTokens(text, np.arange(len(offs), dtype=np.int64), offs, tuple(starts))

    def _vocab(self, sources):
        return {s.text[a:b].lower() for s in sources for a, b in self.tokens(s.text)}

    def score_response(self, query, sources, response):
        import numpy as np

        from tokenshapley_rag.benchmark._lm import ResponseScores

        self.scored += 1
        vocab = self._vocab(sources)
        offs = self.tokens(response)
        lp = np.array([-0.1 if response[a:b].lower() in vocab else -3.0 for a, b in offs])
        return ResponseScores(lp, lp - np.log(-np.expm1(lp)), offs)

    @staticmethod
    def _onehot(words):
        import hashlib

        import numpy as np

        out = np.zeros((len(words), 4096))
        for i, w in enumerate(words):
            out[i, int(hashlib.sha256(w.lower().encode()).hexdigest(), 16) % 4096] = 1.0
        return out

    def hidden_states(self, query, sources, response, layer):
        prompt = self.prompt(query, sources)
        roffs = self.tokens(response)
        ph = self._onehot([prompt.text[a:b] for a, b in prompt.offsets])
        rh = self._onehot([response[a:b] for a, b in roffs])
        return prompt, ph, rh, roffs


@pytest.fixture
def fake_lm():
    return FakeLM()


@pytest.fixture
def fake_lm_cls():
    return FakeLM


class _LocalServer:
    """uvicorn serving an ASGI app on a free localhost port, in a daemon thread:
    ``with _LocalServer(app) as url`` (``url`` ends with "/")."""

    def __init__(self, app):
        import socket

        import uvicorn

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        return f"http://127.0.0.1:{self.port}/"

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture(scope="session")
def local_server():
    """The server class above (test modules cannot import conftest under
    --import-mode=importlib): ``with local_server(app) as url``. Needs uvicorn."""
    pytest.importorskip("uvicorn", reason="serving an app needs uvicorn (the chat extra)")
    return _LocalServer


class BagOfWords:
    """A deterministic stand-in for a sentence embedder: each lower-cased word hashed to one
    of 256 dimensions, counted. Its calls are recorded."""

    name = "bag-of-words"

    def __init__(self):
        self.calls: list[list[str]] = []

    def __call__(self, texts):
        import numpy as np

        self.calls.append(list(texts))
        rows = np.zeros((len(texts), 256))
        for i, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                rows[i, zlib.crc32(word.encode()) % 256] += 1.0
        return rows


@pytest.fixture(scope="session")
def bag_of_words():
    """:class:`BagOfWords`, the class (each instance records its own calls)."""
    return BagOfWords

"""Every docstring example of the package runs and prints what it shows.

The two harness doctests that read the evaluation sets run where the sets are (they need
``$TOKENSHAPLEY_DATA`` or the default folder), so they are left to the harness tests; the chat
app's examples start a server and are exercised by its own tests.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import tokenshapley_rag

NEEDS_DATA = {"tokenshapley_rag.benchmark._data", "tokenshapley_rag.benchmark._runner"}
MODULES = sorted(
    m.name
    for m in pkgutil.walk_packages(tokenshapley_rag.__path__, "tokenshapley_rag.")
    if m.name not in NEEDS_DATA and not m.name.startswith("tokenshapley_rag.chat")
)


@pytest.mark.parametrize("module", MODULES)
def test_docstring_examples_run(module: str) -> None:
    res = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert res.failed == 0, f"{res.failed} of {res.attempted} examples of {module} failed"

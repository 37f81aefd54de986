"""LangChain partner packages keep a ``test_compile`` that `make integration_tests` runs
with ``-m compile``: here it checks that every integration test module imports and
defines tests, so a broken import is caught without running the models."""

import importlib.util
from pathlib import Path

import pytest


@pytest.mark.compile
def test_integration_modules_import_and_define_tests() -> None:
    here = Path(__file__).parent
    modules = sorted(p for p in here.glob("test_*.py") if p.name != Path(__file__).name)
    assert modules, "no integration test modules found"
    for path in modules:
        spec = importlib.util.spec_from_file_location(f"_compile_check_{path.stem}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        assert any(name.startswith("test_") for name in vars(module)), f"{path.name} defines no tests"

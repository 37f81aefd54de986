from langchain_tokenshapley import __all__

EXPECTED_ALL = [
    "ChatTokenShapley",
    "TokenShapleyCallbackHandler",
    "TokenShapleyCitations",
    "TokenShapleySentenceSources",
]


def test_all_imports() -> None:
    assert sorted(EXPECTED_ALL) == sorted(__all__)

"""The runnable examples in the documentation run as written."""

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _python_blocks(name: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", (DOCS / name).read_text(), re.S)


@pytest.mark.parametrize("block", _python_blocks("scripting.md"))
def test_scripting_examples_run(block):
    """Each block runs in a fresh namespace; an error in the example fails the test."""
    exec(compile(block, "docs/scripting.md", "exec"), {})

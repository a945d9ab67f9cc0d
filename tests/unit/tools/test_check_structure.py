"""The structure check of `make lint` finds cycles (lazy imports too) and long modules."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

TOOL = Path(__file__).resolve().parents[3] / "tools" / "check_structure.py"


def load_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_structure", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["check_structure"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def tool() -> ModuleType:
    return load_tool()


def write_package(root: Path, name: str, modules: dict[str, str]) -> None:
    package = root / name
    package.mkdir()
    (package / "__init__.py").write_text("")
    for module, text in modules.items():
        (package / f"{module}.py").write_text(text)


def test_a_cycle_through_a_function_level_import_is_found_and_a_type_only_one_is_not(
    tool: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_package(tmp_path, "cyclic_pkg", {
        "a": "import cyclic_pkg.b\n",
        "b": "def later():\n    import cyclic_pkg.c\n",
        "c": "from cyclic_pkg import a\n",
        "d": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import cyclic_pkg.e\n",
        "e": "import cyclic_pkg.d\n",
        "f": "import cyclic_pkg.a\n",
    })  # fmt: skip
    monkeypatch.syspath_prepend(str(tmp_path))

    cycles = tool.import_cycles(["cyclic_pkg"])

    assert cycles == [frozenset({"cyclic_pkg.a", "cyclic_pkg.b", "cyclic_pkg.c"})]


def test_modules_over_the_limit_are_listed_with_their_length(
    tool: ModuleType, tmp_path: Path
) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "short.py").write_text("x = 1\n" * 600)
    (tmp_path / "pkg" / "long.py").write_text("x = 1\n" * 601)

    assert tool.long_modules(tmp_path, ["pkg"], 600) == {"pkg/long.py": 601}

"""pmpp's layers (pyproject.toml's [tool.importlinter]): no module imports from a layer above its
own, imports inside functions included, but for the few listed with why."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:          # Python < 3.11
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
LINT_IMPORTS = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")

pytestmark = pytest.mark.skipif(LINT_IMPORTS is None, reason="import-linter is not installed: pip install -e \".[test]\"")


def lint(config_file):
    return subprocess.run([LINT_IMPORTS, "--no-cache", str(config_file)], cwd=ROOT, capture_output=True, text=True)


def test_the_layers_point_one_way():
    done = lint(ROOT / "pyproject.toml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{len(CONFIG['contracts'])} kept, 0 broken" in done.stdout


def test_at_most_five_imports_run_back_up():
    assert sum(len(contract.get("ignore_imports", [])) for contract in CONFIG["contracts"]) <= 5


def test_an_import_from_a_higher_layer_breaks_the_contract(tmp_path):
    # the same package, with the leaves declared above the command line: every import of them breaks it
    config = tmp_path / ".importlinter"
    config.write_text("[importlinter]\nroot_package = pmpp\n\n[importlinter:contract:upside-down]\n"
                      "name = upside down\ntype = layers\ncontainers = pmpp\nlayers =\n    errors\n    cli\n")
    done = lint(config)
    assert done.returncode != 0 and "pmpp.cli is not allowed to import pmpp.errors" in done.stdout, done.stdout


def test_the_profiling_modules_keep_the_names_the_notebooks_import():
    import pmpp
    import pmpp.profiling.explain
    import pmpp.profiling.ncu
    from pmpp import explain, ncu   # as the chapter notebooks write it
    assert explain is pmpp.profiling.explain and ncu is pmpp.profiling.ncu
    with pytest.raises(AttributeError, match="no attribute 'tuning_of'"):
        pmpp.tuning_of

"""The ``pmpp`` command line."""
import shutil

import pytest

import pmpp
from pmpp import chapters
from pmpp.cli import main


def test_list_names_every_variant_of_every_chapter(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for name in chapters.names():
        chapter = chapters.get(name)
        assert chapter.title in out
        assert all(v.name in out for v in chapter.variants)


def test_unknown_chapter_is_a_clear_error(capsys):
    assert main(["run", "sorting"]) == 1
    assert "no chapter 'sorting'" in capsys.readouterr().err


@pytest.mark.skipif(pmpp.gpu_available(), reason="checks the no-GPU message")
def test_bench_without_a_gpu_says_to_use_run(capsys):
    assert main(["bench", "reduction", "--out", "unused.json"]) == 1
    assert "pmpp run" in capsys.readouterr().err


def test_run_checks_and_times_the_chosen_variants(capsys):
    assert main(["run", "reduction", "--backend", "cpu", "--n", "5000",
                 "--variants", "03", "14"]) == 0
    out = capsys.readouterr().out
    assert "CPU engine" in out and "Every variant matched the reference" in out
    assert "03_shared_memory" in out and "14_warp_shuffle" in out and "01_simple" not in out


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc (the CUDA toolkit) is not installed")
def test_every_kernel_compiles_for_every_gpu_from_t4_to_h100_without_spills(capsys):
    from pmpp.cli import kernel_targets
    from pmpp.compilecheck import NEEDS_NEWER, OK, arch_number, check_kernels
    from pmpp.targets import ARCHS
    assert main(["check-kernels"]) == 0
    out = capsys.readouterr().out
    for chapter in map(chapters.get, chapters.names()):
        assert all(f"{chapter.kernel_dir}/{v.name}.cu" in out for v in chapter.variants)
    rows = check_kernels(kernel_targets(chapters.names()), keep_going=True)   # the reports cached above
    assert {r["arch"] for r in rows} == set(ARCHS) == {"sm_75", "sm_80", "sm_86", "sm_89", "sm_90"}
    assert {r["status"] for r in rows} <= {OK, NEEDS_NEWER}
    assert all(r["spill_stores"] == 0 and r["spill_loads"] == 0 for r in rows if r["status"] == OK)
    needs = {(c.kernel_dir, v.name): v.min_arch for c in map(chapters.get, chapters.names())
             for v in c.variants if v.min_arch}
    assert needs[("scan", "12_bulk_copy_lookback")] == 90
    for (chapter_dir, name), min_arch in needs.items():
        mine = [r for r in rows if r["file"] == f"{chapter_dir}/{name}.cu"]
        compiled = {r["arch"] for r in mine if r["status"] == OK}
        assert compiled == {a for a in ARCHS if arch_number(a) >= min_arch}, name
        assert all(r["status"] == NEEDS_NEWER for r in mine if arch_number(r["arch"]) < min_arch)

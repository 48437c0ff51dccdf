"""The CPU engine's counters against Nsight Compute's recording (results/counters/), and the
recording's own plumbing (pmpp.ncu)."""
import functools
import hashlib
import json
import re
from pathlib import Path

import pytest

from pmpp import chapters, paths
from pmpp.profiling import ncu, validate
from pmpp.backends.cpu import toolchain
from pmpp.cli import main

from counter_cases import CASES, KERNEL_FILE

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def recording():
    found = ncu.recorded("cases")
    assert found is not None, "no Nsight Compute recording in results/counters/"
    return found


@pytest.fixture(scope="module")
def rows(recording):
    return _compared(json.dumps(recording, sort_keys=True))


@functools.lru_cache(maxsize=None)
def _compared(recording_text):
    """Every counter pair, counted once for the run: pytest-xdist may give the tests that need them
    to both workers, so the first to start counts (a minute) while the other waits for its file,
    which names everything the counts depend on."""
    key = hashlib.sha256(recording_text.encode())
    for path in sorted([*ROOT.glob("kernels/**/*"), *ROOT.glob("pmpp/backends/cpu/**/*"), ROOT / "pmpp/counters.py",
                        ROOT / "pmpp/validate.py", ROOT / "tests/counter_cases.py"]):
        if path.is_file():
            key.update(path.as_posix().encode() + path.read_bytes())
    key.update(repr(toolchain.cxx().identity).encode())
    saved = paths.cache_dir("validate") / f"rows-{key.hexdigest()[:32]}.json"
    with paths.building(saved.with_suffix("")):
        if not saved.exists():
            computed = validate.compare_all(json.loads(recording_text), CASES, KERNEL_FILE)
            saved.write_text(json.dumps(computed))
    return json.loads(saved.read_text())


def test_the_recording_covers_every_chapter_and_the_hand_counted_kernels(recording):
    assert set(recording["profiles"]) == {"cases", *chapters.names()}
    for name in chapters.names():
        chapter = chapters.get(name)
        profile = recording["profiles"][name]
        assert profile["problem"] == json.loads(json.dumps(chapter.problems["cpu"])) and profile["seed"] == ncu.SEED
        recorded = {v["variant"] for v in profile["variants"]} | set(profile["skipped"])
        counted = {v.name for v in chapter.variants if not v.gpu_only}    # what the engine counts
        assert counted <= recorded <= {v.name for v in chapter.variants}, name
    assert {c["case"] for c in recording["profiles"]["cases"]["cases"]} == {c["name"] for c in CASES}


@pytest.mark.slow
def test_engine_agrees_with_nsight_compute_on_nine_pairs_in_ten(rows):
    assert len(rows) > 500
    assert validate.agreement(rows) >= 0.90, validate.format_comparison(rows, only_disagreements=True)


def documented_compiler():
    """The compiler docs/counters-validation.md was made with (None if it does not say)."""
    import re
    m = re.search(r"The engine's modules were compiled by (.+?)\. Its counts", (ROOT / validate.REPORT).read_text())
    return m.group(1) if m else None


same_compiler = pytest.mark.skipif(
    documented_compiler() != validate.engine_compiler(),
    reason="docs/counters-validation.md was made with another C++ compiler; its exact counts and reasons are "
           "that compiler's (the agreement tests above still hold)")


@same_compiler
@pytest.mark.slow
def test_every_disagreement_has_its_reason(rows):
    unexplained = [r for r in rows if not r["agrees"] and validate.reason(r, rows) is None]
    assert not unexplained, validate.format_comparison(unexplained)


@pytest.mark.slow
def test_global_loads_and_stores_agree_everywhere(rows):
    glob = [r for r in rows if re.search(r"global_op_(ld|st)\.", r["metric"]) and validate.reason(r, rows) != "ldgsts-l1"]
    assert all(r["agrees"] for r in glob), validate.format_comparison([r for r in glob if not r["agrees"]])
    assert sum(r["exact"] for r in glob) >= 0.95 * len(glob)


@pytest.mark.slow
def test_the_hand_counted_kernels_agree_exactly_but_for_predication(rows):
    cases = [r for r in rows if r["chapter"] == "cases"]
    off = [r for r in cases if not r["exact"]]
    assert all("per_inst_executed" in r["metric"] for r in off), validate.format_comparison(off)


@same_compiler
@pytest.mark.slow
def test_the_validation_report_and_readme_are_current(rows, recording):
    assert (ROOT / validate.REPORT).read_text() == validate.report(rows, recording), \
        "docs/counters-validation.md is stale: python -m pmpp.profiling.validate"
    readme = (ROOT / "pmpp/backends/cpu/README.md").read_text()
    assert validate.readme_section(rows) in readme, "pmpp/backends/cpu/README.md is stale: python -m pmpp.profiling.validate"


def test_a_bank_counter_reason_needs_the_wavefronts_to_agree():
    row = {"chapter": "x", "group": "v", "metric": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
           "agrees": False}
    twin = {"chapter": "x", "group": "v", "metric": "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"}
    assert validate.reason(row, [row, {**twin, "agrees": True}]) == "bank-counter"
    assert validate.reason(row, [row, {**twin, "agrees": False}]) is None
    assert validate.reason(row, [row]) is None


# ---- pmpp.ncu: what ncu prints, and the recording -------------------------------------------------

NCU_CSV = '''==PROF== Connected to process 1
PMPP-LAUNCHES [{"group": "01_simple", "kernel": "SimpleSumReductionKernel", "grid": [2048, 1, 1], "block": [256, 1, 1], "shared_mem": 0}, {"group": "12_reduce5", "kernel": "reduce5<256>", "grid": [4, 1, 1], "block": [256, 1, 1], "shared_mem": 1024}]
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","1","python3","h","SimpleSumReductionKernel","1","7","(256, 1, 1)","(2048, 1, 1)","0","9.0","Command line profiler metrics","l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum","","1,024"
"1","1","python3","h","cupy_fill","1","7","(128, 1, 1)","(4, 1, 1)","0","9.0","Command line profiler metrics","l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum","","3"
"2","1","python3","h","void reduce5<256>(const float *, float *, unsigned int)","1","7","(256, 1, 1)","(4, 1, 1)","0","9.0","Command line profiler metrics","l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum","","n/a"
'''


def test_parse_csv_gives_each_launch_its_metrics_in_order():
    launches = ncu.parse_csv(NCU_CSV)
    assert [l["kernel"] for l in launches] == ["SimpleSumReductionKernel", "cupy_fill",
                                               "void reduce5<256>(const float *, float *, unsigned int)"]
    assert launches[0]["metrics"] == {"l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": 1024.0}
    assert launches[0]["grid"] == [2048, 1, 1] and launches[2]["metrics"] == {}


def test_launches_are_matched_to_the_log_and_cupys_own_dropped():
    logged = json.loads(NCU_CSV.splitlines()[1][len(ncu.LAUNCH_LOG):])
    matched = ncu.match_launches(ncu.parse_csv(NCU_CSV), logged)
    assert [(m["group"], m["profiled_kernel"]) for m in matched] == [
        ("01_simple", "SimpleSumReductionKernel"),
        ("12_reduce5", "void reduce5<256>(const float *, float *, unsigned int)")]


def test_a_launch_ncu_did_not_profile_is_an_error():
    with pytest.raises(ncu.ProfilerError, match="no launch of reduce6"):
        ncu.match_launches(ncu.parse_csv(NCU_CSV), [{"group": "13", "kernel": "reduce6<256>"}])


def test_metrics_ncu_does_not_list_are_left_out_but_launch_metrics_kept():
    kept = ncu.usable(["l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", "smsp__made_up.sum",
                       "launch__registers_per_thread"], {"l1tex__t_requests_pipe_lsu_mem_global_op_ld"})
    assert kept == ["l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", "launch__registers_per_thread"]
    # a rollup with a submetric is known by its base name too
    assert ncu.usable(["dram__throughput.avg.pct_of_peak_sustained_elapsed"], {"dram__throughput"}) == \
        ["dram__throughput.avg.pct_of_peak_sustained_elapsed"]


def test_the_committed_counter_recordings_are_valid_and_named_for_device_and_commit():
    files = sorted((ROOT / "results" / "counters").glob("*.json"))
    assert files
    for path in files:
        data = json.loads(path.read_text())
        ncu.validate(data, path)
        assert path.name == ncu.default_path(data["device"], data["commit"]).name


def test_profile_counters_without_a_gpu_says_what_to_do(monkeypatch, capsys):
    monkeypatch.setattr("pmpp.cli.resolve_backend", lambda backend: "cpu")
    assert main(["profile", "--counters", "reduction"]) == 1
    assert "profile --cpu" in capsys.readouterr().err


def test_profile_cpu_prints_the_counters_of_each_variant(capsys):
    assert main(["profile", "--cpu", "reduction", "--variants", "07", "08"]) == 0
    out = capsys.readouterr().out
    assert "07_reduce1" in out and "08_reduce2" in out and "bank confl." in out

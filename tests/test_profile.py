"""pmpp.profile: DRAM traffic from Nsight Compute, parsed, recorded and validated."""
import json
import shutil
import stat
import sys

import pytest

from pmpp.profiling import ncu, profile
from pmpp.chapters import stencil
from pmpp.cli import main

DEVICE = {"name": "NVIDIA Test GPU"}
SOFTWARE = {"cupy": "14.0", "ncu": "Version 2025.3"}

# What `ncu --csv --print-units base` prints: notes, the program's output, then one row per metric.
NCU_OUTPUT = """==PROF== Connected to process 512
01_basic done
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","512","python3","127.0.0.1","BasicStencilKernel","1","7","(8, 8, 8)","(64, 64, 64)","0","9.0","Command line profiler metrics","dram__bytes_read.sum","byte","538,185,984"
"0","512","python3","127.0.0.1","BasicStencilKernel","1","7","(8, 8, 8)","(64, 64, 64)","0","9.0","Command line profiler metrics","dram__bytes_write.sum","Mbyte","525.9"
"1","512","python3","127.0.0.1","Fill","1","7","(128, 1, 1)","(4, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes_read.sum","byte","1,000"
"1","512","python3","127.0.0.1","Fill","1","7","(128, 1, 1)","(4, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes_write.sum","byte","24"
"""


def test_parse_csv_gives_bytes_per_launch_in_any_unit():
    launches = profile.parse_csv(NCU_OUTPUT)
    assert [k["kernel"] for k in launches] == ["BasicStencilKernel", "Fill"]
    assert launches[0]["dram__bytes_read.sum"] == 538_185_984
    assert launches[0]["dram__bytes_write.sum"] == pytest.approx(525.9e6)
    assert launches[1]["dram__bytes_write.sum"] == 24


def test_parse_csv_refuses_a_unit_that_is_not_bytes():
    with pytest.raises(profile.ProfilerError, match="not a unit of bytes"):
        profile.parse_csv(NCU_OUTPUT.replace('"Mbyte"', '"byte/second"'))


def _fake_ncu(tmp_path, output: str, code: int = 0) -> str:
    """An executable that prints ``output`` and exits with ``code``, whatever it is asked."""
    (tmp_path / "out.txt").write_text(output)
    script = tmp_path / "ncu"
    script.write_text(f"#!{sys.executable}\nimport sys\nsys.stdout.write(open({str(tmp_path / 'out.txt')!r}).read())\n"
                      f"sys.stderr.write('ncu: failed\\n' if {code} else '')\nsys.exit({code})\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def test_dram_traffic_sums_the_kernels_of_each_launch(tmp_path):
    ncu = _fake_ncu(tmp_path, NCU_OUTPUT)
    rows = profile.dram_traffic(stencil.CHAPTER, {"n": 16}, ["01", "02_shared_memory_tiling"], ncu=ncu)
    assert [r["variant"] for r in rows] == ["01_basic", "02_shared_memory_tiling"]
    assert rows[0]["dram_read_bytes"] == 538_185_984 + 1_000
    assert rows[0]["dram_write_bytes"] == pytest.approx(525.9e6 + 24)
    assert rows[0]["kernels"] == ["BasicStencilKernel", "Fill"]


def test_dram_traffic_reports_a_failed_profile(tmp_path):
    ncu = _fake_ncu(tmp_path, "==ERROR== something went wrong\n", code=1)
    with pytest.raises(profile.ProfilerError, match="profiling stencil 01_basic failed.*ncu: failed"):
        profile.dram_traffic(stencil.CHAPTER, {"n": 16}, ["01_basic"], ncu=ncu)


def test_dram_traffic_names_an_unknown_variant(tmp_path):
    with pytest.raises(KeyError, match="no variant '99_missing'"):
        profile.dram_traffic(stencil.CHAPTER, {"n": 16}, ["99_missing"], ncu=_fake_ncu(tmp_path, NCU_OUTPUT))


def test_find_ncu_says_where_to_get_it(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CUDA_PATH", str(tmp_path))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.setattr(profile.Path, "is_file", lambda self: False)
    with pytest.raises(profile.ProfilerError, match="ncu.*not found.*CUDA toolkit"):
        profile.find_ncu()


def test_profile_command_without_a_gpu_says_what_to_do(monkeypatch, capsys):
    monkeypatch.setattr("pmpp.cli.resolve_backend", lambda backend: "cpu")
    assert main(["profile", "stencil"]) == 1
    err = capsys.readouterr().err
    assert "Nsight Compute" in err and "results/dram/" in err


def _rows():
    return [{"variant": "01_basic", "dram_read_bytes": 5.0e8, "dram_write_bytes": 4.9e8, "kernels": ["BasicStencilKernel"]}]


def test_write_then_read_a_profile(tmp_path):
    path = profile.write_profile(tmp_path / "p.json", "stencil", {"n": 512}, _rows(),
                                 device=DEVICE, software=SOFTWARE, commit="abc1234")
    (found,) = profile.recorded("stencil", tmp_path)
    assert found["commit"] == "abc1234" and found["device"] == DEVICE and found["versions"]["ncu"]
    assert found["chapters"]["stencil"] == {"problem": {"n": 512}, "variants": _rows()}
    assert profile.recorded("scan", tmp_path) == []
    assert json.loads(path.read_text())["metrics"] == list(profile.METRICS)


def test_a_profile_file_never_mixes_commits(tmp_path):
    path = tmp_path / "p.json"
    profile.write_profile(path, "stencil", {"n": 512}, _rows(), device=DEVICE, software=SOFTWARE, commit="abc1234")
    with pytest.raises(ValueError, match="at commit abc1234; these are from .* at def5678"):
        profile.write_profile(path, "scan", {"n": 8}, _rows(), device=DEVICE, software=SOFTWARE, commit="def5678")


@pytest.mark.parametrize("key, value, message", [
    ("dram_read_bytes", -1, "dram_read_bytes must be a number >= 0"),
    ("dram_write_bytes", "many", "dram_write_bytes must be a number >= 0"),
    ("kernels", [], "no kernel was profiled"),
])
def test_validate_rejects_a_bad_row(tmp_path, key, value, message):
    rows = [{**_rows()[0], key: value}]
    with pytest.raises(ValueError, match=message):
        profile.write_profile(tmp_path / "p.json", "stencil", {"n": 512}, rows,
                              device=DEVICE, software=SOFTWARE, commit="abc1234")


def test_every_committed_profile_is_valid_and_named_for_device_and_commit():
    from pmpp import results
    files = sorted((results.RESULTS_DIR / "dram").glob("*.json"))
    assert files, "no DRAM-traffic profile committed in results/dram/"
    for path in files:
        data = json.loads(path.read_text())
        profile.validate(data, path)
        assert path.name == profile.default_path(data["device"], data["commit"]).name
    latest = profile.recorded("stencil")[0]["chapters"]["stencil"]
    assert {r["variant"] for r in latest["variants"]} == {v.name for v in stencil.CHAPTER.variants}


@pytest.mark.gpu
@pytest.mark.skipif(shutil.which("ncu") is None, reason="needs Nsight Compute (ncu) on PATH")
def test_profile_of_the_basic_stencil_reads_the_grid_at_least_once():
    (row,) = profile.dram_traffic(stencil.CHAPTER, {"n": 256}, ["01_basic"])
    grid_bytes = 256 ** 3 * 4
    assert row["kernels"] == ["BasicStencilKernel"]
    assert 0.9 * grid_bytes <= row["dram_read_bytes"] <= 7 * grid_bytes


STALLS_OUTPUT = """==PROF== Connected to process 512
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","512","python3","127.0.0.1","BasicStencilKernel","1","7","(8, 8, 8)","(64, 64, 64)","0","9.0","Command line profiler metrics","dram__throughput.avg.pct_of_peak_sustained_elapsed","%","61.5"
"0","512","python3","127.0.0.1","BasicStencilKernel","1","7","(8, 8, 8)","(64, 64, 64)","0","9.0","Command line profiler metrics","smsp__average_warp_latency_per_inst_issued.ratio","","44.4"
"0","512","python3","127.0.0.1","BasicStencilKernel","1","7","(8, 8, 8)","(64, 64, 64)","0","9.0","Command line profiler metrics","smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio","","n/a"
"""


def test_stall_profile_keeps_each_kernels_figures_by_metric_name(tmp_path):
    fake = _fake_ncu(tmp_path, STALLS_OUTPUT)
    rows = ncu.stall_profile(stencil.CHAPTER, {"n": 16}, ["01", "cupyx correlate"], ncu=fake)
    assert [r["name"] for r in rows] == ["01_basic", "cupyx correlate"]
    metrics = rows[0]["kernels"][0]["metrics"]
    assert rows[0]["kernels"][0]["kernel"] == "BasicStencilKernel"
    assert metrics == {"dram__throughput.avg.pct_of_peak_sustained_elapsed": 61.5,
                       "smsp__average_warp_latency_per_inst_issued.ratio": 44.4}   # n/a left out


def test_stall_recordings_are_written_checked_and_found(tmp_path):
    row = {"name": "01_basic", "kernels": [{"kernel": "BasicStencilKernel", "grid": [1], "block": [1],
                                            "metrics": {"gpu__time_duration.sum": 5.0}}]}
    path = ncu.write_stalls(tmp_path / "stalls" / "x.json", "stencil", {"n": 512}, [row],
                                device=DEVICE, software=SOFTWARE, commit="abc1234")
    found = ncu.recorded_stalls("stencil", tmp_path / "stalls")
    assert path.exists() and found[0]["chapters"]["stencil"]["rows"][0]["name"] == "01_basic"
    with pytest.raises(ValueError, match="no kernel was profiled"):
        ncu.write_stalls(path, "reduction", {"n": 1}, [{"name": "x", "kernels": []}],
                             device=DEVICE, software=SOFTWARE, commit="abc1234")

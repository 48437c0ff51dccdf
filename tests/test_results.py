"""pmpp.results: entries, writing and merging results files, validation, recorded figures; and the
ceilings a machine without a GPU takes from them."""
import json
import re

import pytest

from pmpp import device as ceil
from pmpp import results
from pmpp.chapters.base import Model
from pmpp.errors import BackendUnavailableError
from pmpp.timing import CPU_WALL_CLOCK, CUDA_EVENTS, Timing

DEVICE = {"name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0", "sm_count": 132,
          "l2_bytes": 52428800, "memory_bytes": 85017755648, "sm_clock_khz": 1980000,
          "memory_clock_khz": 2619000, "memory_bus_bits": 5120}
SOFTWARE = {"driver": "580.159.04", "cuda_runtime": "13.0", "cupy": "14.2.0", "numpy": "2.5.2",
            "python": "3.12.3", "torch": "2.11.0"}
CEILINGS = {"copy_gbs": 3000.0, "fp32_gflops": 51000.0}


def timing(median, clock=CUDA_EVENTS):
    return Timing.from_samples([median * 0.9, median, median * 1.2], clock)


def entry(name="01_simple", kind="variant", median=1000.0, clock=CUDA_EVENTS):
    n = 2**28
    return results.make_entry(name, kind, f"n={n} float32", timing(median, clock), Model(n - 1, 4 * n + 4), True)


def write(path, chapter="reduction", entries=None, date="2026-11-21T15:00:00+00:00", commit="a" * 40, device=DEVICE):
    return results.write_results(path, chapter, entries or [entry()], CEILINGS, device=device,
                                 software=SOFTWARE, date=date, commit=commit)


# --- entries ---------------------------------------------------------------------------------

def test_make_entry_computes_rates_from_the_model():
    e = results.make_entry("03_shared", "variant", "n=1000 float32", timing(2.0), Model(flops=1000, bytes=4000), True)
    assert e["median_us"] == 2.0 and e["min_us"] == 1.8 and e["max_us"] == 2.4
    assert e["gbps"] == pytest.approx(2.0)        # 4000 B in 2 us
    assert e["gflops"] == pytest.approx(0.5)
    assert e["intensity"] == pytest.approx(0.25)
    assert e["correct"] is True and e["clock"] == CUDA_EVENTS


def test_make_entry_without_model_leaves_rates_empty():
    e = results.make_entry("cupy.sum (CUB)", "library", {"n": 10}, timing(5.0), None, True)
    assert e["gbps"] is None and e["intensity"] is None
    assert e["problem"] == "n=10"


def test_make_entry_rejects_an_unknown_kind():
    with pytest.raises(ValueError, match="kind"):
        results.make_entry("x", "baseline", "n=1", timing(1.0))


# --- files -----------------------------------------------------------------------------------

def test_write_then_load_roundtrip(tmp_path):
    path = write(tmp_path / "h100.json", entries=[entry(), entry("cupy.sum (CUB)", "library", 300.0)])
    data = results.load_results(path)
    assert data["device"]["name"] == DEVICE["name"]
    assert data["versions"]["cupy"] == "14.2.0"
    assert data["ceilings"]["copy_gbs"] == 3000.0
    assert [e["name"] for e in data["chapters"]["reduction"]] == ["01_simple", "cupy.sum (CUB)"]
    assert data["clock"] == CUDA_EVENTS


def test_writing_a_chapter_keeps_the_other_chapters(tmp_path):
    path = tmp_path / "h100.json"
    write(path, "reduction", [entry("01_simple")], date="2026-11-20T10:00:00+00:00")
    write(path, "scan", [entry("01_kogge_stone")], date="2026-11-21T10:00:00+00:00")
    data = results.load_results(path)
    assert sorted(data["chapters"]) == ["reduction", "scan"]
    assert data["date"].startswith("2026-11-21") and data["commit"] == "a" * 40


def test_a_file_never_mixes_commits_or_devices(tmp_path):
    # The file's commit and device label every entry in it: a run at another commit (or on
    # another GPU) must go to another file, not relabel the numbers already there.
    path = tmp_path / "h100.json"
    write(path, "reduction", [entry("01_simple")], commit="a" * 40)
    with pytest.raises(ValueError, match="at commit a{40}.*another file"):
        write(path, "scan", [entry("01_kogge_stone")], commit="b" * 40)
    with pytest.raises(ValueError, match="another file"):
        write(path, "scan", [entry("01_kogge_stone")], device={**DEVICE, "name": "NVIDIA H200"})
    assert sorted(results.load_results(path)["chapters"]) == ["reduction"]


def test_entries_for_gathers_a_chapters_benchmark_sets(tmp_path):
    path = tmp_path / "h100.json"
    write(path, "elementwise", [entry("03_packed")])
    write(path, "elementwise:float16", [entry("03_packed"), entry("torch", "library")])
    write(path, "elementwise_other", [entry("x")])
    names = [e["name"] for e in results.entries_for(results.load_results(path), "elementwise")]
    assert names == ["03_packed", "03_packed", "torch"]


def test_writing_a_chapter_again_replaces_its_entries(tmp_path):
    path = tmp_path / "h100.json"
    write(path, "reduction", [entry("01_simple"), entry("02_convergent")])
    write(path, "reduction", [entry("05_unrolled")])
    assert [e["name"] for e in results.load_results(path)["chapters"]["reduction"]] == ["05_unrolled"]


def test_write_with_ceilings_object(tmp_path):
    c = ceil.Ceilings("X", 2000.0, 40000.0, None, None, "measured on X, 2026-11-21")
    path = results.write_results(tmp_path / "x.json", "reduction", [entry()], c, device=DEVICE,
                                 software=SOFTWARE, commit="abc")
    assert results.load_results(path)["ceilings"]["fp32_gflops"] == 40000.0


def test_write_refuses_cpu_and_gpu_timings_in_one_file(tmp_path):
    with pytest.raises(ValueError, match="different clocks"):
        write(tmp_path / "x.json", entries=[entry(), entry("02", clock=CPU_WALL_CLOCK)])


def test_default_path_is_named_for_the_device_and_commit():
    path = results.default_path(DEVICE, "0123456789" + "a" * 30)
    assert path.name == "nvidia-h100-80gb-hbm3-0123456.json"
    assert path.parent.name == "results"
    assert results.default_path(DEVICE, "0123456789-dirty").name == "nvidia-h100-80gb-hbm3-0123456-dirty.json"


# --- validation ------------------------------------------------------------------------------

def corrupt(tmp_path, change):
    path = write(tmp_path / "h100.json")
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))
    return path


def test_missing_field_names_file_and_field(tmp_path):
    path = corrupt(tmp_path, lambda d: d.pop("ceilings"))
    with pytest.raises(ValueError, match=r"h100\.json: field 'ceilings' is missing"):
        results.load_results(path)


def test_bad_kind_names_the_entry(tmp_path):
    path = corrupt(tmp_path, lambda d: d["chapters"]["reduction"][0].update(kind="best"))
    with pytest.raises(ValueError, match=re.escape("'chapters.reduction[0].kind'")):
        results.load_results(path)


def test_non_positive_time_is_rejected(tmp_path):
    path = corrupt(tmp_path, lambda d: d["chapters"]["reduction"][0].update(median_us=-3))
    with pytest.raises(ValueError, match="median_us.*positive"):
        results.load_results(path)


def test_bad_date_is_rejected(tmp_path):
    path = corrupt(tmp_path, lambda d: d.update(date="yesterday"))
    with pytest.raises(ValueError, match="'date'.*ISO-8601"):
        results.load_results(path)


def test_invalid_json_names_the_file(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"device": ')
    with pytest.raises(ValueError, match="broken.json: not valid JSON"):
        results.load_results(path)


# --- recorded figures and their label ---------------------------------------------------------

def test_recorded_is_newest_first_and_filters_by_chapter(tmp_path):
    write(tmp_path / "a100.json", "reduction", device={**DEVICE, "name": "NVIDIA A100"}, date="2026-10-01T00:00:00+00:00")
    write(tmp_path / "h100.json", "reduction", date="2026-11-21T00:00:00+00:00")
    write(tmp_path / "h100.json", "scan", date="2026-11-21T00:00:00+00:00")
    found = results.recorded(directory=tmp_path)
    assert [r["device"]["name"] for r in found] == ["NVIDIA H100 80GB HBM3", "NVIDIA A100"]
    assert [r["device"]["name"] for r in results.recorded("scan", directory=tmp_path)] == ["NVIDIA H100 80GB HBM3"]
    assert results.recorded("histogram", directory=tmp_path) == []


def test_recorded_leaves_out_cpu_timings(tmp_path):
    write(tmp_path / "cpu.json", entries=[entry(clock=CPU_WALL_CLOCK)], device={"name": "CPU engine (x86_64)"})
    assert results.recorded(directory=tmp_path) == []


def test_recorded_reports_a_malformed_file(tmp_path):
    (tmp_path / "bad.json").write_text("[]")
    with pytest.raises(ValueError, match="bad.json"):
        results.recorded(directory=tmp_path)


def test_label_names_device_date_and_short_commit(tmp_path):
    data = results.load_results(write(tmp_path / "h100.json", commit="abc1234def" + "0" * 30 + "-dirty"))
    assert results.label(data) == "recorded on NVIDIA H100 80GB HBM3, 2026-11-21 (commit abc1234-dirty)"


def test_label_of_cpu_timings_says_so(tmp_path):
    path = write(tmp_path / "cpu.json", entries=[entry(clock=CPU_WALL_CLOCK)], device={"name": "CPU engine"})
    assert results.label(results.load_results(path)).startswith("CPU wall clock")


def test_git_commit_is_a_sha():
    commit = results.git_commit()
    assert commit is None or re.fullmatch(r"[0-9a-f]{40}(-dirty)?", commit)


def test_git_commit_outside_a_checkout_falls_back_to_pmpp_commit(tmp_path, monkeypatch):
    monkeypatch.setenv("PMPP_COMMIT", "feedbee")
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    assert results.git_commit(tmp_path) == "feedbee"


def test_pmpp_commit_wins_over_a_stale_checkout(monkeypatch):
    # A tree copied to a GPU machine may carry an old .git: the commit it was copied at is the truth.
    monkeypatch.setenv("PMPP_COMMIT", "feedbee")
    assert results.git_commit() == "feedbee"


def test_device_info_on_the_cpu_engine_says_so():
    info = results.device_info(backend="cpu")
    assert info["engine"] == "cpu" and info["name"].startswith("CPU engine")
    assert info["sm_count"] is None


def test_versions_name_python_and_numpy():
    v = results.versions(backend="cpu")
    assert v["python"].count(".") == 2 and v["numpy"]
    assert set(SOFTWARE) <= set(v)


# --- ceilings without a GPU --------------------------------------------------------------------

def test_cpu_ceilings_come_from_the_newest_recording(tmp_path, monkeypatch):
    write(tmp_path / "h100.json", date="2026-11-21T00:00:00+00:00", commit="abc1234" + "0" * 33)
    monkeypatch.setattr(results, "RESULTS_DIR", tmp_path)
    monkeypatch.setattr(ceil, "gpu_available", lambda: False)
    c = ceil.ceilings()
    assert (c.copy_gbs, c.fp32_gflops) == (3000.0, 51000.0)
    assert c.device == "NVIDIA H100 80GB HBM3"
    assert c.measured_on == "recorded on NVIDIA H100 80GB HBM3, 2026-11-21 (commit abc1234)"
    assert c.peak_bw_gbs == pytest.approx(3352.32)     # from the recorded device properties


def test_cpu_ceilings_without_recordings_raise(tmp_path, monkeypatch):
    monkeypatch.setattr(results, "RESULTS_DIR", tmp_path)
    monkeypatch.setattr(ceil, "gpu_available", lambda: False)
    with pytest.raises(BackendUnavailableError, match="no ceilings are recorded"):
        ceil.ceilings()


def test_committed_recordings_are_valid_and_cover_every_benchmark_set():
    # What the notebooks read on machines without a GPU: every file valid, named for its device
    # and commit, and every chapter's benchmark sets recorded somewhere, each entry correct.
    from pmpp import chapters
    files = sorted(results.RESULTS_DIR.glob("*.json"))
    assert files, "no recordings committed in results/"
    for path in files:
        data = results.load_results(path)
        assert path.name == results.default_path(data["device"], data["commit"]).name
    for name in chapters.names():
        chapter = chapters.get(name)
        for key, _ in chapter.bench_sets():
            runs = [r for r in results.recorded() if r["chapters"].get(key)]
            assert runs, f"no recording of {key}"
            racy = {v.name for v in chapter.variants if v.racy}
            assert all(e["correct"] for e in runs[0]["chapters"][key] if e["name"] not in racy), key

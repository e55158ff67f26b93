"""Device genes against StandInNvml: values, refusals, apply/settle/restore, the guardian.

Nothing here touches a real GPU: every NVML call goes to the stand-in library,
whose state lives in a JSON file so the guardian process sees the same device.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ctune.errors import EXIT_TOOLCHAIN, ToolchainError, UserError
from ctune.measure.device_control import DeviceControl
from ctune.measure.device_guardian import Guardian
from ctune.measure.device_settings import (
    AS_FOUND,
    AsFound,
    DeviceLimits,
    DeviceSetting,
    NvmlDevice,
    check_permitted,
    load_nvml,
    parse_device_genes,
    restore,
    wait_settled,
)
from ctune.testing.standin_nvml import StandInNvmlLibrary

BOTH = ("clocks", "power_limit")


@pytest.fixture
def nvml(tmp_path: Path) -> StandInNvmlLibrary:
    return StandInNvmlLibrary.create(tmp_path / "nvml.json", power_mw=650_000)


def _spec(lib: StandInNvmlLibrary) -> str:
    return f"ctune.testing.standin_nvml:{lib.path}"


def _wait_for(predicate: object, timeout_s: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


# --- names and values ----------------------------------------------------------------


def test_parse_device_genes() -> None:
    assert parse_device_genes("clocks,power_limit") == BOTH
    assert parse_device_genes(" power_limit , clocks,clocks") == ("power_limit", "clocks")
    with pytest.raises(UserError, match=r"unknown memory_clock \(allowed: clocks, power_limit"):
        parse_device_genes("clocks,memory_clock")
    with pytest.raises(UserError, match="empty list"):
        parse_device_genes("")


def test_limits_and_gene_values_come_from_the_device(nvml: StandInNvmlLibrary) -> None:
    limits = NvmlDevice(load_nvml(_spec(nvml))).limits()
    assert limits.sm_clocks_mhz[0] == 1980 and limits.sm_clocks_mhz[-1] == 345
    assert (limits.power_min_w, limits.power_max_w, limits.power_default_w) == (200, 700, 700)
    clocks = limits.clock_values()
    assert clocks[0] == AS_FOUND and clocks[1] == 1980
    assert len(clocks) == 8 and all(c in limits.sm_clocks_mhz for c in clocks[1:])
    assert min(clocks[1:]) >= 990 and list(clocks[1:]) == sorted(clocks[1:], reverse=True)
    assert limits.power_values() == (AS_FOUND, 700, 575, 450, 325, 200)


def test_power_values_stay_inside_an_odd_range() -> None:
    limits = DeviceLimits((1410,), power_min_w=101.3, power_max_w=348.9, power_default_w=300)
    values = limits.power_values()
    assert values[0] == AS_FOUND
    assert all(105 <= v <= 345 and v % 5 == 0 for v in values[1:])
    assert DeviceLimits((1410,), 300, 300, 300).power_values() == (AS_FOUND, 300)


def test_setting_from_gene_values_and_its_command_line() -> None:
    setting = DeviceSetting.from_values({"sm_clock_mhz": 1410, "power_limit_w": 450, "X": 1})
    assert setting == DeviceSetting(1410, 450)
    assert setting.nvidia_smi(2) == (
        "nvidia-smi -i 2 --lock-gpu-clocks=1410,1410 --power-limit=450"
    )
    as_found = DeviceSetting.from_values({"sm_clock_mhz": AS_FOUND})
    assert as_found.is_as_found and as_found.nvidia_smi() == "" and as_found.text() == "as found"


# --- refusals: one line, exit 3, nothing changed ---------------------------------------


@pytest.mark.parametrize(
    ("state", "message"),
    [
        ({"permitted": False}, "NVML does not permit changing GPU 0 (not root?)"),
        ({"mig": True}, "GPU 0 is in MIG mode"),
        ({"other_processes": 2}, "GPU 0 runs 2 other compute process(es): a shared GPU"),
    ],
)
def test_refusals(tmp_path: Path, state: dict[str, object], message: str) -> None:
    lib = StandInNvmlLibrary.create(tmp_path / "nvml.json", **state)
    with pytest.raises(ToolchainError) as err:
        check_permitted(NvmlDevice(lib), BOTH)
    text = str(err.value)
    assert message in text and "run the search with --device-genes none" in text
    assert "\n" not in text and err.value.exit_code == EXIT_TOOLCHAIN
    assert lib.load().calls == [] and lib.load().power_mw == 700_000


def test_permission_probe_changes_nothing(nvml: StandInNvmlLibrary) -> None:
    check_permitted(NvmlDevice(nvml), BOTH)
    state = nvml.load()
    assert state.calls == ["power_limit 650000", "reset_clocks"]  # the values it had
    assert state.power_mw == 650_000 and state.locked_mhz is None


def test_no_mig_support_is_not_mig(tmp_path: Path) -> None:
    lib = StandInNvmlLibrary.create(tmp_path / "nvml.json", mig=None)
    assert NvmlDevice(lib).mig_enabled() is False


def test_missing_library_is_a_toolchain_error() -> None:
    with pytest.raises(ToolchainError, match="no_such_nvml_module does not import"):
        load_nvml("no_such_nvml_module")


# --- settle and restore ----------------------------------------------------------------


def test_wait_settled_records_the_clock_it_reached(nvml: StandInNvmlLibrary) -> None:
    device = NvmlDevice(nvml)
    device.lock_clocks(1410)
    settled = wait_settled(device, 1410, timeout_s=5.0, poll_s=0.0)
    assert settled.settled and settled.observed_mhz == 1410
    assert nvml.load().reads_since_lock >= 4  # two reads before the lock shows, two at it


def test_a_throttled_clock_is_recorded_not_hidden(tmp_path: Path) -> None:
    lib = StandInNvmlLibrary.create(tmp_path / "nvml.json", throttle_mhz=1200)
    device = NvmlDevice(lib)
    device.lock_clocks(1410)
    settled = wait_settled(device, 1410, timeout_s=0.2, poll_s=0.01)
    assert not settled.settled and settled.observed_mhz == 1200


def test_restore_tries_every_step(nvml: StandInNvmlLibrary) -> None:
    device = NvmlDevice(nvml)
    device.lock_clocks(1410)
    device.set_power_limit_mw(300_000)
    restore(device, AsFound(650_000, clocks=True))
    state = nvml.load()
    assert state.locked_mhz is None and state.power_mw == 650_000
    state.permitted = False
    nvml.save(state)
    with pytest.raises(
        ToolchainError, match=r"restoring GPU 0 failed: .*reset_clocks.*power_limit"
    ):
        restore(device, AsFound(650_000, clocks=True))


def test_applied_sets_then_restores(nvml: StandInNvmlLibrary) -> None:
    with DeviceControl(BOTH, nvml_spec=_spec(nvml), settle_timeout_s=5.0) as control:
        assert control.limits is not None and control.limits.power_max_w == 700
        with control.applied(DeviceSetting(1410, 450)) as settled:
            during = nvml.load()
            assert during.locked_mhz == [1410, 1410] and during.power_mw == 450_000
            assert settled.settled and settled.observed_mhz == 1410
        after = nvml.load()
        assert after.locked_mhz is None and after.power_mw == 650_000
        with pytest.raises(KeyError), control.applied(DeviceSetting(1200, None)):
            raise KeyError("the measurement failed")
        assert nvml.load().locked_mhz is None
        guardian = control.guardian_pid
    assert guardian is not None and not _alive(guardian)


def test_only_the_asked_for_knob_is_touched(nvml: StandInNvmlLibrary) -> None:
    with (
        DeviceControl(("clocks",), nvml_spec=_spec(nvml)) as control,
        control.applied(DeviceSetting(1410, None)),
    ):
        pass
    assert not any(c.startswith("power_limit") for c in nvml.load().calls)


def test_refused_control_starts_no_guardian(tmp_path: Path) -> None:
    lib = StandInNvmlLibrary.create(tmp_path / "nvml.json", permitted=False)
    control = DeviceControl(BOTH, nvml_spec=_spec(lib))
    with pytest.raises(ToolchainError), control:
        pass
    assert control.guardian_pid is None


# --- the guardian: restore does not depend on the parent surviving ---------------------


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_guardian_restores_on_release(nvml: StandInNvmlLibrary) -> None:
    guardian = Guardian(_spec(nvml), 0, AsFound(650_000, clocks=True))
    NvmlDevice(nvml).lock_clocks(1410)
    NvmlDevice(nvml).set_power_limit_mw(250_000)
    assert guardian.release() == "restored"
    state = nvml.load()
    assert state.locked_mhz is None and state.power_mw == 650_000


def test_guardian_that_cannot_open_nvml_refuses_before_any_change(tmp_path: Path) -> None:
    with pytest.raises(ToolchainError, match=r"guardian did not start .*nothing on the GPU"):
        Guardian(f"ctune.testing.standin_nvml:{tmp_path / 'missing.json'}", 0, AsFound(1, True))


_SEARCH = textwrap.dedent(
    """
    import sys, time
    from ctune.measure.device_control import DeviceControl
    from ctune.measure.device_settings import DeviceSetting
    with DeviceControl(("clocks", "power_limit"), nvml_spec=sys.argv[1]) as control:
        with control.applied(DeviceSetting(1410, 300)):
            print("applied", control.guardian_pid, flush=True)
            time.sleep(600)
    """
)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT])
def test_guardian_restores_when_the_search_is_killed(
    nvml: StandInNvmlLibrary, sig: signal.Signals
) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    search = subprocess.Popen(
        [sys.executable, "-c", _SEARCH, _spec(nvml)], stdout=subprocess.PIPE, env=env
    )
    assert search.stdout is not None
    word, pid = search.stdout.readline().decode().split()
    assert word == "applied"
    assert nvml.load().locked_mhz == [1410, 1410] and nvml.load().power_mw == 300_000
    search.send_signal(sig)
    search.wait(30)
    assert _wait_for(lambda: nvml.load().locked_mhz is None and nvml.load().power_mw == 650_000)
    assert _wait_for(lambda: not _alive(int(pid)))


def test_the_device_bench_reads_only(nvml: StandInNvmlLibrary, tmp_path: Path) -> None:
    """bench/device_gene_values.py runs on the lent GPU machines: it must set nothing."""
    import importlib.util
    import json

    path = Path(__file__).resolve().parents[3] / "bench" / "device_gene_values.py"
    loaded = importlib.util.spec_from_file_location("device_gene_values", path)
    assert loaded is not None and loaded.loader is not None
    bench = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(bench)
    assert bench.main(["--nvml", _spec(nvml), "--out", str(tmp_path / "out")]) == 0
    (written,) = (tmp_path / "out").glob("device_gene_values-*.json")
    data = json.loads(written.read_text())
    assert data["genes"]["power_limit_w"] == [0, 700, 575, 450, 325, 200]
    assert data["observed"]["power_limit_w"] == 650.0
    assert nvml.load().calls == []
    with pytest.raises(RuntimeError, match="never changes the GPU"):
        bench.ReadOnlyNvml(nvml).nvmlDeviceSetGpuLockedClocks(0, 1410, 1410)

"""``ctune search --device-genes``: probe the GPU, add the device genes, wrap the measurer.

Everything that can refuse does so before anything compiles or changes: an
unknown name, an option device genes do not combine with, or a bad search request
(``--strategy gaa``, a missing journal: ``driver.check_request``) is a UserError
(exit 2), found before the GPU is opened; a GPU whose clocks and power limit ctune
may not change (no root, a shared GPU, MIG) is a ToolchainError (exit 3) whose line
says to run without ``--device-genes``. Only a user who asks for device genes reaches
NVML's setters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ctune.errors import UserError

if TYPE_CHECKING:
    from ctune.config import Settings
    from ctune.measure.device_control import DeviceControl
    from ctune.objective.spec import ObjectiveSpec
    from ctune.search.driver import SearchOptions
    from ctune.spec import KernelSpec


def open_device_genes(
    text: str,
    spec: KernelSpec,
    cfg: Settings,
    problem_set: str | None,
    objective: ObjectiveSpec,
    options: SearchOptions,
) -> tuple[KernelSpec, DeviceControl]:
    """The spec with device genes and the entered DeviceControl that will apply them."""
    from ctune.measure.device_control import DeviceControl
    from ctune.measure.device_genes import device_genes, with_device_genes
    from ctune.measure.device_settings import parse_device_genes
    from ctune.search.session import check_request, measurer_for

    kinds = parse_device_genes(text)
    if problem_set is not None:
        raise UserError(
            "--device-genes does not combine with --problem-set yet; search one problem"
        )
    if measurer_for(cfg) is not None:
        raise UserError(
            "--device-genes sets GPU 0 of this host, where ctune measures itself; "
            "leave out --executor/--gpus"
        )
    # the request before the GPU: a typo is the same line (exit 2) with device genes as
    # without; run_search checks it again, journal included, with the device genes' space
    check_request(spec, objective, options, None, identity=False)
    control = DeviceControl(kinds, device=0, nvml_spec=cfg.nvml_library)
    control.__enter__()  # refuses (exit 3) before anything changes
    try:
        assert control.limits is not None
        return with_device_genes(spec, device_genes(kinds, control.limits)), control
    except BaseException:
        control.close()
        raise


def device_measurer(cfg: Settings, control: DeviceControl) -> Any:
    """GPU 0's worker measurer, applying each candidate's device genes around its work."""
    from ctune.measure.device_genes import DeviceGeneMeasurer
    from ctune.measure.session import WorkerMeasurer

    return DeviceGeneMeasurer(WorkerMeasurer(device=0, settings=cfg), control)


__all__ = ["device_measurer", "open_device_genes"]

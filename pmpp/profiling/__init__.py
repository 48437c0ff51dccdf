"""What the workbook measures about its kernels and how far to trust it: the CPU engine's counters
explained per variant (:mod:`.explain`), Nsight Compute's runs and recordings (:mod:`.ncu`,
:mod:`.profile`), the engine's counters validated against them (:mod:`.validate`), the goals
per GPU (:mod:`.goals`) and what counting costs (:mod:`.count_cost`).

``from pmpp import explain`` (and ``ncu``, ``validate``, ``goals``, ``profile``) still works: the
notebooks and students use those names.
"""

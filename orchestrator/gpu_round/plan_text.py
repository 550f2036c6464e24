"""The GPU round's plan as `just gpu-round --dry-run` prints it: each piece's sessions, warm-ups, repetitions and
seconds on both profiles with how much of them was measured, each session's cost, which runs were measured and
which predicted, the calls, and what waits for a later lease, in order."""

from __future__ import annotations

from orchestrator.gpu_round.plan import (
    CALL_START_S,
    IDLE_S,
    LEASE_S,
    MACHINE_START_S,
    NOT_PLANNED,
    PROFILES,
    SECOND_CALL_S,
    START_MARGIN,
    TEST_FILES,
    PlannedPiece,
    RoundPlan,
    Sweep,
)
from orchestrator.gpu_round.times import (
    MEASURED_ON,
    MEASURED_SWEEPS,
    PCIE_BYTES_PER_S,
    SESSION_START_S,
    WARM_COMPILE_S,
    WEIGHTS_BUILD_S,
    host_copy_s,
    sessions_of,
)
from orchestrator.walltime import SWEEP_START_S

WEIGHTS_8B_BYTES = 16.06e9  # LLaMA-3-8B in bfloat16 (accel-8b's memory.weights_bytes)


def _controls(piece: PlannedPiece) -> tuple[str, str, str]:
    """Sessions, warm-ups and repetitions of a campaign piece ('-' for tests; 'a/b' where its sweeps differ)."""
    if not piece.sweeps:
        return "-", "-", "-"
    values = [(s.spec.controls.sessions, s.spec.controls.warmup, s.spec.controls.repetitions) for s in piece.sweeps]
    return tuple("/".join(dict.fromkeys(str(v[i]) for v in values)) for i in range(3))  # type: ignore[return-value]


def _measured_share(piece: PlannedPiece) -> str:
    """How much of its seconds on the profile the committed sweeps ran on rest on measured runs or test files."""
    if not piece.sweeps:
        measured = sum(TEST_FILES[path].measured_s or 0.0 for path in piece.piece.sources)
        return f"{measured:.0f}/{piece.tests_s:.0f}"
    total = piece.seconds(MEASURED_ON)
    measured = sum(c.measured_s for s in piece.sweeps for c in s.all_costs) + SWEEP_START_S * len(piece.sweeps)
    return f"{measured:.0f}/{total:.0f}"


def session_lines(sweep: Sweep) -> list[str]:
    """Each session's cost on both profiles: its start, model builds and runs."""
    lines = []
    per_session_loads = {p: sweep.loads_s[p] / sweep.spec.controls.sessions for p in PROFILES}
    for index, (session, costs) in enumerate(sessions_of(sweep.all_costs).items()):
        start = SWEEP_START_S if index == 0 else SESSION_START_S
        seconds = [start + per_session_loads[p] + sum(c.seconds[p] for c in costs) for p in PROFILES]
        compiles = sorted({c.compile for c in costs if c.compile})
        what = f"{len(costs)} runs" + (f", {' and '.join(compiles)} compiles" if compiles else "")
        lines.append(f"    session {session if session is not None else 0}: "
                     + ", ".join(f"{s:.0f} s on {p}" for s, p in zip(seconds, PROFILES))
                     + f" ({what}; {'the command' if index == 0 else 'a fresh process'}'s {start:.0f} s start)")
    return lines


def source_lines(sweep: Sweep) -> list[str]:
    """Which runs are priced from a measured run (and which one), which by the roofline."""
    measured, predicted = {}, {}
    for cost in sweep.all_costs:
        if cost.twin is not None:
            measured.setdefault(cost.label, f"{cost.twin.sweep} {cost.twin.run_id}: {cost.twin.generation_s:.2f} s"
                                + (f", compile {cost.twin.compile_s:.1f} s" if cost.compile else ""))
        else:
            predicted.setdefault(cost.label, "")
    lines = []
    if measured:
        lines.append("    measured on the H200 (a generation's median; on h100-sxm scaled by the roofline): "
                     + "; ".join(f"{k} ({v})" for k, v in measured.items()))
    if predicted:
        lines.append(f"    predicted by the roofline: {', '.join(predicted)}")
    return lines


def _call_line(plan: RoundPlan, number: int, names: tuple[str, ...], deadline: float) -> str:
    if not names:
        return f"call {number}: none (no piece fits its {max(deadline, 0):.0f} s deadline)"
    predicted = ", ".join(f"{plan.call_s(names, p, margin=False):.0f} s on {p}" for p in PROFILES)
    needed = ", ".join(f"{plan.call_s(names, p):.0f} s" for p in PROFILES)
    return (f"call {number}: {', '.join(names)}: {predicted} with the call's {CALL_START_S:.0f} s start; "
            f"x{START_MARGIN:g} to start each piece: {needed}, of its {deadline:.0f} s deadline")


def _why_not_more(plan: RoundPlan) -> list[str]:
    """What call 1 would need with the next campaign piece too: why the headline holds what it holds."""
    later = [plan.piece(n) for n in (*plan.second, *plan.left) if plan.piece(n).sweeps]
    if not plan.first or not later:
        return []
    nxt = later[0]
    with_it = ", ".join(f"{plan.call_s((*plan.first, nxt.name), p):.0f} s on {p}" for p in PROFILES)
    return [(f"  call 1 with {nxt.name} too would need {with_it} (x{START_MARGIN:g}), over its "
             f"{plan.budget_s:.0f} s: fewer batches in call 1, not fewer sessions")]


def format_plan(plan: RoundPlan) -> str:
    """The plan as `just gpu-round --dry-run` prints it."""
    call_of = {**dict.fromkeys(plan.first, "1"), **dict.fromkeys(plan.second, "2")}
    lines = [f"{'piece':<18} {'call':>4} {'sess':>4} {'warm':>4} {'reps':>4} {'runs':>4}  "
             + "  ".join(f"{p:>8}" for p in PROFILES) + f"  {'measured':>9}  answers"]
    for piece in plan.pieces:
        times = "  ".join(f"{piece.seconds(p):>6.0f} s" for p in PROFILES)
        sessions, warmups, repetitions = _controls(piece)
        lines.append(f"{piece.name:<18} {call_of.get(piece.name, '-'):>4} {sessions:>4} {warmups:>4} "
                     f"{repetitions:>4} {piece.count:>4}  {times}  {_measured_share(piece):>9}  {piece.piece.answers}")
    lines.append(f"  (seconds without the x{START_MARGIN:g} margin; measured: of the {MEASURED_ON} seconds, those "
                 f"priced from runs in {', '.join(MEASURED_SWEEPS)}; the rest predicted)")
    for name in plan.first:
        piece = plan.piece(name)
        for sweep in piece.sweeps:
            lines.append(f"  {name} ({sweep.name}), each session a fresh process and CUDA context:")
            lines += session_lines(sweep) + source_lines(sweep)
    lines.append(f"  predicted: a warm compile {WARM_COMPILE_S:.0f} s (inductor's FX graph and autotune caches on "
                 f"local disk, set by the round), a later session's start {SESSION_START_S:.0f} s (the command's "
                 f"measured start); the graph variants' capture is in their warm-ups")
    build = " and ".join(f"{s:.2f} s" for s in WEIGHTS_BUILD_S)
    lines.append(f"  weights: rebuilt on the device in each session ({build} measured for the 8B shapes, "
                 f"model_load_s in accel-8b), less than a host copy over PCIe at {PCIE_BYTES_PER_S / 1e9:.0f} GB/s "
                 f"would take ({host_copy_s(WEIGHTS_8B_BYTES):.2f} s for 16 GB): not kept in host memory")
    lines += [f"  note: {note}" for note in plan.notes]
    for number, (names, deadline) in enumerate(((plan.first, plan.budget_s), (plan.second, plan.second_s)), start=1):
        lines.append(_call_line(plan, number, names, deadline))
        if number == 1:
            lines += _why_not_more(plan)
    lines.append(f"  (call 2's deadline: what the lease leaves after call 1 and a {MACHINE_START_S[1]:.0f} s machine "
                 f"start, at most {SECOND_CALL_S:.0f} s)")
    for order, name in enumerate(plan.left, start=1):
        start = plan.latest_start([*plan.second, name])
        when = (f"or call 2 when the machine starts in under {start:.0f} s" if start >= MACHINE_START_S[0]
                else "not in this lease")
        lines.append(f"next lease {order}: {name} (needs {plan.piece(name).need_s():.0f} s; {when})")
    lines += [f"not planned: {what}" for what in NOT_PLANNED]
    low, high = (plan.lease_s(s) for s in MACHINE_START_S)
    lines.append(
        f"lease: machine start {MACHINE_START_S[0]:.0f}-{MACHINE_START_S[1]:.0f} s + the calls + "
        f"{IDLE_S:.0f} s idle after each + a rerun of {plan.shortest.name} ({plan.rerun_s:.0f} s) = "
        f"{low:.0f}-{high:.0f} s of {LEASE_S:.0f} s; after call 1, call 2's --budget is "
        f"min({SECOND_CALL_S:.0f}, budget_left_s - {IDLE_S + plan.rerun_s:.0f})"
    )
    return "\n".join(lines)

"""The evidence the prompts carry, gathered from the run directory: a parent kernel with its timing, speed
of light, ptxas resources, profile evidence, diagnosis and critique; the history of attempts; the task's
catalogue; how candidates are built.

Everything is read back from files (results, profiles, critiques, rounds) by candidate id, so a coder task
needs nothing from the checkpointed state but its small job, and a resumed run sees the same evidence.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

from cuda_llm.tools.bounds.tensor_rates import hardware_facts
from cuda_llm.tools.compiler.build_summary import BuildView, notable_warnings, sass_lines
from cuda_llm.agents.context import (
    BuildBrief, CritiqueBrief, DiagnosisBrief, FeatureBrief, HistoryItem, ParentKernel, TaskBrief,
)
from cuda_llm.graph.state import Candidate, MAX_HISTORY, candidate_id, short
from cuda_llm.results import EvalResult
from cuda_llm.runs.rundir import read_json
from cuda_llm.feature_db.bandit import applicable, task_filters
from cuda_llm.graph.stage_inputs import load_profile as stored_profile
from cuda_llm.tools.profile.profile_models import ProfileResult

BASELINE = "baseline"
PASSED = {"ok", "suspect"}


def task_brief(deps: Any) -> TaskBrief:
    """The task as prompts show it (with how custom inputs are drawn, from the loaded task)."""
    return TaskBrief.from_task(deps.loaded)


def build_brief(deps: Any) -> BuildBrief:
    """The toolchain and the GPU's hardware facts (mma.sync vs wgmma rates, operand rules), said once."""
    arch = str(getattr(deps, "arch", "") or "")
    try:
        facts = hardware_facts(arch) if arch else []
    except ValueError:          # a broken table must not stop a prompt
        facts = []
    return BuildBrief(**deps.evaluator.toolchain(), hardware_facts=facts)


def candidate_source(deps: Any, cid: str) -> str | None:
    """A candidate's source: the naive baseline, or the file kept in the run directory."""
    try:
        if not cid or cid == BASELINE:
            return Path(deps.loaded.task.baseline_path).read_text()
        path = Path(deps.rundir.root) / "candidates" / f"{cid}.cu"
        return path.read_text() if path.is_file() else None
    except OSError:
        return None


def load_profile(deps: Any, cid: str) -> dict[str, Any]:
    """profiles/<cid>.json: {profile, roofline, diagnosis} ({} when the candidate was not profiled)."""
    return stored_profile(deps.rundir, cid) or {}


# ---------------------------------------------------------------- profile evidence
def profile_evidence(profile: Any, min_bytes: float | None = None) -> list[str]:
    """What a coder and a critic need from a profile, as `metric = value` lines: throughputs, the warp stall
    mix, sectors per request, DRAM bytes against the task's minimum, occupancy and its limiter, waves."""
    prof = profile if isinstance(profile, ProfileResult) else ProfileResult.model_validate(profile or {"available": False})
    k = prof.dominant() if prof.available else None
    if k is None:
        return []
    pct = lambda v: "n/a" if v is None else f"{v:.1f}%"  # noqa: E731
    out = []
    if prof.n_kernels > 1:
        out.append(f"kernels per solve() = {prof.n_kernels}: " + ", ".join(
            f"{kk.name.split('(')[0]} {kk.duration_ns / 1e3:.1f} us" for kk in prof.kernels if kk.duration_ns is not None))
    out.append(f"longest kernel `{k.name.split('(')[0]}`" + (f" = {k.duration_ns / 1e3:.1f} us" if k.duration_ns else "")
               + (f", grid {k.grid_size} blocks of {k.block_size} threads" if k.grid_size and k.block_size else ""))
    out.append(f"SM throughput = {pct(k.sm_throughput_pct)}, memory throughput = {pct(k.memory_throughput_pct)}, "
               f"DRAM throughput = {pct(k.dram_throughput_pct)} (of peak)")
    if k.stalls:
        out.append("warp stall mix = " + ", ".join(f"{s.reason} {s.share_pct:.0f}%" for s in k.stalls[:6]))
    for label, spr in (("load", k.load_sectors_per_request), ("store", k.store_sectors_per_request)):
        if spr is not None:
            out.append(f"global {label}s = {spr:.1f} sectors of 32 B per warp request (4 = a warp reads consecutive "
                       "floats, 16 = consecutive float4s, 32 = one sector per thread)")
    if k.dram_bytes is not None:
        line = f"DRAM bytes = {k.dram_bytes / 1e6:.4g} MB"
        if min_bytes:
            line += f" vs the task's minimum {min_bytes / 1e6:.4g} MB ({k.dram_bytes / min_bytes:.2f}x)"
        out.append(line)
    if k.achieved_occupancy_pct is not None or k.theoretical_occupancy_pct is not None:
        lim = f", limited by {k.occupancy_limiter}" if k.occupancy_limiter else ", nothing limits it"
        out.append(f"occupancy = {pct(k.achieved_occupancy_pct)} achieved, {pct(k.theoretical_occupancy_pct)} "
                   f"theoretical{lim}" + (" (blocks per SM allowed: " + ", ".join(
                       f"{r} {v:g}" for r, v in k.occupancy_limits.items()) + ")" if k.occupancy_limits else ""))
    if k.waves_per_sm is not None:
        out.append(f"waves per SM = {k.waves_per_sm:.2f}")
    if k.registers_per_thread is not None or k.shared_bytes_per_block is not None:
        regs = "n/a" if k.registers_per_thread is None else f"{k.registers_per_thread:g}"
        smem = "n/a" if k.shared_bytes_per_block is None else f"{k.shared_bytes_per_block:g} B"
        out.append(f"registers per thread = {regs}, shared memory per block = {smem}")
    if k.l1_hit_rate_pct is not None or k.l2_hit_rate_pct is not None:
        out.append(f"L1 hit rate = {pct(k.l1_hit_rate_pct)}, L2 hit rate = {pct(k.l2_hit_rate_pct)}")
    if k.bank_conflict_pct is not None:
        out.append(f"shared-memory bank conflicts = {k.bank_conflict_pct:.1f}% of wavefronts")
    if k.warp_efficiency_pct is not None:
        out.append(f"active threads per warp instruction = {k.threads_per_inst:.1f} of 32")
    if k.local_bytes:
        out.append(f"local-memory (spill) traffic = {k.local_bytes:.3g} bytes")
    return out


def roofline_text(roof: dict[str, Any] | None) -> str:
    """Every field of a roofline point, pct_of_sol and limiter included."""
    if not roof:
        return ""
    parts = [f"{k} = {v:.4g}" if isinstance(v, float) else f"{k} = {v}" for k, v in roof.items()
             if v is not None and k != "basis"]
    return "; ".join(parts) + (f"\n{roof['basis']}" if roof.get("basis") else "")   # the bound's one sentence


def _min_bytes(deps: Any, sizes: dict[str, int] | None) -> float | None:
    try:
        return deps.task.bytes_at(sizes or deps.task.benchmark)
    except Exception:  # noqa: BLE001
        return None


def profile_of(deps: Any, cid: str) -> tuple[Any, list[str], str]:
    """(one-line summary, evidence lines, why there is none) of a candidate's stored profile."""
    rec = load_profile(deps, cid)
    if not rec.get("profile"):
        return "", [], "not profiled"
    prof = ProfileResult.model_validate(rec["profile"])
    if not prof.available:
        return "", [], str(prof.reason or "profiling unavailable")
    return prof.summary(), profile_evidence(prof, _min_bytes(deps, prof.sizes)), ""


# ---------------------------------------------------------------- critiques
def critique_path(deps: Any, cid: str) -> Path:
    return Path(deps.rundir.root) / "critiques" / f"{cid}.json"


def save_critique(deps: Any, brief: CritiqueBrief) -> None:
    deps.rundir.write_text(f"critiques/{brief.candidate}.json", brief.model_dump_json(indent=1))


def load_critique(deps: Any, cid: str) -> CritiqueBrief | None:
    data = read_json(critique_path(deps, cid))
    try:
        return CritiqueBrief.model_validate(data) if data else None
    except ValueError:
        return None


# ---------------------------------------------------------------- the parent
def baseline_ms(deps: Any) -> float | None:
    res = deps.rundir.read_result(BASELINE)
    return res.timing.median_ms if res is not None and res.timing is not None else None


def parent_kernel(deps: Any, parent_id: str, *, features: Iterable[str] = (), median_ms: float | None = None) -> ParentKernel:
    """The kernel ``parent_id`` (a candidate id or "baseline") with everything measured about it."""
    res: EvalResult | None = deps.rundir.read_result(parent_id or BASELINE)
    timing = res.timing if res is not None else None
    rec = load_profile(deps, parent_id or BASELINE)
    roof = rec.get("roofline") or {}
    ms = timing.median_ms if timing is not None else median_ms
    base = baseline_ms(deps)
    sol = (timing.sol_ms if timing is not None and timing.sol_ms else None) or roof.get("attainable_ms")
    pct = (timing.pct_of_sol if timing is not None and timing.pct_of_sol else None) or roof.get("pct_of_sol")
    basis = (timing.sol_basis if timing is not None and timing.sol_ms else None) or roof.get("basis")
    if pct is None and sol and ms:
        pct = 100.0 * sol / ms
    summary, evidence, note = profile_of(deps, parent_id or BASELINE)
    diag = DiagnosisBrief.from_diagnosis(rec["diagnosis"]) if rec.get("diagnosis") else None
    return ParentKernel(
        candidate=parent_id or BASELINE, source=candidate_source(deps, parent_id) or "", median_ms=ms,
        speedup=(base / ms) if base and ms else None, baseline_label=deps.task.baseline_label, sol_ms=sol,
        pct_of_sol=pct, sol_basis=basis,
        resources=list(res.compile.kernels) if res is not None and res.compile is not None else [],
        profile=summary, profile_evidence=evidence, profile_note=note, diagnosis=diag,
        critique=load_critique(deps, parent_id or BASELINE), features=list(features),
        **build_lines(res.compile if res is not None else None))


def build_lines(compile_result: Any) -> dict[str, list[str]]:
    """What the coder cannot see of a build: the ptxas messages that cost speed and the SASS summary."""
    if compile_result is None:
        return {"build_notes": [], "sass": []}
    view = BuildView.of(compile_result)
    return {"build_notes": notable_warnings(view), "sass": sass_lines(view.sass)}


# ---------------------------------------------------------------- history and catalogue
def history_item(c: Candidate, base_ms: float | None) -> HistoryItem:
    return HistoryItem(candidate=c.id, round=c.round, features=c.features, status=c.status or "not_run",
                       median_ms=c.ms, speedup=(base_ms / c.ms) if base_ms and c.ms else None, note=short(c.note, 160),
                       parent=c.parent, repair_of=c.repair_of, cause=c.cause)


def past_history(deps: Any, before_round: int) -> list[HistoryItem]:
    """The attempts of the rounds before ``before_round``, read from rounds/r<N>/history.json."""
    items: list[HistoryItem] = []
    for r in range(before_round - 1, 0, -1):
        data = read_json(Path(deps.rundir.root) / "rounds" / f"r{r}" / "history.json") or []
        items = [HistoryItem(**h) for h in data] + items
        if len(items) >= MAX_HISTORY:
            break
    return items


def history(deps: Any, round_: int, current: Iterable[Candidate] = ()) -> list[HistoryItem]:
    """Earlier rounds' attempts and this round's evaluated ones, newest last."""
    base = baseline_ms(deps)
    now = [history_item(c, base) for c in current if c.status is not None]
    items = past_history(deps, round_) + now
    return items[-(MAX_HISTORY + len(now)):]


def passed_feature_sets(deps: Any, round_: int, current: Iterable[Candidate] = ()) -> set[frozenset[str]]:
    """The feature sets that passed in this run so far (earlier rounds and this one)."""
    out: set[frozenset[str]] = set()
    for r in range(1, round_):
        for h in read_json(Path(deps.rundir.root) / "rounds" / f"r{r}" / "history.json") or []:
            if h.get("status") in PASSED:
                out.add(frozenset(h.get("features") or []))
    out |= {frozenset(c.features) for c in current if c.status in PASSED}
    return out


def task_catalogue(deps: Any) -> list[Any]:
    """The catalogue features that apply to this task on this GPU (family, bound, tolerance, dtypes, arch)."""
    try:
        return applicable(deps.catalogue, arch=deps.arch, **_filters(task_filters(deps.task)))
    except Exception:  # noqa: BLE001 - a malformed arch or task: the whole catalogue rather than none
        return list(deps.catalogue)


def _filters(f: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in f.items() if k in ("category", "bound", "tolerance", "float_inputs")}


def feature_briefs(deps: Any, ids: Iterable[str], refinements: dict[str, str] | None = None) -> list[FeatureBrief]:
    """The assigned features as the coder reads them; ``refinements``: feature id -> how a feature the parent
    already uses is to be refined (the coder is told it is there and what to change)."""
    idx = {f.id: f for f in deps.catalogue}
    refine = refinements or {}
    return [FeatureBrief.from_feature(idx[i]).model_copy(update={"refinement": refine.get(i, "")})
            for i in ids if i in idx]


def plan_of(deps: Any, round_: int) -> dict[str, Any]:
    """rounds/r<N>/plan.json: {by, rationale, candidates: {cid: {features, idea}}}."""
    return read_json(Path(deps.rundir.root) / "rounds" / f"r{round_}" / "plan.json") or {}


def idea_of(deps: Any, round_: int, slot: int) -> str:
    return str(((plan_of(deps, round_).get("candidates") or {}).get(candidate_id(round_, slot)) or {}).get("idea") or "")


def write_json(deps: Any, rel: str, data: Any) -> None:
    deps.rundir.write_text(rel, json.dumps(data, indent=1))

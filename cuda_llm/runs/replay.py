"""Recorded runs shipped with the package, installed as new runs that say they are replays.

`cuda-llm demo` copies a recorded run folder (cuda_llm/runs/recorded/<name>/, made by
benchmarks/record_demo.py from a run on a GPU) into --runs-dir under a new id, so that `runs`, `report`,
`show`, `trace` and `export` can be tried on a machine with no GPU and no endpoint. The copy's config.json
gets a ``replay`` entry (what was recorded, on which GPU, where each figure comes from), and every view
shows ``replay_line`` with the run: nothing in such a run was measured on the machine that shows it.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path
from typing import Any
from cuda_llm.runs.rundir import RunDir, new_run_id

RECORDED_DIR = Path(__file__).resolve().parent / "recorded"
RECORDING_FILE = "recording.json"    # in a recorded folder: what it is and where its figures come from
REPLAY_KEY = "replay"                # in an installed run's config.json
DEFAULT_RECORDING = "conv2d"   # a real H100 run (benchmarks/agent_bench.py); "softmax" is assembled from recorded figures
DEMOS_ENV = "CUDA_LLM_DEMOS"   # more recorded run folders (or folders of them), os.pathsep-separated
ROLES = ("planner", "coder", "critic")


class RecordingError(RuntimeError):
    """A recorded run that is missing or incomplete (a broken installation)."""


def recording_dirs() -> dict[str, Path]:
    """Every recorded run by name: the ones shipped (cuda_llm/runs/recorded/<name>/, where a new recording is
    dropped in) and those $CUDA_LLM_DEMOS names (a recorded folder, or a folder of them; a later one of the
    same name wins)."""
    found: dict[str, Path] = {}
    places = [RECORDED_DIR] + [Path(p).expanduser() for p in os.environ.get(DEMOS_ENV, "").split(os.pathsep) if p]
    for place in places:
        if (place / RECORDING_FILE).is_file():
            found[place.name] = place
        elif place.is_dir():
            found.update({p.name: p for p in sorted(place.iterdir()) if (p / RECORDING_FILE).is_file()})
    return found


def recordings() -> list[str]:
    """The names of the recorded runs this installation can install."""
    return sorted(recording_dirs())


def find_recording(name: str) -> Path:
    """The folder of recorded run ``name`` (a name, or the path of a recorded folder); RecordingError naming
    the known ones otherwise."""
    path = Path(name).expanduser()
    if (path / RECORDING_FILE).is_file():
        return path
    found = recording_dirs().get(name)
    if found is None:
        raise RecordingError(f"no recorded run {name!r} (recorded runs: {', '.join(recordings()) or 'none'}; "
                             f"or give the path of a recorded run folder)")
    return found


def roles(folder: Path) -> dict[str, str]:
    """Who played each role in a recorded run: its recording.json's ``roles`` where it says (the provider
    alone cannot tell a model answering prompt files from a person), else the run's configured providers."""
    meta = json.loads((folder / RECORDING_FILE).read_text())
    said = meta.get("roles") or {}
    try:
        llm = json.loads((folder / "config.json").read_text()).get("llm") or {}
    except (OSError, ValueError):
        llm = {}
    out = {}
    for role in ROLES:
        if said.get(role):
            out[role] = str(said[role])
            continue
        cfg = llm.get(role) or {}
        provider = cfg.get("provider") or "llm"
        out[role] = {"rules": "rules", "manual": "manual (answer files)"}.get(
            provider, f"model {cfg.get('model')}" if cfg.get("model") else "model")
    return out


def roles_text(folder: Path) -> str:
    """'planner: rules, coder: model, critic: rules'."""
    return ", ".join(f"{role}: {who}" for role, who in roles(folder).items())


def recording_summary(folder: Path) -> str:
    return str(json.loads((folder / RECORDING_FILE).read_text()).get("summary") or "")


def replay_text(replay: dict[str, Any] | None) -> str:
    """One line that says a run is a replay and of what ('' for a run measured here)."""
    if not replay:
        return ""
    device = replay.get("device") or "another machine"
    kind = "figures recorded" if replay.get("kind") == "replayed figures" else "a run recorded"
    return (f"REPLAY of {kind} on {device} (`cuda-llm demo`): nothing here was measured on this machine; "
            f"where each figure comes from: {RECORDING_FILE} in the run folder")


def replay_of(rundir: Any) -> dict[str, Any] | None:
    """The run's replay entry, or None for a run of its own (or one whose config cannot be read)."""
    try:
        value = rundir.load_config().get(REPLAY_KEY)
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def replay_line(rundir: Any) -> str:
    """``replay_text`` of a run folder."""
    return replay_text(replay_of(rundir))


def installed_copy(runs_dir: Path, name: str) -> Any:
    """The newest run in ``runs_dir`` that is a copy of recorded run ``name``, or None. A copy is found by
    the recorded run's id in its replay entry, so copies installed before the entry named the recording
    count too."""
    try:
        folder = find_recording(name)
    except RecordingError:
        return None
    meta_path, name = folder / RECORDING_FILE, folder.name
    runs_dir = Path(runs_dir)
    if not runs_dir.is_dir():
        return None
    recorded_id = json.loads(meta_path.read_text()).get("run_id")
    for root in sorted((p for p in runs_dir.iterdir() if (p / "config.json").is_file()), reverse=True):
        replay = replay_of(RunDir(root))
        if replay and (replay.get("recording") == name or (recorded_id and replay.get("run_id") == recorded_id)):
            return RunDir(root)
    return None


def install(runs_dir: Path, name: str = DEFAULT_RECORDING) -> Any:
    """Copy recorded run ``name`` into ``runs_dir`` as a new run (a new id ending in -replay-XXXX) marked as a
    replay; returns its RunDir. The files get this user's umask, like any run's."""
    src = find_recording(name)
    name = src.name
    meta = json.loads((src / RECORDING_FILE).read_text())
    config = json.loads((src / "config.json").read_text())
    runs_dir = Path(runs_dir)
    runs_dir.mkdir(parents=True, exist_ok=True)
    for _ in range(20):
        root = runs_dir / new_run_id(f"{config.get('task') or name}-replay")
        if not root.exists():
            break
    shutil.copytree(src, root, copy_function=shutil.copyfile)
    rundir = RunDir(root)
    _retarget_paths(root, str(meta.get("root") or ""))
    _retarget_checkpoint(rundir.checkpoint_path, rundir.run_id)
    config[REPLAY_KEY] = {k: meta.get(k) for k in ("kind", "summary", "device", "run_id", "sources", "not_recorded")}
    config[REPLAY_KEY]["recording"] = name
    config.setdefault("options", {})["runs_dir"] = str(runs_dir)
    rundir.save_config(config)
    return rundir


def _retarget_checkpoint(db: Path, run_id: str) -> None:
    """The recorded checkpoint under the new run's id (LangGraph keys a run's checkpoints by thread id)."""
    con = sqlite3.connect(db)
    try:
        con.execute("UPDATE checkpoints SET thread_id = ?", (run_id,))
        con.execute("UPDATE writes SET thread_id = ?", (run_id,))
        con.commit()
    except sqlite3.DatabaseError as exc:
        raise RecordingError(f"the recorded checkpoint {db} cannot be read: {exc}") from None
    finally:
        con.close()


def _retarget_paths(root: Path, old_root: str) -> None:
    """Paths into the recorded run's folder, in its text files, as paths into the new one."""
    if not old_root:
        return
    for f in root.rglob("*"):
        if f.is_file() and f.suffix in (".json", ".jsonl", ".md", ".log"):
            text = f.read_text()
            if old_root in text:
                f.write_text(text.replace(old_root, str(root)))

"""Write the public corpus's labelled .cu files from local git mirrors of their repositories.

The kernels are other people's code, so the repository keeps only where each one lives (repository,
commit, path, line ranges), what was added so it compiles alone, and its labels (manifest.toml). This
script rebuilds `tune/*.cu` and `heldout/*.cu` in the format of tests/detector_corpus (a `// features:`
line first) from mirrors laid out as `<mirror>/<owner>+<name>/repo` (bare git directories), and checks
that every kernel's half follows the split rule in README.md.

    python tests/detector_corpus_public/materialize.py [--mirror /work/.mirror] [--out DIR]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tomllib
from pathlib import Path

from pydantic import BaseModel

HERE = Path(__file__).parent
HALVES = ("tune", "heldout")
# Each held-out half is retired into the tuning data once read and tuned on: batch 1's after one scoring,
# batches 2-4's after their readings of 2026-11-25, batches 5 and 6's after theirs of 2026-11-26 (README.md); the
# held-out set is the heldout half of the batches from this one on.
FIRST_HELD_OUT_BATCH = 7


class Part(BaseModel):
    path: str
    lines: list[tuple[int, int]]        # 1-based, inclusive


class Entry(BaseModel):
    name: str
    kind: str
    half: str
    repo: str
    commit: str
    licence: str
    parts: list[Part]
    prelude: str = ""
    postlude: str = ""
    edits: str = ""
    arch: str = ""
    batch: int = 1                      # kernels added later form a new batch, split on their own
    labels: list[str]
    case: str


def load_manifest(path: Path = HERE / "manifest.toml") -> list[Entry]:
    return [Entry(**k) for k in tomllib.loads(path.read_text())["kernel"]]


def split_rule(entries: list[Entry]) -> dict[str, str]:
    """Within a batch, sorted by (kind, name), the kernels alternate tune, heldout, tune, ... along the whole
    list, so every kind is split as evenly as it can be and the halves differ by at most one kernel; a later
    batch never moves a kernel of an earlier one (README.md)."""
    halves = {}
    for batch in sorted({e.batch for e in entries}):
        order = sorted((e.kind, e.name) for e in entries if e.batch == batch)
        halves.update({name: HALVES[i % 2] for i, (_, name) in enumerate(order)})
    return halves


def scored_as(entry: Entry) -> str:
    """Which table the benchmark scores a kernel in: "heldout" for the heldout half of a batch still held
    out, "tune" for everything else (a retired batch counts whole as tuning data)."""
    return "heldout" if entry.half == "heldout" and entry.batch >= FIRST_HELD_OUT_BATCH else "tune"


def check(entries: list[Entry]) -> None:
    names = [e.name for e in entries]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        raise SystemExit(f"manifest.toml: duplicate names {sorted(dupes)}")
    rule = split_rule(entries)
    wrong = [e.name for e in entries if e.half != rule[e.name]]
    if wrong:
        raise SystemExit(f"manifest.toml: half does not follow the split rule for {wrong}")


def source_text(entry: Entry, mirror: Path) -> str:
    git_dir = mirror / entry.repo.replace("/", "+") / "repo"
    chunks = []
    for part in entry.parts:
        proc = subprocess.run(["git", "--git-dir", str(git_dir), "show", f"{entry.commit}:{part.path}"],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"{entry.name}: cannot read {entry.repo}@{entry.commit[:12]}:{part.path} from "
                             f"{git_dir} ({proc.stderr.strip()}); fetch the repository first")
        lines = proc.stdout.splitlines()
        for a, b in part.lines:
            if not 1 <= a <= b <= len(lines):
                raise SystemExit(f"{entry.name}: lines {a}-{b} outside {part.path} ({len(lines)} lines)")
            chunks.append("\n".join(lines[a - 1:b]))
    return "\n".join(chunks)


def render(entry: Entry, body: str) -> str:
    ranges = "; ".join(f"{p.path}:" + ",".join(f"{a}-{b}" for a, b in p.lines) for p in entry.parts)
    head = [f"// features: {', '.join(entry.labels) if entry.labels else 'none'}"]
    if entry.arch:
        head.append(f"// arch: {entry.arch}")
    head += [f"// case: {entry.case}",
             f"// source: https://github.com/{entry.repo} at {entry.commit}, {ranges} ({entry.licence})",
             f"// edits: {entry.edits or 'none: the lines as they are'}"]
    return "\n".join(head + [entry.prelude.rstrip("\n"), body, entry.postlude.rstrip("\n")]).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mirror", type=Path, default=Path("/work/.mirror"))
    ap.add_argument("--out", type=Path, default=HERE)
    args = ap.parse_args(argv)
    entries = load_manifest()
    check(entries)
    for half in HALVES:
        (args.out / half).mkdir(parents=True, exist_ok=True)
    for e in entries:
        (args.out / e.half / f"{e.name}.cu").write_text(render(e, source_text(e, args.mirror)))
    # a kernel renamed, dropped or moved to the other half leaves its old file: remove it, else it is scored twice
    wanted = {(e.half, f"{e.name}.cu") for e in entries}
    stale = [f for half in HALVES for f in (args.out / half).glob("*.cu") if (half, f.name) not in wanted]
    for f in stale:
        f.unlink()
    print(f"wrote {len(entries)} kernels under {args.out}/{{tune,heldout}}"
          + (f", removed {len(stale)} stale" if stale else ""), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The ``manual`` provider: a person or another agent plays a role by answering prompt files.

When a manual role is asked something, the run writes the prompt to ``runs/<id>/pending/<name>.md`` and
stops the graph with LangGraph's ``interrupt``: the step is checkpointed (the other coders of the round
finish and are kept), the run ends "waiting", and the message says where the answer goes. The answer is
``runs/<id>/answers/<name>.md`` (written by hand, or by ``cuda-llm answer RUN NAME FILE``);
``cuda-llm resume RUN`` then re-runs the interrupted steps, which find their answers and go on. Names
follow ``exchange_name``: the role and the candidate (``coder-r1c0``), or the round for the planner
(``planner-r1``); a later turn of the same conversation (a compile fix, a correction) adds its number
(``coder-r1c0-2``). Answers of a planner or critic are the JSON object their prompt describes.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Sequence

from langchain_core.messages import AIMessage, BaseMessage
from pydantic import BaseModel

from cuda_llm.runs.llm_cache import current_call_label
from cuda_llm.paths import atomic_write
from cuda_llm.runs.rundir import exchange_name, render_messages, turn_of

PENDING = "pending"
ANSWERS = "answers"
_NAME = re.compile(r"^[a-z]+-[A-Za-z0-9_.]+(-\d+)?$")


class PendingPrompt(BaseModel):
    """One prompt waiting for its answer."""

    name: str            # e.g. coder-r1c0
    role: str
    prompt: Path         # pending/<name>.md
    answer: Path         # answers/<name>.md: where the answer goes

    def instructions(self, run_id: str) -> str:
        return (f"{self.name}: read {self.prompt}, write the answer to {self.answer} "
                f"(or `cuda-llm answer {run_id} {self.name} FILE`)")


def pending_path(root: Path, name: str) -> Path:
    return Path(root) / PENDING / f"{name}.md"


def answer_path(root: Path, name: str) -> Path:
    return Path(root) / ANSWERS / f"{name}.md"


def check_name(name: str) -> str:
    if not _NAME.match(name or ""):
        raise ValueError(f"{name!r} is not the name of a prompt (role-candidate, e.g. coder-r1c0 or planner-r2)")
    return name


def _header(role: str, name: str, run_id: str, answer: Path) -> str:
    what = {"coder": "one complete CUDA source file in a ```cuda fenced block (a few sentences of plan before it are fine)",
            "planner": "the JSON object described at the end of the system message",
            "critic": "the JSON object described at the end of the system message"}.get(role, "the answer")
    return (f"# Pending: {name}\n\nYou are playing the {role} of run {run_id}. Read the conversation below and "
            f"answer its last message with {what}.\nWrite the answer to `{answer}` (or run "
            f"`cuda-llm answer {run_id} {name} FILE`), then continue the run with `cuda-llm resume {run_id}`.\n\n---\n\n")


class ManualChatModel:
    """A chat model whose answers are files: ``invoke`` returns ``answers/<name>.md`` when it exists, else
    writes ``pending/<name>.md`` and interrupts the graph. Must be called inside a graph node with a
    checkpointer (what ``interrupt`` needs); structured output goes through the plain-text JSON path."""

    def __init__(self, role: str, rundir: Any):
        self.role = role
        self.rundir = rundir
        self.model_name = f"manual-{role}"

    def _name(self, messages: Sequence[BaseMessage]) -> str:
        label = current_call_label() or "call"
        return exchange_name(self.role, label, turn_of(messages))

    def invoke(self, messages: Sequence[BaseMessage], config: Any = None, **kwargs: Any) -> AIMessage:
        # local: `cuda-llm --help` loads this module; langgraph is needed only inside a run
        from langgraph.types import interrupt

        messages = list(messages)
        name = self._name(messages)
        root = Path(self.rundir.root)
        answer = answer_path(root, name)
        if answer.is_file():
            text = answer.read_text()
            pending_path(root, name).unlink(missing_ok=True)
            return AIMessage(content=text, response_metadata={"model_name": self.model_name, "manual": name})
        prompt = pending_path(root, name)
        atomic_write(prompt, _header(self.role, name, self.rundir.run_id, answer) + render_messages(messages))
        interrupt({"role": self.role, "name": name, "prompt": str(prompt), "answer": str(answer)})
        raise RuntimeError("interrupt() returned without a resume value")  # pragma: no cover - interrupt raises

    def with_structured_output(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("a manual role answers in text; the JSON is read from it")


def pending_prompts(root: Path) -> list[PendingPrompt]:
    """The prompts of a run still waiting for an answer (a pending file without its answer file)."""
    folder = Path(root) / PENDING
    out = []
    for p in sorted(folder.glob("*.md")) if folder.is_dir() else []:
        name = p.stem
        if not _NAME.match(name):
            continue
        ans = answer_path(root, name)
        if not ans.is_file():
            out.append(PendingPrompt(name=name, role=name.split("-", 1)[0], prompt=p, answer=ans))
    return out


def write_answer(root: Path, name: str, text: str) -> Path:
    """Store ``text`` as the answer to pending prompt ``name`` (refusing names that are not pending)."""
    check_name(name)
    if not pending_path(root, name).is_file():
        waiting = [p.name for p in pending_prompts(root)]
        hint = f"waiting: {', '.join(waiting)}" if waiting else "nothing is waiting for an answer"
        raise FileNotFoundError(f"no pending prompt {name!r} in {root} ({hint})")
    if not text.strip():
        raise ValueError("the answer is empty")
    return atomic_write(answer_path(root, name), text if text.endswith("\n") else text + "\n")

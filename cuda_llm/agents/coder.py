"""The coder: writes one complete candidate .cu file, or repairs a failed one."""

from __future__ import annotations

import re
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, ConfigDict, Field

from cuda_llm.agents.context import (
    HARNESS_RULES, MAX_SOURCE_CHARS, BestKernel, FeatureBrief, HistoryItem, TaskBrief, cap, render_device,
    render_history,
)
from cuda_llm.agents.errors import CodeExtractionError, LLMAnswerError, LLMCallError, snippet
from cuda_llm.agents.prompts import render
from cuda_llm.agents.structured import invoke_model
from cuda_llm.agents.textutil import fenced_blocks, message_text, strip_thinking
from cuda_llm.agents.usage import TokenUsage, usage_of
from cuda_llm.results import DeviceInfo

CUDA_TAGS = {"cuda", "cu", "cuh", "cpp", "c++", "cxx", "cc", "c", "h", "hpp"}
MAX_REPAIR_ERRORS_CHARS = 3000
_NOT_CUDA = {
    "python": re.compile(r"^\s*(import |from \S+ import |def \w+\(.*\):)", re.M),
}


class RepairInfo(BaseModel):
    """A failed candidate and why it failed (condensed compiler errors or the failing test case)."""

    failed_source: str
    errors: str


class CoderContext(BaseModel):
    task: TaskBrief
    device: DeviceInfo | None = None
    candidate: str = "candidate"
    features: list[FeatureBrief] = Field(default_factory=list)
    idea: str = ""
    best: BestKernel | None = None  # the kernel to improve on (the parent)
    history: list[HistoryItem] = Field(default_factory=list)
    repair: RepairInfo | None = None
    inspirations: list[BestKernel] = Field(default_factory=list)  # other approaches that scored well


class CoderAnswer(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)
    source: str
    raw_text: str
    usage: TokenUsage
    attempts: int
    messages: list[BaseMessage]  # everything sent and received, for the run's prompt/response files


def build_coder_messages(ctx: CoderContext) -> list[BaseMessage]:
    """System rules + either the improvement request or, in repair mode, the failed source and its errors."""
    system = render("coder_system", rules=HARNESS_RULES, signature=ctx.task.signature)
    feats = ", ".join(f.id for f in ctx.features) or "none"
    if ctx.repair is not None:
        user = render(
            "coder_repair", task=ctx.task.render(), device=render_device(ctx.device), candidate=ctx.candidate,
            features=feats, errors=cap(ctx.repair.errors.strip(), MAX_REPAIR_ERRORS_CHARS, "errors"),
            failed_source=cap(ctx.repair.failed_source.strip(), MAX_SOURCE_CHARS, "source"),
            history=render_history(ctx.history),
        )
    else:
        best = ctx.best.render() if ctx.best else "Current best: none yet; write a fast first version."
        best += "".join("\n\n" + k.render() for k in ctx.inspirations)
        user = render(
            "coder_user", task=ctx.task.render(), device=render_device(ctx.device), best=best,
            features="\n".join(f.render() for f in ctx.features) or "(free choice: pick what the evidence suggests)",
            idea=ctx.idea.strip() or "(none given)", history=render_history(ctx.history), candidate=ctx.candidate,
        )
    return [SystemMessage(content=system), HumanMessage(content=user)]


def _defines_entry(code: str, entry: str) -> bool:
    if not re.search(r'extern\s+"C"', code):
        return False
    return re.search(rf"\b{re.escape(entry)}\s*\(", code) is not None


def extract_cuda(text: str, entry: str = "solve") -> str:
    """The candidate source in an answer: the longest fenced C/C++/CUDA block defining the entry point
    (the last one on ties). Raises CodeExtractionError saying exactly what was wrong."""
    text = strip_thinking(text or "")
    if not text.strip():
        raise CodeExtractionError("the answer was empty", raw_text=text)
    blocks = fenced_blocks(text)
    if not blocks:
        if text.count("```") % 2 == 1:
            raise CodeExtractionError("the ``` code block is not closed (was the answer cut off? keep it shorter)", raw_text=text)
        if _defines_entry(text, entry) and "```" not in text:
            return text.strip() + "\n"  # a bare source file without fences
        raise CodeExtractionError("no ```cuda fenced code block found in the answer", raw_text=text)
    code_blocks = [(lang, b) for lang, b in blocks if lang in CUDA_TAGS or lang == ""]
    if not code_blocks:
        langs = sorted({lang for lang, _ in blocks})
        raise CodeExtractionError(f"the code block is {', '.join(langs)}, not CUDA C++ (use a ```cuda block)", raw_text=text)
    with_entry = [(lang, b) for lang, b in code_blocks if _defines_entry(b, entry)]
    if not with_entry:
        for lang, b in code_blocks:
            for what, pat in _NOT_CUDA.items():
                if pat.search(b) and "__global__" not in b:
                    raise CodeExtractionError(f"the code block is {what}, not CUDA C++", raw_text=text)
        if any(not b.strip() for _, b in code_blocks) and all(not b.strip() for _, b in code_blocks):
            raise CodeExtractionError("the code block is empty", raw_text=text)
        if any(re.search(rf"\b{re.escape(entry)}\s*\(", b) for _, b in code_blocks):
            raise CodeExtractionError(f'`{entry}` is not declared extern "C" (the harness looks it up by its C name)', raw_text=text)
        raise CodeExtractionError(f'no code block defines the entry point `extern "C" void {entry}(...)`', raw_text=text)
    best_len = max(len(b) for _, b in with_entry)
    source = [b for _, b in with_entry if len(b) == best_len][-1]
    return source.strip() + "\n"


def write_kernel(model: Any, ctx: CoderContext, *, retries: int = 2) -> CoderAnswer:
    """Ask for the candidate; an unusable answer is sent back with the reason, up to ``retries`` times.

    Raises LLMAnswerError after that (with the usage spent), LLMCallError when the endpoint fails.
    """
    return continue_kernel(model, build_coder_messages(ctx), ctx, retries=retries)


def continue_kernel(model: Any, messages: list[BaseMessage], ctx: CoderContext, *, retries: int = 2) -> CoderAnswer:
    """Ask for a candidate in a conversation whose last message is the request (the first prompt, or a
    refinement turn after the coder's earlier answers); same retries and errors as write_kernel."""
    msgs = list(messages)
    usage = TokenUsage()
    raw = ""
    reason = ""
    for attempt in range(1, retries + 2):
        ai = invoke_model(model, msgs)
        usage = usage + usage_of(ai)
        raw = message_text(ai)
        msgs.append(AIMessage(content=raw or " "))
        try:
            source = extract_cuda(raw, ctx.task.entry)
        except CodeExtractionError as exc:
            reason = exc.reason
            msgs.append(HumanMessage(content=render("coder_retry", reason=reason, signature=ctx.task.signature)))
            continue
        return CoderAnswer(source=source, raw_text=raw, usage=usage, attempts=attempt, messages=msgs)
    raise LLMAnswerError(
        f"coder ({ctx.candidate}): no usable CUDA source after {retries + 1} attempt(s); last problem: {reason}. "
        f"The answer began: {snippet(raw)!r}",
        raw_text=raw, usage=usage, attempts=retries + 1,
    )


__all__ = ["CoderContext", "CoderAnswer", "RepairInfo", "build_coder_messages", "extract_cuda", "write_kernel", "continue_kernel",
           "CodeExtractionError", "LLMCallError"]

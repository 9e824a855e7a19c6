"""The coder: writes one complete candidate .cu file, or repairs a failed one.

Inside one coder task the answer may get compile-fix turns: the caller's ``check`` (the graph compiles
through its Evaluator seam; nothing here runs a compiler) returns the build errors, and they go back to
the model in the same conversation, up to ``fix_turns`` times, before the candidate is evaluated.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, ConfigDict, Field

from cuda_llm.agents.budget import Section, render_budgeted
from cuda_llm.agents.context import (
    HARNESS_RULES, BuildBrief, FeatureBrief, HistoryItem, ParentKernel, TaskBrief, render_device, render_history,
)
from cuda_llm.agents.errors import CodeExtractionError, LLMAnswerError, LLMCallError, snippet
from cuda_llm.agents.prompts import render
from cuda_llm.agents.settings import DEFAULT_PROMPT_BUDGET
from cuda_llm.agents.structured import invoke_model
from cuda_llm.agents.textutil import fenced_blocks, message_text, strip_thinking
from cuda_llm.agents.usage import TokenUsage, usage_of
from cuda_llm.results import DeviceInfo

CUDA_TAGS = {"cuda", "cu", "cuh", "cpp", "c++", "cxx", "cc", "c", "h", "hpp"}
_NOT_CUDA = {
    "python": re.compile(r"^\s*(import |from \S+ import |def \w+\(.*\):)", re.M),
}
BuildCheck = Callable[[str], "str | None"]   # source -> build errors (None: it builds)


class RepairInfo(BaseModel):
    """A failed candidate and why it failed (failure_text.describe(result, full=True): said once)."""

    failed_candidate: str = "candidate"
    failed_source: str
    errors: str


class CoderContext(BaseModel):
    model_config = ConfigDict(extra="forbid")
    task: TaskBrief
    device: DeviceInfo | None = None
    build: BuildBrief | None = None
    candidate: str = "candidate"
    features: list[FeatureBrief] = Field(default_factory=list)
    free: bool = False                    # a free slot: no assigned features, the coder's own best next step
    idea: str = ""                        # the planner's whole idea for this candidate
    parent: ParentKernel | None = None    # the kernel to improve on (in a repair: the working reference)
    history: list[HistoryItem] = Field(default_factory=list)
    repair: RepairInfo | None = None
    budget_chars: int = DEFAULT_PROMPT_BUDGET["coder"]
    inspirations: list[ParentKernel] = Field(default_factory=list)  # other approaches that scored well


class CoderAnswer(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)
    source: str
    raw_text: str
    usage: TokenUsage
    attempts: int
    messages: list[BaseMessage]  # everything sent and received, for the run's prompt/response files
    fix_turns: int = 0           # compile-fix turns used
    build_errors: str | None = None   # what the last check said, when the fix turns ran out


FREE_HEAD = "No features are assigned to this candidate: it is free."
FREE_TEXT = ("Read the evidence above (the parent's profile and diagnosis, the critique, what was tried and how it "
             "ended) and take the step you judge will make the parent fastest: any technique or combination, in the "
             "catalogue or not, a different algorithm included. The features your code uses are detected and "
             "credited afterwards.")
FEATURES_HEAD = "Features to apply in this candidate, and how:"


def _feature_sections(ctx: CoderContext) -> list[Section]:
    if ctx.free and not ctx.features:
        return [Section(name="features", text=FREE_TEXT, priority=60, label="what a free candidate does"),
                Section(name="exemplars", text="", priority=20, label="the features' exemplars")]
    how = "\n".join(f.render(with_exemplar=False) for f in ctx.features) or \
        "(free choice: pick what the evidence suggests)"
    exemplars = "\n\n".join(x for x in (f.render_exemplar() for f in ctx.features) if x) or "(none)"
    return [Section(name="features", text=how, priority=60, label="how to apply the features"),
            Section(name="exemplars", text=exemplars, priority=20, label="the features' exemplars")]


def build_coder_messages(ctx: CoderContext) -> list[BaseMessage]:
    """System rules + either the improvement request or, in repair mode, the failed source and its errors."""
    system = render("coder_system", rules=HARNESS_RULES, signature=ctx.task.signature)
    parent = ctx.parent
    fixed = dict(task=ctx.task.render(), device=render_device(ctx.device),
                 build=ctx.build.render() if ctx.build else "", candidate=ctx.candidate)
    idea = Section(name="idea", text=ctx.idea.strip() or "(none given)", priority=70, label="the planner's idea")
    if ctx.repair is not None:
        history = [h for h in ctx.history if h.candidate != ctx.repair.failed_candidate]   # its error is said once, below
        sections = [
            Section(name="history", text=render_history(history), priority=10, label="earlier attempts"),
            *_feature_sections(ctx), idea,
            Section(name="parent", text=parent.render_source() if parent else "(the naive baseline)", priority=40,
                    label="the parent's source"),
            Section(name="failed_source", text=ctx.repair.failed_source.strip(), priority=90, drop=False,
                    label="the failed source"),
        ]
        user, _ = render_budgeted("coder_repair", sections, ctx.budget_chars, **fixed,
                                  failed=ctx.repair.failed_candidate, errors=ctx.repair.errors.strip(),
                                  parent_id=parent.candidate if parent else "baseline",
                                  feature_ids=", ".join(f.id for f in ctx.features) or "none")
    else:
        sections = [
            Section(name="history", text=render_history(ctx.history), priority=10, label="earlier attempts"),
            *_feature_sections(ctx), idea,
            Section(name="evidence", text=parent.render_evidence() if parent else "(none)", priority=40,
                    label="the parent's profile and diagnosis"),
            Section(name="critique", text=parent.render_critique() if parent else "(none)", priority=50,
                    label="the critique of the parent"),
            Section(name="source", text=parent.render_source() if parent else "(none yet: write a fast first version)",
                    priority=80, drop=False, label="the parent's source"),
            Section(name="inspirations", priority=30, label="the inspiration kernels",
                    text="\n\n".join(k.render_head() + "\n" + k.render_source() for k in ctx.inspirations)),
        ]
        head = parent.render_head() if parent else "Parent: none yet; write a fast first version."
        free = ctx.free and not ctx.features
        user, _ = render_budgeted("coder_user", sections, ctx.budget_chars, **fixed, parent_head=head,
                                  features_head=FREE_HEAD if free else FEATURES_HEAD,
                                  ask="take the best next step you see" if free else "apply the features above")
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
        for _, b in code_blocks:
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


def write_kernel(model: Any, ctx: CoderContext, *, retries: int = 2, fix_turns: int = 0,
                 check: BuildCheck | None = None, call_kwargs: dict[str, Any] | None = None) -> CoderAnswer:
    """Ask for the candidate. An unusable answer is sent back with the reason (up to ``retries`` times); a
    source that ``check`` says does not build is sent back with its errors (up to ``fix_turns`` times),
    in the same conversation. ``call_kwargs`` go with every request (this candidate's temperature).

    Raises LLMAnswerError when no answer held a usable source (with the usage spent), LLMCallError when
    the endpoint fails. When the fix turns run out, the last source is returned with ``build_errors``.
    """
    return continue_kernel(model, build_coder_messages(ctx), ctx, retries=retries, fix_turns=fix_turns, check=check,
                           call_kwargs=call_kwargs)


def continue_kernel(model: Any, messages: list[BaseMessage], ctx: CoderContext, *, retries: int = 2,
                    fix_turns: int = 0, check: BuildCheck | None = None,
                    call_kwargs: dict[str, Any] | None = None) -> CoderAnswer:
    """Ask for a candidate in a conversation whose last message is the request (the first prompt, or a
    refinement turn after the coder's earlier answers); same retries, compile-fix turns and errors as
    write_kernel."""
    msgs = list(messages)
    usage = TokenUsage()
    raw = reason = ""
    attempts = bad = fixes = 0
    last: str | None = None
    errors: str | None = None
    while True:
        ai = invoke_model(model, msgs, **(call_kwargs or {}))
        attempts += 1
        usage = usage + usage_of(ai)
        raw = message_text(ai)
        msgs.append(AIMessage(content=raw or " "))
        try:
            source = extract_cuda(raw, ctx.task.entry)
        except CodeExtractionError as exc:
            reason, bad = exc.reason, bad + 1
            if bad > retries:
                break
            msgs.append(HumanMessage(content=render("coder_retry", reason=reason, signature=ctx.task.signature)))
            continue
        last, errors = source, None
        if check is not None and fixes < fix_turns:
            errors = check(source)
            if errors:
                fixes += 1
                msgs.append(HumanMessage(content=render("coder_fix", errors=errors.strip(),
                                                        turns_left=_turns(fix_turns - fixes))))
                continue
        return CoderAnswer(source=source, raw_text=raw, usage=usage, attempts=attempts, messages=msgs, fix_turns=fixes)
    if last is not None:   # a fix turn's answer was unusable: the last source stands, with its errors
        return CoderAnswer(source=last, raw_text=raw, usage=usage, attempts=attempts, messages=msgs, fix_turns=fixes,
                           build_errors=errors)
    raise LLMAnswerError(
        f"coder ({ctx.candidate}): no usable CUDA source after {attempts} attempt(s); last problem: {reason}. "
        f"The answer began: {snippet(raw)!r}",
        raw_text=raw, usage=usage, attempts=attempts,
    )


def _turns(n: int) -> str:
    if n <= 0:
        return "This was the last compile check: the next file is tested as it is."
    return f"{n} more compile check{'s' if n > 1 else ''} before the candidate is tested."


__all__ = ["CoderContext", "CoderAnswer", "RepairInfo", "build_coder_messages", "extract_cuda", "write_kernel", "continue_kernel",
           "CodeExtractionError", "LLMCallError"]

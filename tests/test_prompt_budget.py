"""Prompt budgets: the least important section goes first, a kernel is shortened last and never dropped,
and the prompt says what was left out."""

from __future__ import annotations

from cuda_llm.agents.budget import MAX_SOURCE_CHARS, Section, fit, omitted_note
from cuda_llm.agents.coder import CoderContext, build_coder_messages
from cuda_llm.agents.context import FeatureBrief, HistoryItem, ParentKernel, TaskBrief
from cuda_llm.tasks import load_task

TASK = TaskBrief.from_task(load_task("softmax"))


def sections() -> list[Section]:
    return [Section(name="history", text="h" * 1000, priority=10, label="earlier attempts"),
            Section(name="exemplars", text="e" * 1000, priority=20, label="the exemplars"),
            Section(name="source", text="s" * 3000, priority=80, drop=False, label="the source")]


def test_nothing_is_cut_when_it_fits():
    texts, omitted = fit(sections(), 5000)
    assert omitted == [] and texts["history"] == "h" * 1000 and omitted_note(omitted) == ""


def test_the_least_important_section_goes_first():
    texts, omitted = fit(sections(), 4100)
    assert texts["history"].startswith("(earlier attempts left out") and texts["exemplars"] == "e" * 1000
    assert omitted == ["earlier attempts (1,000 characters)"]
    texts, omitted = fit(sections(), 3200)
    assert texts["exemplars"].startswith("(the exemplars left out") and texts["source"] == "s" * 3000
    assert "Left out of this prompt to fit its size budget: earlier attempts" in omitted_note(omitted)


def test_a_section_that_must_stay_is_shortened_last_and_says_so():
    texts, omitted = fit(sections(), 2500)
    assert texts["source"].startswith("s" * 2000) and "source cut:" in texts["source"]
    assert len(texts["source"]) < 3000 and omitted[-1].startswith("the end of the source (cut after")


def test_a_60_kb_kernel_and_whole_exemplars_fit_the_coder_budget():
    kernel = "// a big kernel\n" + "x = x * 2.0f + 1.0f;\n" * (59_000 // 21)
    assert len(kernel) < MAX_SOURCE_CHARS
    exemplar = "__global__ void k(float4* p) {\n" + "  p[threadIdx.x].x += 1.0f;\n" * 200 + "}\n"
    feats = [FeatureBrief(id=f"f{i}", name=f"F{i}", how="do it", exemplar=exemplar) for i in range(3)]
    parent = ParentKernel(candidate="r3c1", source=kernel, median_ms=1.0)
    history = [HistoryItem(candidate=f"r1c{i}", status="ok", note="n" * 150) for i in range(8)]
    ctx = CoderContext(task=TASK, candidate="r4c0", features=feats, idea="i", parent=parent, history=history)
    text = build_coder_messages(ctx)[1].content
    assert kernel.strip() in text and text.count(exemplar.strip()) == 3 and "Left out" not in text
    # a small budget: history and exemplars go, the kernel is cut last, and the prompt says so
    small = build_coder_messages(ctx.model_copy(update={"budget_chars": 40_000}))[1].content
    assert len(small) <= 40_000
    assert "earlier attempts (" in small and "the features' exemplars (" in small and "Left out of this prompt" in small
    assert "source cut:" in small and "r4c0" in small and TASK.signature in small

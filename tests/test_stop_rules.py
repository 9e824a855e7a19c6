"""Stop rules that know speed of light (cuda_llm/graph/stop_rules.py): pure functions of numbers."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from cuda_llm.graph import stop_rules as sr
from cuda_llm.graph.state import Limits

BUDGET = Limits(max_rounds=20, time_budget_s=1e6, token_budget=10**9, plateau_rounds=3, reserve_s=0)


def stop(**kw):
    base = dict(round_=2, plateau_count=0, elapsed_s=1.0, tokens=1, budget=BUDGET)
    return sr.stop_after_round(**{**base, **kw})


def test_a_kernel_at_the_speed_of_light_target_stops_the_run():
    assert stop(best_pct_of_sol=95.0) == sr.SPEED_OF_LIGHT
    assert stop(best_pct_of_sol=94.9) is None
    assert stop(best_pct_of_sol=None) is None                   # no device peaks: unknown, never a stop
    lax = BUDGET.model_copy(update={"sol_target": 0.8})
    assert stop(best_pct_of_sol=81.0, budget=lax) == sr.SPEED_OF_LIGHT
    off = BUDGET.model_copy(update={"sol_target": None})
    assert stop(best_pct_of_sol=99.0, budget=off) is None
    # budgets come first: a spent token budget is the reason even at speed of light
    assert stop(best_pct_of_sol=99.0, tokens=10**9) == sr.TOKENS


@pytest.mark.parametrize("pct, patience", [(None, 3), (50.0, 3), (10.0, 6), (0.0, 6), (72.0, 2), (90.0, 1),
                                           (99.0, 1), (130.0, 1)])
def test_plateau_patience_grows_with_the_headroom_left(pct, patience):
    assert sr.plateau_patience(3, pct) == patience


def test_far_from_speed_of_light_flat_rounds_are_tolerated_longer():
    # three flat rounds end a run at 72% of speed of light, not one at 10%
    assert stop(plateau_count=2, best_pct_of_sol=72.0) == sr.PLATEAU
    assert stop(plateau_count=3, best_pct_of_sol=10.0) is None
    assert stop(plateau_count=5, best_pct_of_sol=10.0) is None
    assert stop(plateau_count=6, best_pct_of_sol=10.0) == sr.PLATEAU


def test_a_round_in_which_every_candidate_failed_is_not_flat():
    ref, n = sr.update_plateau(1.0, 2, 1.0, 0.02, round_passed=False)
    assert (ref, n) == (1.0, 2)                                 # the counter stays where it was
    ref, n = sr.update_plateau(1.0, 2, 1.0, 0.02, round_passed=True)
    assert (ref, n) == (1.0, 3)                                 # a flat round that ran counts
    assert sr.update_failed(0, False) == 1 and sr.update_failed(2, False) == 3 and sr.update_failed(2, True) == 0


def test_rounds_that_keep_failing_end_the_run():
    assert stop(failed_rounds=2) is None
    assert stop(failed_rounds=3) == sr.FAILING
    # speed of light is a better reason than failing rounds after it
    assert stop(failed_rounds=3, best_pct_of_sol=97.0) == sr.SPEED_OF_LIGHT


def test_every_reason_has_its_own_sentence_with_the_runs_numbers():
    reasons = [sr.PLATEAU, sr.MAX_ROUNDS, sr.TIME, sr.TOKENS, sr.SPEED_OF_LIGHT, sr.FAILING, sr.NO_DEVICE,
               sr.BASELINE_FAILED, sr.NO_CODE, sr.ENDPOINT_ERRORS, sr.SEED_FAILED, sr.WORKERS_LOST]
    texts = [sr.reason_text(r) for r in reasons]
    assert all(len(t.split()) >= 4 for t in texts), texts                  # a sentence, not a word
    assert len(set(texts)) == len(texts)                                    # each says something of its own
    assert all(r not in t for r, t in zip(reasons, texts) if "_" in r)      # never the code itself
    assert sr.reason_text("no_such_reason") == "" and sr.reason_text(None) == ""
    limits = SimpleNamespace(plateau_rounds=3, plateau_threshold=0.02, max_rounds=12)
    assert sr.reason_text(sr.PLATEAU, limits) == "the best latency did not improve by more than 2% for 3 rounds"
    assert sr.reason_text(sr.MAX_ROUNDS, limits) == "all 12 rounds were run"
    assert sr.reason_text(sr.PLATEAU) == "the best latency stopped improving"
    assert "speed-of-light" in sr.reason_text(sr.SPEED_OF_LIGHT) and "token" in sr.reason_text(sr.TOKENS)


def test_the_optimize_flags_for_speed_of_light_and_search(monkeypatch, capsys, tmp_path):
    import argparse

    from cuda_llm.cli import main
    from cuda_llm.commands.flags import parse_sol_target

    assert parse_sol_target("95%") == pytest.approx(0.95) and parse_sol_target("90") == pytest.approx(0.9)
    assert parse_sol_target("0.8") == 0.8 and parse_sol_target("off") is None and parse_sol_target("0") is None
    for bad in ("soon", "200%", "-1"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_sol_target(bad)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CUDA_LLM_MODEL", "m")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    for flag, words in (("--refine-turns", "'9' is not a number of turns: give 0 to 3"),
                        ("--inspirations", "'9' is not a number of kernels: give 0 to 2")):
        with pytest.raises(SystemExit) as exc:
            main(["optimize", "softmax", flag, "9"])
        assert exc.value.code == 2 and f"argument {flag}: {words}" in capsys.readouterr().err

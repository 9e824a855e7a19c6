"""LLM settings: flags over environment over cuda-llm.toml, per role, with errors that say what to set."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_llm.agents.errors import LLMConfigError
from cuda_llm.agents.settings import DEFAULT_MAX_RETRIES, PLACEHOLDER_API_KEY, load_settings


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "cuda-llm.toml"
    p.write_text(text)
    return p


def test_no_llm_configured_names_flags_variables_and_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no cuda-llm.toml here
    with pytest.raises(LLMConfigError) as exc:
        load_settings({}, env={})
    msg = str(exc.value)
    for word in ("--model", "--base-url", "OPENAI_API_KEY", "OPENAI_BASE_URL", "CUDA_LLM_MODEL", "cuda-llm.toml",
                 "planner, coder, critic"):
        assert word in msg, word


def test_precedence_flag_over_env_over_file(tmp_path):
    cfg = write(tmp_path, '[llm]\nmodel = "file-model"\nbase_url = "http://file:1/v1"\ntimeout_s = 30\n'
                          '[llm.critic]\nmodel = "file-critic"\n')
    env = {"CUDA_LLM_MODEL": "env-model", "OPENAI_BASE_URL": "http://env:2/v1"}
    s = load_settings({}, env=env, config_path=cfg)
    assert s.planner.model == "env-model" and s.planner.base_url == "http://env:2/v1"
    assert s.critic.model == "env-model"  # a general env value beats the file, role-specific or not
    assert s.planner.timeout_s == 30 and s.planner.max_retries == DEFAULT_MAX_RETRIES
    s = load_settings({"model": "flag-model", "critic_model": "flag-critic"}, env=env, config_path=cfg)
    assert (s.planner.model, s.coder.model, s.critic.model) == ("flag-model", "flag-model", "flag-critic")
    s = load_settings({}, env={**env, "CUDA_LLM_CODER_BASE_URL": "http://coder:3/v1"}, config_path=cfg)
    assert (s.coder.base_url, s.critic.base_url) == ("http://coder:3/v1", "http://env:2/v1")
    s = load_settings({}, env={}, config_path=cfg)
    assert (s.planner.model, s.critic.model) == ("file-model", "file-critic")
    assert s.coder.api_key == PLACEHOLDER_API_KEY  # local server: no key needed


def test_api_key_from_named_variable_and_never_in_redacted(tmp_path):
    cfg = write(tmp_path, '[llm]\nmodel = "gpt-x"\napi_key_env = "MY_KEY"\n')
    s = load_settings({}, env={"MY_KEY": "sk-secret"}, config_path=cfg)
    assert s.coder.api_key == "sk-secret"
    assert "sk-secret" not in repr(s) and "sk-secret" not in str(s.redacted())


def test_openai_without_key_says_what_to_set():
    with pytest.raises(LLMConfigError, match="OPENAI_API_KEY.*--base-url"):
        load_settings({"model": "gpt-x"}, env={})


@pytest.mark.parametrize("text,words", [
    ('[llm]\nmodel = "m"\napi_key = "sk"\n', ["unknown keys", "api_key_env"]),
    ('[llm]\nmodel = "m"\nbase_url = "http://h/v1"\ntimeout_s = "soon"\n', ["timeout_s must be a float"]),
    ('[llm]\nmodel = "m"\nbase_url = "http://h/v1"\nmax_retries = -1\n', ["max_retries must be 0 or more"]),
    ('[llm\nmodel = "m"\n', ["not valid TOML"]),
])
def test_bad_config_file_is_a_specific_error(tmp_path, text, words):
    cfg = write(tmp_path, text)
    with pytest.raises(LLMConfigError) as exc:
        load_settings({}, env={}, config_path=cfg)
    assert str(cfg) in str(exc.value)
    for w in words:
        assert w in str(exc.value)


def test_explicit_missing_config_file(tmp_path):
    with pytest.raises(LLMConfigError, match="config file not found"):
        load_settings({}, env={"CUDA_LLM_CONFIG": str(tmp_path / "nope.toml")})


def test_manual_and_rules_roles_need_no_model_and_no_key(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = load_settings({"coder_provider": "manual", "planner_provider": "rules", "critic_provider": "rules"}, env={})
    assert (s.planner.provider, s.coder.provider, s.critic.provider) == ("rules", "manual", "rules")
    assert s.endpoint_roles() == [] and s.coder.model is None
    # only the roles that call an endpoint need a model (and a key on api.openai.com)
    with pytest.raises(LLMConfigError, match="No LLM model configured for planner"):
        load_settings({"coder_provider": "manual", "critic_provider": "rules"}, env={})
    s = load_settings({"coder_provider": "manual", "model": "m", "base_url": "http://h/v1"}, env={})
    assert s.endpoint_roles() == ["planner", "critic"]


def test_the_coder_cannot_be_played_by_rules(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(LLMConfigError, match="coder cannot be played by rules"):
        load_settings({"provider": "rules"}, env={})
    with pytest.raises(LLMConfigError, match="not one of llm, manual, rules"):
        load_settings({"coder_provider": "human"}, env={})


def test_per_role_settings_from_flags_environment_and_file(tmp_path):
    cfg = write(tmp_path, '[llm]\nmodel = "m"\nbase_url = "http://h/v1"\nmax_tokens = 8000\nprompt_budget_chars = 90000\n'
                          '[llm.coder]\nprovider = "llm"\ntemperatures = [0.2, 0.7]\nreasoning_effort = "high"\n'
                          'extra_body = { top_k = 20 }\n'
                          '[llm.critic]\ntemperature = 0.1\nmax_tokens = 2000\n')
    s = load_settings({}, env={}, config_path=cfg)
    assert (s.planner.max_tokens, s.coder.max_tokens, s.critic.max_tokens) == (8000, 8000, 2000)
    assert s.coder.temperatures == [0.2, 0.7] and s.coder.reasoning_effort == "high"
    assert s.coder.extra_body == {"top_k": 20} and s.planner.extra_body is None
    assert s.critic.temperature == 0.1 and s.planner.temperature is None
    assert s.prompt_budget("coder") == 90000
    assert [s.coder.temperature_for(i) for i in range(3)] == [0.2, 0.7, 0.2]
    s = load_settings({"critic_temperature": 0.5, "coder_max_tokens": 123, "coder_temperatures": "1.0"},
                      env={"CUDA_LLM_PLANNER_TEMPERATURE": "0.3", "CUDA_LLM_MAX_TOKENS": "500"}, config_path=cfg)
    assert (s.planner.temperature, s.critic.temperature) == (0.3, 0.5)
    assert (s.planner.max_tokens, s.coder.max_tokens) == (500, 123) and s.coder.temperatures == [1.0]


@pytest.mark.parametrize("cli,words", [
    ({"extra_body": "{not json"}, ["extra_body must be a JSON object"]),
    ({"extra_body": "[1, 2]"}, ["must be a JSON object, got list"]),
    ({"coder_temperatures": "0.2,hot"}, ["each temperature must be a float"]),
    ({"coder_temperatures": "0.2,3"}, ["between 0 and 2"]),
    ({"max_tokens": 0}, ["max_tokens must be at least 1"]),
])
def test_bad_role_settings_are_specific_errors(tmp_path, monkeypatch, cli, words):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(LLMConfigError) as exc:
        load_settings({"model": "m", "base_url": "http://h/v1", **cli}, env={})
    for w in words:
        assert w in str(exc.value)

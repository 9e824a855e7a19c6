"""Who plays each role, and with which settings: CLI flags over environment variables over cuda-llm.toml.

A role is played by a provider: ``llm`` (any OpenAI-compatible endpoint through ChatOpenAI), ``manual``
(a person or another agent answers the prompt files the run writes), or ``rules`` (no model: the planner
by the feature bandit, the critic by the rule-based diagnosis; not for the coder). Only ``llm`` roles
need a model, an endpoint and a key, so a run with a manual coder and rule-based planner and critic
needs no endpoint at all.

Precedence, per setting and role: a flag beats an environment variable, which beats the config file;
within one source a role-specific value (``--coder-model``, ``CUDA_LLM_CODER_MODEL``, ``[llm.coder]``)
beats the general one. API keys come only from flags or the environment (the config file may name the
variable to read with ``api_key_env``), so cuda-llm.toml can be committed without secrets. A run saves
its resolved settings without keys (``redacted``) and ``from_saved`` rebuilds exactly them on resume,
each role with its own values.
"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any, Callable, Literal, Mapping

from pydantic import BaseModel, Field, ValidationError

from cuda_llm.agents.errors import LLMConfigError

ROLES = ("planner", "coder", "critic")
Provider = Literal["llm", "manual", "rules"]
PROVIDERS: tuple[str, ...] = ("llm", "manual", "rules")
RULES_ROLES = ("planner", "critic")      # roles that can run with no model at all
CONFIG_FILE = "cuda-llm.toml"
CONFIG_ENV = "CUDA_LLM_CONFIG"
# Local servers (vLLM, Ollama, llama.cpp, SGLang) accept any key; the OpenAI client insists on one.
PLACEHOLDER_API_KEY = "not-needed"
DEFAULT_TIMEOUT_S = 300.0
DEFAULT_MAX_RETRIES = 4
KNOWN_TABLES = {"llm"}   # top-level tables of cuda-llm.toml
DEFAULT_MAX_TOKENS_LIMIT = 65536          # the largest budget a cut-off answer is retried with
# Prompt size budgets in characters (about 4 per token): room for a whole 60 KB kernel, whole exemplars
# and the profile evidence on today's 128k+ context models. Cut, least important first, only beyond this.
DEFAULT_PROMPT_BUDGET = {"planner": 80_000, "coder": 240_000, "critic": 200_000}
_TOML_KEYS = {"provider", "model", "base_url", "api_key_env", "timeout_s", "max_retries", "temperature",
              "temperatures", "max_tokens", "max_tokens_limit", "reasoning_effort", "extra_body", "prompt_budget_chars"}


class RoleSettings(BaseModel):
    """One role's provider and, for ``llm``, its chat model."""

    provider: Provider = "llm"
    model: str | None = None
    base_url: str | None = None
    api_key: str = Field(default=PLACEHOLDER_API_KEY, repr=False)
    api_key_env: str | None = None           # the variable the key was read from (a name, saved for resume)
    temperature: float | None = None         # None: the server's default (some reasoning models reject any other)
    temperatures: list[float] = Field(default_factory=list)   # coder: a spread over the round's candidates
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_retries: int = DEFAULT_MAX_RETRIES
    max_tokens: int | None = None            # answer budget; a cut-off answer is retried with twice as much
    max_tokens_limit: int = DEFAULT_MAX_TOKENS_LIMIT
    reasoning_effort: str | None = None      # e.g. low / medium / high, for reasoning models
    extra_body: dict[str, Any] | None = None  # passed through in the request body (vLLM, SGLang, OpenRouter options)
    prompt_budget_chars: int = 0              # 0: the role's default (DEFAULT_PROMPT_BUDGET)

    @property
    def uses_endpoint(self) -> bool:
        return self.provider == "llm"

    def temperature_for(self, slot: int) -> float | None:
        """The temperature of the ``slot``-th candidate of a round: the spread in turn, else the one value."""
        if self.temperatures:
            return self.temperatures[slot % len(self.temperatures)]
        return self.temperature

    def describe(self) -> str:
        """For logs and the run's config file: everything but the key."""
        if self.provider != "llm":
            return self.provider
        return f"{self.model} @ {self.base_url or 'api.openai.com'}"


class LLMSettings(BaseModel):
    planner: RoleSettings
    coder: RoleSettings
    critic: RoleSettings

    def role(self, name: str) -> RoleSettings:
        if name not in ROLES:
            raise ValueError(f"unknown LLM role {name!r}; roles are {', '.join(ROLES)}")
        return getattr(self, name)

    def endpoint_roles(self) -> list[str]:
        """The roles that call an LLM endpoint (what a preflight check must reach)."""
        return [r for r in ROLES if self.role(r).uses_endpoint]

    def prompt_budget(self, name: str) -> int:
        return self.role(name).prompt_budget_chars or DEFAULT_PROMPT_BUDGET[name]

    def redacted(self) -> dict[str, Any]:
        """Settings without API keys, safe to write into the run directory."""
        return {r: self.role(r).model_dump(exclude={"api_key"}) for r in ROLES}

    @classmethod
    def from_saved(cls, saved: Mapping[str, Any], *, env: Mapping[str, str] | None = None,
                   api_key: str | None = None, overrides: Mapping[str, Mapping[str, Any]] | None = None) -> "LLMSettings":
        """The settings a run was started with (``redacted()``), keys read again from ``api_key`` or the
        environment. ``overrides`` (role -> fields) changes what was saved, e.g. who plays a role."""
        env = os.environ if env is None else env
        roles: dict[str, RoleSettings] = {}
        for role in ROLES:
            data = dict(saved.get(role) or {})
            data.update({k: v for k, v in ((overrides or {}).get(role) or {}).items() if v is not None})
            data.pop("api_key", None)
            try:
                rs = RoleSettings(**data)
            except ValidationError as exc:
                raise LLMConfigError(f"the run's saved settings for the {role}: {_validation_text(exc)}") from None
            _check_role(role, rs, "the run's saved settings")
            if rs.uses_endpoint:
                rs.api_key = _api_key(role, rs, api_key, env)
            roles[role] = rs
        return cls(**roles)


def _validation_text(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(x) for x in e['loc'])}: {e['msg']}" for e in exc.errors()[:6])


def _missing_message(roles: list[str]) -> str:
    return (
        f"No LLM model configured for {', '.join(roles)}. Pass --model NAME (and --base-url URL for a "
        "local OpenAI-compatible server such as vLLM, Ollama or llama.cpp), or set CUDA_LLM_MODEL "
        "(per role: CUDA_LLM_PLANNER_MODEL, CUDA_LLM_CODER_MODEL, CUDA_LLM_CRITIC_MODEL) with "
        "OPENAI_BASE_URL and OPENAI_API_KEY, or write `[llm] model = \"...\"` in cuda-llm.toml. "
        "A role can also be played without a model: --coder manual (you answer the prompt files), "
        "--planner rules, --critic rules. See docs/llm.md."
    )


def _read_config(path: Path | None, env: Mapping[str, str]) -> tuple[dict[str, Any], Path | None]:
    explicit = path is not None or bool(env.get(CONFIG_ENV))
    if path is None:
        path = Path(env[CONFIG_ENV]) if env.get(CONFIG_ENV) else Path.cwd() / CONFIG_FILE
    if not path.is_file():
        if explicit:
            raise LLMConfigError(f"{path}: config file not found (given by --config or {CONFIG_ENV})")
        return {}, None
    try:
        data = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise LLMConfigError(f"{path}: not valid TOML: {exc}") from None
    unknown_tables = sorted(set(data) - KNOWN_TABLES)
    if unknown_tables:
        raise LLMConfigError(f"{path}: unknown table(s) or key(s) {unknown_tables}; cuda-llm.toml holds "
                             f"{', '.join(f'[{t}]' for t in sorted(KNOWN_TABLES))} (see docs/llm.md)")
    llm = data.get("llm", {})
    if not isinstance(llm, dict):
        raise LLMConfigError(f"{path}: [llm] must be a table")
    for section, table in [("llm", llm)] + [(f"llm.{r}", llm.get(r, {})) for r in ROLES]:
        if not isinstance(table, dict):
            raise LLMConfigError(f"{path}: [{section}] must be a table")
        unknown = set(table) - _TOML_KEYS - (set(ROLES) if section == "llm" else set())
        if unknown:
            raise LLMConfigError(
                f"{path}: [{section}] has unknown keys {sorted(unknown)}; allowed: {sorted(_TOML_KEYS)}"
                + (" (API keys go in the environment; name the variable with api_key_env)" if "api_key" in unknown else "")
            )
    return llm, path


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None and v != ""), None)


def _picker(role: str, cli: Mapping[str, Any], env: Mapping[str, str], toml: Mapping[str, Any]
            ) -> Callable[..., Any]:
    """One role's lookup of a setting, first given wins: the role's flag, the general flag, the role's
    variable, the general variable, the role's table in the config file, the file's general key."""
    t_role, up = toml.get(role, {}), role.upper()

    def pick(key: str, env_general: str | None = None, *, role_env: bool = True) -> Any:
        return _first(cli.get(f"{role}_{key}"), cli.get(key),
                      env.get(f"CUDA_LLM_{up}_{key.upper()}") if role_env else None,
                      env.get(env_general) if env_general else None,
                      t_role.get(key), toml.get(key))
    return pick


def _number(value: Any, name: str, kind: type, where: str) -> Any:
    if value is None:
        return None
    try:
        return kind(value)
    except (TypeError, ValueError):
        raise LLMConfigError(f"{where}: {name} must be a {kind.__name__}, got {value!r}") from None


def parse_temperatures(value: Any, where: str = "temperatures") -> list[float]:
    """'0.2,0.6,1.0' or [0.2, 0.6, 1.0] -> [0.2, 0.6, 1.0], each in [0, 2]."""
    if value is None or value == "" or value == []:
        return []
    items = value.split(",") if isinstance(value, str) else list(value) if isinstance(value, (list, tuple)) else None
    if items is None:
        raise LLMConfigError(f"{where}: give temperatures as a list such as 0.2,0.6,1.0, got {value!r}")
    out = [_number(str(x).strip() if isinstance(x, str) else x, "each temperature", float, where) for x in items]
    bad = [t for t in out if not 0.0 <= t <= 2.0]
    if bad:
        raise LLMConfigError(f"{where}: temperatures must lie between 0 and 2, got {bad}")
    return out


def parse_extra_body(value: Any, where: str = "extra_body") -> dict[str, Any] | None:
    """A JSON object (flags, environment) or a TOML table -> dict."""
    if value is None or value == "":
        return None
    if isinstance(value, dict):
        return dict(value)
    try:
        data = json.loads(str(value))
    except json.JSONDecodeError as exc:
        raise LLMConfigError(f"{where}: extra_body must be a JSON object, e.g. '{{\"top_k\": 20}}': {exc}") from None
    if not isinstance(data, dict):
        raise LLMConfigError(f"{where}: extra_body must be a JSON object, got {type(data).__name__}")
    return data


def _check_role(role: str, rs: RoleSettings, where: str) -> None:
    if rs.provider == "rules" and role not in RULES_ROLES:
        raise LLMConfigError(f"{where}: the {role} cannot be played by rules (only the planner, by the feature "
                             "bandit, and the critic, by the rule-based diagnosis); use llm or manual")
    if rs.provider == "llm" and not rs.model:
        raise LLMConfigError(_missing_message([role]))
    if rs.max_tokens is not None and rs.max_tokens < 1:
        raise LLMConfigError(f"{where}: {role} max_tokens must be at least 1, got {rs.max_tokens}")
    if rs.timeout_s <= 0:
        raise LLMConfigError(f"{where}: timeout_s must be positive, got {rs.timeout_s}")
    if rs.max_retries < 0:
        raise LLMConfigError(f"{where}: max_retries must be 0 or more, got {rs.max_retries}")
    if rs.prompt_budget_chars < 0:
        raise LLMConfigError(f"{where}: prompt_budget_chars must be positive (or 0 for the default)")


def _api_key(role: str, rs: RoleSettings, given: str | None, env: Mapping[str, str]) -> str:
    key_env = rs.api_key_env or "OPENAI_API_KEY"
    key = _first(given, env.get(key_env), env.get("OPENAI_API_KEY") if key_env != "OPENAI_API_KEY" else None)
    if key is not None:
        return str(key)
    if rs.base_url is None:
        raise LLMConfigError(
            f"No API key for the {role} model {rs.model!r} on api.openai.com: set {key_env} "
            "(or pass --api-key), or pass --base-url / set OPENAI_BASE_URL for a local server "
            "that needs no key."
        )
    return PLACEHOLDER_API_KEY


def load_settings(
    cli: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    config_path: Path | None = None,
) -> LLMSettings:
    """Resolve every role's settings; raise LLMConfigError (naming flags and variables) if unusable.

    ``cli`` keys (None or absent = not given): provider, model, base_url, api_key, temperature, timeout_s,
    max_retries, max_tokens, reasoning_effort, extra_body, config (a path, same as ``config_path``); per
    role ``<role>_<key>`` for provider, model, base_url, temperature, max_tokens, reasoning_effort,
    extra_body, and ``coder_temperatures``. Call this before any other work so a missing model fails fast.
    """
    cli = dict(cli or {})
    env = os.environ if env is None else env
    if config_path is None and cli.get("config"):
        config_path = Path(cli["config"])
    toml, toml_path = _read_config(config_path, env)
    where = str(toml_path or "settings")

    roles: dict[str, RoleSettings] = {}
    missing: list[str] = []
    for role in ROLES:
        t_role = toml.get(role, {})
        up = role.upper()
        pick = _picker(role, cli, env, toml)
        provider = pick("provider", "CUDA_LLM_PROVIDER") or "llm"
        if provider not in PROVIDERS:
            raise LLMConfigError(f"{where}: the {role}'s provider {provider!r} is not one of {', '.join(PROVIDERS)}")
        model = pick("model", "CUDA_LLM_MODEL")
        base_url = _first(cli.get(f"{role}_base_url"), cli.get("base_url"), env.get(f"CUDA_LLM_{up}_BASE_URL"),
                          env.get("OPENAI_BASE_URL"), t_role.get("base_url"), toml.get("base_url"))
        key_env = _first(t_role.get("api_key_env"), toml.get("api_key_env"))
        temperatures = parse_temperatures(pick("temperatures", "CUDA_LLM_TEMPERATURES"), where) if role == "coder" else []
        try:
            rs = RoleSettings(
                provider=provider,
                model=None if model is None else str(model),
                base_url=base_url, api_key_env=key_env,
                temperature=_number(pick("temperature", "CUDA_LLM_TEMPERATURE"), "temperature", float, where),
                temperatures=temperatures,
                timeout_s=_first(_number(pick("timeout_s", "CUDA_LLM_TIMEOUT_S", role_env=False), "timeout_s", float, where),
                                 DEFAULT_TIMEOUT_S),
                max_retries=_first(_number(pick("max_retries", "CUDA_LLM_MAX_RETRIES", role_env=False), "max_retries",
                                           int, where), DEFAULT_MAX_RETRIES),
                max_tokens=_number(pick("max_tokens", "CUDA_LLM_MAX_TOKENS"), "max_tokens", int, where),
                max_tokens_limit=_first(_number(pick("max_tokens_limit", role_env=False), "max_tokens_limit", int, where),
                                        DEFAULT_MAX_TOKENS_LIMIT),
                reasoning_effort=pick("reasoning_effort", "CUDA_LLM_REASONING_EFFORT"),
                extra_body=parse_extra_body(pick("extra_body", "CUDA_LLM_EXTRA_BODY"), where),
                prompt_budget_chars=_first(_number(pick("prompt_budget_chars", role_env=False), "prompt_budget_chars",
                                                   int, where), 0),
            )
        except ValidationError as exc:
            raise LLMConfigError(f"{where}: {role}: {_validation_text(exc)}") from None
        if rs.provider == "llm" and not rs.model:
            missing.append(role)
            continue
        _check_role(role, rs, where)
        roles[role] = rs
    if missing:
        raise LLMConfigError(_missing_message(missing))
    for role, rs in roles.items():   # keys last: a missing model is the more useful first message
        if rs.uses_endpoint:
            rs.api_key = _api_key(role, rs, cli.get("api_key"), env)
    return LLMSettings(**roles)

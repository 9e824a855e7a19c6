"""Which LLM each role uses: CLI flags over environment variables over cuda-llm.toml.

Precedence, per setting and role: a flag beats an environment variable, which beats the config file;
within one source a role-specific value (``--coder-model``, ``CUDA_LLM_CODER_MODEL``,
``CUDA_LLM_CODER_BASE_URL``, ``[llm.coder]``) beats the general one. API keys come only from flags or
the environment (the config file may name the variable to read with ``api_key_env``), so cuda-llm.toml
can be committed without secrets.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Mapping

from pydantic import BaseModel, Field

from cuda_llm.agents.errors import LLMConfigError

ROLES = ("planner", "coder", "critic")
CONFIG_FILE = "cuda-llm.toml"
CONFIG_ENV = "CUDA_LLM_CONFIG"
# Local servers (vLLM, Ollama, llama.cpp, SGLang) accept any key; the OpenAI client insists on one.
PLACEHOLDER_API_KEY = "not-needed"
DEFAULT_TIMEOUT_S = 300.0
DEFAULT_MAX_RETRIES = 4
KNOWN_TABLES = {"llm"}   # top-level tables of cuda-llm.toml
_TOML_KEYS = {"model", "base_url", "api_key_env", "timeout_s", "max_retries", "temperature"}


class RoleSettings(BaseModel):
    """One role's chat model."""

    model: str
    base_url: str | None = None
    api_key: str = Field(default=PLACEHOLDER_API_KEY, repr=False)
    temperature: float | None = None  # None: the server's default (some reasoning models reject any other)
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_retries: int = DEFAULT_MAX_RETRIES

    def describe(self) -> str:
        """For logs and the run's config file: everything but the key."""
        return f"{self.model} @ {self.base_url or 'api.openai.com'}"


class LLMSettings(BaseModel):
    planner: RoleSettings
    coder: RoleSettings
    critic: RoleSettings

    def role(self, name: str) -> RoleSettings:
        if name not in ROLES:
            raise ValueError(f"unknown LLM role {name!r}; roles are {', '.join(ROLES)}")
        return getattr(self, name)

    def redacted(self) -> dict[str, Any]:
        """Settings without API keys, safe to write into the run directory."""
        return {r: self.role(r).model_dump(exclude={"api_key"}) for r in ROLES}


def _missing_message(roles: list[str]) -> str:
    return (
        f"No LLM model configured for {', '.join(roles)}. Pass --model NAME (and --base-url URL for a "
        "local OpenAI-compatible server such as vLLM, Ollama or llama.cpp), or set CUDA_LLM_MODEL "
        "(per role: CUDA_LLM_PLANNER_MODEL, CUDA_LLM_CODER_MODEL, CUDA_LLM_CRITIC_MODEL) with "
        "OPENAI_BASE_URL and OPENAI_API_KEY, or write `[llm] model = \"...\"` in cuda-llm.toml. "
        "See docs/llm.md."
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


def _number(value: Any, name: str, kind: type, where: str) -> Any:
    if value is None:
        return None
    try:
        return kind(value)
    except (TypeError, ValueError):
        raise LLMConfigError(f"{where}: {name} must be a {kind.__name__}, got {value!r}") from None


def load_settings(
    cli: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    config_path: Path | None = None,
) -> LLMSettings:
    """Resolve every role's settings; raise LLMConfigError (naming flags and variables) if unusable.

    ``cli`` keys (None or absent = not given): model, base_url, api_key, temperature, timeout_s,
    max_retries, planner_model, coder_model, critic_model, config (a path, same as ``config_path``).
    Call this before any other work so a missing model fails fast.
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
        model = _first(
            cli.get(f"{role}_model"), cli.get("model"),
            env.get(f"CUDA_LLM_{role.upper()}_MODEL"), env.get("CUDA_LLM_MODEL"),
            t_role.get("model"), toml.get("model"),
        )
        if model is None:
            missing.append(role)
            continue
        base_url = _first(cli.get(f"{role}_base_url"), cli.get("base_url"),
                          env.get(f"CUDA_LLM_{role.upper()}_BASE_URL"), env.get("OPENAI_BASE_URL"),
                          t_role.get("base_url"), toml.get("base_url"))
        key_env = _first(t_role.get("api_key_env"), toml.get("api_key_env"), "OPENAI_API_KEY")
        api_key = _first(cli.get("api_key"), env.get(key_env), env.get("OPENAI_API_KEY") if key_env != "OPENAI_API_KEY" else None)
        if api_key is None:
            if base_url is None:
                raise LLMConfigError(
                    f"No API key for the {role} model {model!r} on api.openai.com: set {key_env} "
                    "(or pass --api-key), or pass --base-url / set OPENAI_BASE_URL for a local server "
                    "that needs no key."
                )
            api_key = PLACEHOLDER_API_KEY
        temperature = _number(_first(cli.get("temperature"), env.get("CUDA_LLM_TEMPERATURE"),
                                     t_role.get("temperature"), toml.get("temperature")), "temperature", float, where)
        timeout_s = _number(_first(cli.get("timeout_s"), env.get("CUDA_LLM_TIMEOUT_S"),
                                   t_role.get("timeout_s"), toml.get("timeout_s")), "timeout_s", float, where)
        max_retries = _number(_first(cli.get("max_retries"), env.get("CUDA_LLM_MAX_RETRIES"),
                                     t_role.get("max_retries"), toml.get("max_retries")), "max_retries", int, where)
        if timeout_s is not None and timeout_s <= 0:
            raise LLMConfigError(f"{where}: timeout_s must be positive, got {timeout_s}")
        if max_retries is not None and max_retries < 0:
            raise LLMConfigError(f"{where}: max_retries must be 0 or more, got {max_retries}")
        roles[role] = RoleSettings(
            model=str(model), base_url=base_url, api_key=str(api_key), temperature=temperature,
            timeout_s=timeout_s if timeout_s is not None else DEFAULT_TIMEOUT_S,
            max_retries=max_retries if max_retries is not None else DEFAULT_MAX_RETRIES,
        )
    if missing:
        raise LLMConfigError(_missing_message(missing))
    return LLMSettings(**roles)

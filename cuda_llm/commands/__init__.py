"""One module per `cuda-llm` subcommand (see cuda_llm/cli.py for the interface)."""

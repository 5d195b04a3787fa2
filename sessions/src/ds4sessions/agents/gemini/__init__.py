"""Gemini CLI sessions (shared/docs/gemini-cli-format.md; `@google/gemini-cli` 0.61.0 sources cited per rule).

- `models`: the CLI's windows, its compression default and prices (`ds4core/data/gemini-models.json`,
  made by `make_models`).
"""

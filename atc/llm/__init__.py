"""The model client: chat completions over the OpenAI HTTP API."""

"""Drop-in breakers for agent frameworks: DESIGN's `tool` policy at each framework's own tool hook.

One module per framework, each importing its framework only inside itself (install the extra
of its name): `pydantic_ai.BreakerCapability`, `openai_agents.protect`,
`langchain.BreakerMiddleware`, `claude_agent.breaker_hooks`, `google_adk.BreakerPlugin`. All of
them run their calls through `calls.AdapterCalls`, on the harness's one call path, so a
framework's tools get the classification, keys, probe, ladder, persistence, audit rows, feed
and console every other door gets (docs/adapters.md).
"""

"""The live feed: an engine's breakers and events over a websocket (docs/feed.md)."""

"""The Docker backend: containers running the in-sandbox fork server, the engine, and the image."""

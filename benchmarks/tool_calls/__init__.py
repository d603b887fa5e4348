"""Instructions per tool call as a run's calls grow: fevex and Agno side by side."""

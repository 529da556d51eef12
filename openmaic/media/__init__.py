"""Media inside a run: the asset store for generated media, and (built on it) the media lane, narration and
research steps of the generation pipeline."""

"""Text as the ranking and the sources see it: tokens, word batches, array helpers."""

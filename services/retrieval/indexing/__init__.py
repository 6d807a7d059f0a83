"""Keeping the indexes current: the change-log tailer and the writer lease."""

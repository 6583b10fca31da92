"""Measure what this machine can do: one timer, results that carry their own statistics."""

"""Renderers of analysis results; they know nothing of the wire."""

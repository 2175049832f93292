"""Frontends: model formats -> graph IR."""

"""Tools that read build outputs for people: artifact inspectors and the package format.

This layer sits above the runtime side (runtime, formats, executor) and below the CLI; it
never imports a compiler layer, so ``ember inspect`` runs on a deployment-only install.
"""

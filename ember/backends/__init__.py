"""External back ends shipped with ember, each registered through the public calls (a
``TargetKind`` with hooks, a pattern table, loaders) from its own package, and announced
through an ``ember.target_kinds`` entry point like any third-party back end."""

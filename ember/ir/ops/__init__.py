"""Built-in operator definitions, one file per op family; importing this package registers
them through the public ``register_op``. Each family adds one import line here."""

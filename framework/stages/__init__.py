"""The maintenance stages (compaction, retention, bin-packing, vacuum), their plans, and the
run that carries them out per partition. May import: spec, cleaner, log, clients."""

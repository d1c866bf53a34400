"""The partition log: one Delta table per topic partition, its offset bookkeeping in the
commit metadata, and topiclake's own tables beside it (history, committed offsets). May
import: errors, faults, session, spec, cleaner."""

"""How the command line shows things: records as ``read`` prints them, durations, and
the text of a ``plan`` and of a ``status``."""

from __future__ import annotations

import base64
from typing import Any


def _text_or_base64(data) -> Any:
    if data is None:
        return None
    if isinstance(data, str):
        return data
    raw = bytes(data)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(raw).decode("ascii")}


def _payload(data, kind: str) -> Any:
    if data is None:
        return None
    if kind == "binary":
        return base64.b64encode(bytes(data)).decode("ascii")
    return data


def record_json(row, spec, partition: int) -> dict:
    """A record as ``read`` prints it (the same shape ``produce`` takes)."""
    return {
        "partition": partition,
        "offset": row["offset"],
        "timestamp": row["timestamp"],
        "key": _payload(row["key"], spec.key_type),
        "value": _payload(row["value"], spec.value_type),
        "headers": [[h["key"], _text_or_base64(h["value"])] for h in (row["headers"] or [])],
    }


def ms_text(ms: int | None) -> str:
    if ms is None:
        return "-"
    seconds = ms / 1000
    if seconds < 120:
        return f"{seconds:.1f}s"
    if seconds < 7200:
        return f"{seconds / 60:.1f}min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f}d"


def plan_text(log, entry) -> str:
    c = entry["compaction"]
    lines = [f"{log.name} (version {entry['version']}):"]
    if c["skipped_because"]:
        lines.append(f"  compaction: never ({c['skipped_because']})")
    else:
        verdict = f"DUE ({', '.join(c['reasons'])})" if c["due"] else "not due"
        lines.append(f"  compaction: {verdict}; checkpoint C={c['checkpoint']}, "
                     f"first uncleanable U={c['first_uncleanable_offset']}, dirty ratio {c['dirty_ratio']:.3f} "
                     f"(threshold {c['min_cleanable_dirty_ratio']}), dirty {c['dirty_records']} record(s)/"
                     f"{c['dirty_bytes']} B, oldest dirty age {ms_text(c['oldest_dirty_age_ms'])}, "
                     f"max-compaction-delay {ms_text(c['max_compaction_delay_ms'])}")
        for reason, amount in sorted((c.get("would_remove") or {}).items()):
            lines.append(f"    would {'stamp' if reason == 'tombstone_kept' else 'remove'} {amount['records']} "
                         f"record(s) ({reason})")
    if "retention" in entry:
        r = entry["retention"]
        if r["due"]:
            w = r.get("would_remove", {})
            lines.append(f"  retention: DUE; log start {r['log_start_offset']} -> {r['new_log_start_offset']} "
                         f"by {', '.join(sorted(r['boundaries']))}; would remove {w.get('records')} record(s)/"
                         f"{w.get('bytes')} B; consumed retention: {r['consumed_retention']}")
        else:
            lines.append(f"  retention: nothing to remove (log start {r['log_start_offset']}); "
                         f"consumed retention: {r['consumed_retention']}")
    o = entry["optimize"]
    lines.append(f"  bin-packing: {'DUE' if o['due'] else 'not due'}; {o['why']}")
    t = entry["time_travel"]
    lines.append(f"  time travel: window {ms_text(t['time_travel_retention_ms'])}, oldest readable version "
                 f"{t['oldest_readable_version']}")
    return "\n".join(lines)


def status_text(entry: dict) -> str:
    """One partition's ``status`` line."""
    last = entry["last_run"]
    last_text = "never" if last is None else f"{last['stage']} at version {last['version_after']} ({last['validation']})"
    return (f"{entry['partition']}: log start {entry['log_start_offset']}, end offset {entry['log_end_offset']}, "
            f"checkpoint {entry['checkpoint']}, {entry['records']} record(s)/{entry['bytes']} B in "
            f"{entry['data_files']} data file(s), dirty ratio {entry['dirty_ratio']:.3f}, "
            f"oldest dirty age {ms_text(entry['oldest_dirty_age_ms'])}, pending tombstones "
            f"{entry['pending_tombstones']}, compaction {'due' if entry['compaction_due'] else 'not due'}, "
            f"last run: {last_text}")

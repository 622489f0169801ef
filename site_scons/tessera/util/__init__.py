"""Small helpers every stage shares: canonical JSON, atomic writes and
deterministic .npz files (canon), C identifiers from model names (cname).
Nothing here knows about networks; it imports nothing of tessera but the
errors."""

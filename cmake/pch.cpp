// Anchor for the shared precompiled header; intentionally empty.

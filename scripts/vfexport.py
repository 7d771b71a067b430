"""What the model export scripts share (export-torchvision.py, export-clip.py, export-i3d.py,
export-audio.py): marking a file with whose weights it holds."""


def mark_weights(path, value):
    """Append a metadata_props entry (ModelProto field 14) "vidfeat_weights" = value to the file:
    a protobuf message may be continued by appending fields, so the graph is not rewritten.
    vidfeat reads it to tell random weights from a checkpoint's (engine/manifest.h)."""
    key, val = b"vidfeat_weights", value[:100].encode()
    entry = bytes([0x0a, len(key)]) + key + bytes([0x12, len(val)]) + val
    assert len(entry) < 128  # one-byte lengths
    with open(path, "ab") as f:
        f.write(bytes([(14 << 3) | 2, len(entry)]) + entry)

"""The flattened graph: tape (recording, reclamation) and the compiled scheduler."""

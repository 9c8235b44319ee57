"""The write plan of a probe: which unsafe calls it sends, inside which scope, and what they created."""

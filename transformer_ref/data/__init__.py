"""Small data files shipped with transformer_ref (see transformer_ref.corpus)."""

"""An Obsidian-style vault of markdown nodes (docs/vault.md): read, write, mint, link."""

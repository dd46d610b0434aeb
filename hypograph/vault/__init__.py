"""An Obsidian-style vault of markdown nodes (seed 000): read, write, mint, link."""

// The workflow page (placeholder: built by its owner).

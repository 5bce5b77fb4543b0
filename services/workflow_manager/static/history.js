// The history page (placeholder: built by its owner).

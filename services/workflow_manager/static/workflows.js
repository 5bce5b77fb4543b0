// The workflows page (placeholder: built by its owner).

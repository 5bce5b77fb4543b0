// The storage page (placeholder: built by its owner).

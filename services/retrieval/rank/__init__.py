"""The learned ranking stage: features and fit, its models' lifecycle and storage."""

"""The agent integration kit: what `vera connect` writes into a project for a coding runtime."""

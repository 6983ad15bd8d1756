"""What an operator runs against a workspace: counting it, reading failures, repairs."""

"""What an operator runs against a workspace: counting it, reading failures, repairs, and reading what populate is given."""

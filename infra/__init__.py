"""The CDK app: one Construct per concern, wired together by :class:`infra.stack.S3wqStack`."""
